//===- ModelStats.cpp - parameter, token and FLOP counts ------------------===//

#include "passes/analysis/ModelStats.h"

#include "passes/frontend/StepEntries.h"

#include "dialects/CheckedSize.h"
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
    std::optional<int64_t> elements =
        checkedElementCount(type.getShape());
    std::optional<int64_t> total =
        elements && isParam ? llvm::checkedAdd(stats.parameters, *elements)
                            : elements;
    if (!total)
      return function.emitError()
             << "the parameter count overflows 64 bits (at argument #" << i
             << ", " << argType << ")";
    if (isParam)
      stats.parameters = *total;
    if (isTokens) {
      stats.tokensPerStep = *elements;
      haveTokens = true;
    }
  }
  if (!haveTokens)
    return function.emitError()
           << "has no argument with xfmr.input = \"tokens\"";

  std::optional<int64_t> flops = 0;
  WalkResult walk = function.walk([&](xfmr::MatmulFlopsOpInterface op) {
    std::optional<int64_t> opFlops = op.getMatmulFlops();
    flops = opFlops ? llvm::checkedAdd(*flops, *opFlops) : std::nullopt;
    if (flops)
      return WalkResult::advance();
    op->emitOpError("makes the matmul FLOPs of the step overflow 64 bits");
    return WalkResult::interrupt();
  });
  if (walk.wasInterrupted())
    return failure();
  // A forward function predicts its training step: backward = 2 x forward.
  auto trainStep = function->getAttrOfType<DictionaryAttr>(
      xfmr::XfmrDialect::kTrainStepAttrName);
  std::optional<int64_t> perStep =
      trainStep ? flops : llvm::checkedMul(*flops, int64_t(3));
  // Under the micro-batch loop the step holds M0 of its M micro-batches,
  // alike: every matmul is one of theirs.
  if (trainStep && perStep)
    if (std::optional<pipeline::LoopLayout> loop = recordedLoop(function))
      perStep = llvm::checkedMul(*perStep / loop->compiled,
                                 int64_t(loop->microbatches));
  if (!perStep)
    return function.emitError()
           << "the matmul FLOPs of a training step (3 x " << *flops
           << " of the forward pass) overflow 64 bits";
  stats.flopsPerStep = *perStep;
  return stats;
}

} // namespace partition
