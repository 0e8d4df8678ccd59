//===- RepeatedKernels.cpp - one kernel where several compute the same value -===//

#include "lowering/RepeatedKernels.h"

#include "dialects/Rt/RtViews.h"

#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/OperationSupport.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/Hashing.h"

using namespace mlir;
using partition::rt::KernelOp;

namespace partition {

KernelOp soleKernelWriter(Value buffer) {
  if (!buffer.getDefiningOp<memref::AllocOp>())
    return {};
  KernelOp writer;
  for (OpOperand &use : buffer.getUses()) {
    auto kernel = dyn_cast<KernelOp>(use.getOwner());
    if (!kernel) {
      if (!rt::isView(use.getOwner()))
        return {};
      continue;
    }
    if (use.getOperandNumber() >= kernel.getInputs().size()) {
      if (writer)
        return {};
      writer = kernel;
    }
  }
  return writer;
}

namespace {

/// Views by what they view: two views of the same buffer with the same
/// offsets, sizes and strides are one input to the merge.
class CanonicalViews {
public:
  Value of(Value input) {
    Operation *view = input.getDefiningOp();
    if (!view || !rt::isView(view))
      return input;
    llvm::hash_code hash = OperationEquivalence::computeHash(
        view, OperationEquivalence::directHashValue,
        OperationEquivalence::ignoreHashValue,
        OperationEquivalence::IgnoreLocations);
    SmallVector<Operation *, 1> &same = byHash[hash];
    for (Operation *other : same)
      if (OperationEquivalence::isEquivalentTo(
              view, other, OperationEquivalence::exactValueMatch, nullptr,
              OperationEquivalence::IgnoreLocations))
        return other->getResult(0);
    same.push_back(view);
    return input;
  }

private:
  DenseMap<size_t, SmallVector<Operation *, 1>> byHash;
};

/// The buffers `op` may write: a kernel's outputs, every buffer operand of
/// any other op but a view or allocation (a collective writes its own).
void addWrites(Operation *op, DenseSet<Value> &written) {
  if (rt::isView(op) || isa<memref::AllocOp>(op))
    return;
  auto kernel = dyn_cast<KernelOp>(op);
  ValueRange operands =
      kernel ? ValueRange(kernel.getOutputs()) : op->getOperands();
  for (Value operand : operands)
    if (isa<MemRefType>(operand.getType()))
      written.insert(rt::viewedBuffer(operand));
}

} // namespace

bool mergeRepeatedKernels(ArrayRef<Operation *> ops,
                          llvm::function_ref<bool(Operation *)> mayMerge) {
  // The buffers written so far, walking `ops` in order.
  DenseSet<Value> written;
  // The outputs of the kernels kept below: each written by its kernel
  // alone, from inputs unwritten until then, so the same wherever read.
  DenseSet<Value> stable;
  CanonicalViews views;
  struct Kept {
    KernelOp kernel;
    SmallVector<Value> inputs;
  };
  DenseMap<size_t, SmallVector<Kept, 1>> kept;
  SmallVector<Operation *> merged;
  for (Operation *op : ops) {
    auto kernel = dyn_cast<KernelOp>(op);
    // A kernel without inputs fills a constant; two zero fills may start
    // two sums the loop then goes on writing in place, each in its own.
    bool candidate = kernel && mayMerge(kernel) &&
                     !kernel.getInputs().empty() &&
                     !kernel.getOutputs().empty() &&
                     llvm::all_of(kernel.getOutputs(), [&](Value out) {
                       return soleKernelWriter(out) == kernel;
                     });
    SmallVector<Value> inputs;
    for (Value input : candidate ? kernel.getInputs() : ValueRange()) {
      Value buffer = rt::viewedBuffer(input);
      candidate = candidate && ((isa<BlockArgument>(buffer) &&
                                 !written.contains(buffer)) ||
                                stable.contains(input));
      inputs.push_back(views.of(input));
    }
    addWrites(op, written);
    if (!candidate)
      continue;
    size_t hash = llvm::hash_combine(
        kernel.getKernel(), kernel->getAttrDictionary().getAsOpaquePointer(),
        llvm::hash_combine_range(inputs.begin(), inputs.end()),
        llvm::hash_combine_range(kernel.getOutputs().getTypes().begin(),
                                 kernel.getOutputs().getTypes().end()));
    SmallVector<Kept, 1> &same = kept[hash];
    Kept *first = nullptr;
    for (Kept &other : same)
      if (other.kernel.getKernel() == kernel.getKernel() &&
          other.kernel->getAttrDictionary() == kernel->getAttrDictionary() &&
          other.inputs == inputs &&
          other.kernel.getOutputs().getTypes() ==
              kernel.getOutputs().getTypes())
        first = &other;
    if (!first) {
      for (Value out : kernel.getOutputs())
        stable.insert(out);
      same.push_back({kernel, std::move(inputs)});
      continue;
    }
    for (auto [mine, theirs] :
         llvm::zip(kernel.getOutputs(), first->kernel.getOutputs()))
      mine.replaceAllUsesExcept(theirs, kernel);
    merged.push_back(kernel);
  }
  for (Operation *kernel : merged) {
    SmallVector<Value> outputs(cast<KernelOp>(kernel).getOutputs());
    kernel->erase();
    for (Value out : outputs)
      out.getDefiningOp()->erase();
  }
  return !merged.empty();
}

} // namespace partition
