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
    auto type = cast<ShapedType>(function.getArgumentTypes()[i]);
    if (function.getArgAttr(i, xfmr::XfmrDialect::kParamAttrName))
      stats.parameters += type.getNumElements();
    auto input = function.getArgAttrOfType<StringAttr>(
        i, xfmr::XfmrDialect::kInputAttrName);
    if (input && input.getValue() == "tokens") {
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
