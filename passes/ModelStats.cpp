//===- ModelStats.cpp - parameter, token and FLOP counts ------------------===//

#include "passes/ModelStats.h"

#include "dialects/Xfmr/XfmrOps.h"

using namespace mlir;

namespace partition {

bool isModelFunction(func::FuncOp function) {
  for (unsigned i = 0, e = function.getNumArguments(); i < e; ++i)
    if (function.getArgAttr(i, xfmr::XfmrDialect::kParamAttrName))
      return true;
  return false;
}

FailureOr<ModelStats> computeModelStats(func::FuncOp function) {
  ModelStats stats;
  bool haveTokens = false;
  for (unsigned i = 0, e = function.getNumArguments(); i < e; ++i) {
    Type argType = function.getArgumentTypes()[i];
    auto input = function.getArgAttrOfType<StringAttr>(
        i, xfmr::XfmrDialect::kInputAttrName);
    bool isParam =
        function.getArgAttr(i, xfmr::XfmrDialect::kParamAttrName) != nullptr;
    bool isTokens = input && input.getValue() == "tokens";
    if (!isParam && !isTokens)
      continue; // step, lr, moments, ...: not counted, any type.
    // Counting elements needs a static shape.
    auto type = dyn_cast<ShapedType>(argType);
    if (!type || !type.hasStaticShape())
      return function.emitError()
             << "argument #" << i << " (" << (isParam ? "a parameter"
                                                      : "the tokens")
             << ") must have a static shape to be counted, but is "
             << argType;
    if (isParam)
      stats.parameters += type.getNumElements();
    if (isTokens) {
      stats.tokensPerStep = type.getNumElements();
      haveTokens = true;
    }
  }
  if (!haveTokens)
    return function.emitError()
           << "has no argument with xfmr.input = \"tokens\"";

  int64_t flops = 0;
  function.walk([&](xfmr::MatmulFlopsOpInterface op) {
    flops += op.getMatmulFlops();
  });
  // A forward function predicts its training step: backward = 2 x forward.
  bool isTrainStep =
      function->hasAttr(xfmr::XfmrDialect::kTrainStepAttrName);
  stats.flopsPerStep = isTrainStep ? flops : 3 * flops;
  return stats;
}

} // namespace partition
