//===- RtOps.cpp - verifier of rt.kernel ----------------------------------===//

#include "dialects/Rt/RtOps.h"

#include "runtime/KernelTable.h"

#include "mlir/Dialect/MemRef/Utils/MemRefUtils.h"
#include "mlir/IR/OpImplementation.h"

using namespace mlir;
using namespace partition::rt;

LogicalResult KernelOp::verify() {
  const runtime::KernelInfo *info = runtime::lookupKernel(
      std::string_view(getKernel().data(), getKernel().size()));
  if (!info)
    return emitOpError() << "unknown kernel \"" << getKernel() << "\"";
  auto expectCount = [&](StringRef what, size_t actual,
                         int expected) -> LogicalResult {
    if (actual == static_cast<size_t>(expected))
      return success();
    return emitOpError() << "kernel \"" << getKernel() << "\" takes "
                         << expected << " " << what << ", but has " << actual;
  };
  if (failed(expectCount("inputs", getInputs().size(), info->inputs)) ||
      failed(expectCount("outputs", getOutputs().size(), info->outputs)) ||
      failed(expectCount("ints", getInts().size(), info->ints)) ||
      failed(expectCount("floats", getFloats().size(), info->floats)))
    return failure();
  for (Value operand : getOperation()->getOperands()) {
    auto type = cast<MemRefType>(operand.getType());
    if (!type.hasStaticShape() ||
        !memref::isStaticShapeAndContiguousRowMajor(type))
      return emitOpError() << "operand " << type
                           << " must have a static shape and a contiguous "
                              "row-major layout";
  }
  // Two outputs on one buffer would make the result depend on the order in
  // which the kernel writes them, even for kernels that run in place.
  OperandRange outputs = getOutputs();
  for (unsigned i = 0, e = outputs.size(); i < e; ++i)
    for (unsigned j = 0; j < i; ++j)
      if (outputs[i] == outputs[j])
        return emitOpError() << "kernel \"" << getKernel() << "\" writes one "
                             << "buffer twice: output #" << i
                             << " is output #" << j;
  if (!info->inPlace)
    for (Value output : getOutputs())
      if (llvm::is_contained(getInputs(), output))
        return emitOpError() << "kernel \"" << getKernel()
                             << "\" cannot write one of its inputs";
  return success();
}

#define GET_OP_CLASSES
#include "dialects/Rt/RtOps.cpp.inc"
