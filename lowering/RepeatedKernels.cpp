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

bool anyReader(Value buffer, llvm::function_ref<bool(Operation *)> reads) {
  SmallVector<Value> worklist{buffer};
  while (!worklist.empty())
    for (Operation *user : worklist.pop_back_val().getUsers()) {
      if (rt::isView(user))
        worklist.push_back(user->getResult(0));
      else if (reads(user))
        return true;
    }
  return false;
}

bool anyReader(KernelOp kernel, llvm::function_ref<bool(Operation *)> reads) {
  return llvm::any_of(kernel.getOutputs(), [&](Value output) {
    return anyReader(output, [&](Operation *user) {
      return user != kernel.getOperation() && reads(user);
    });
  });
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

llvm::hash_code attributesHash(Operation *op) {
  return llvm::hash_combine(
      op->hashProperties(),
      op->getDiscardableAttrDictionary().getAsOpaquePointer());
}

bool sameAttributes(Operation *a, Operation *b) {
  return a->getName() == b->getName() &&
         a->getDiscardableAttrDictionary() ==
             b->getDiscardableAttrDictionary() &&
         a->getName().compareOpProperties(a->getPropertiesStorage(),
                                          b->getPropertiesStorage());
}

bool sameAttributesButLabels(Operation *a, Operation *b) {
  if (sameAttributes(a, b))
    return true;
  // Rarely reached (the labeled ops): the dictionaries only then.
  auto withoutLabel = [](Operation *op) {
    NamedAttrList list(op->getAttrDictionary());
    list.erase("label");
    return list.getDictionary(op->getContext());
  };
  return a->getName() == b->getName() && withoutLabel(a) == withoutLabel(b);
}

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
  DenseMap<Operation *, size_t> position;
  for (auto [index, op] : llvm::enumerate(ops))
    position[op] = index;
  // Whether a kernel's outputs are read after `at`.
  auto readAfter = [&](KernelOp kernel, size_t at) {
    return anyReader(kernel, [&](Operation *user) {
      auto it = position.find(user);
      return it != position.end() && it->second > at;
    });
  };
  SmallVector<Operation *> merged;
  for (auto [index, op] : llvm::enumerate(ops)) {
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
        attributesHash(kernel),
        llvm::hash_combine_range(inputs.begin(), inputs.end()),
        llvm::hash_combine_range(kernel.getOutputs().getTypes().begin(),
                                 kernel.getOutputs().getTypes().end()));
    SmallVector<Kept, 1> &same = kept[hash];
    // The first such kernel whose outputs are still read after this one:
    // merged, the two buffers become one live over both their ranges. One
    // read no more (a forward's copy where the backward casts again) is
    // left dead rather than kept alive until here.
    Kept *first = nullptr;
    for (Kept &other : same)
      if (readAfter(other.kernel, index) &&
          sameAttributes(other.kernel, kernel) &&
          other.inputs == inputs &&
          other.kernel.getOutputs().getTypes() ==
              kernel.getOutputs().getTypes()) {
        first = &other;
        break;
      }
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

DenseSet<Operation *>
kernelsToHoist(ArrayRef<KernelOp> candidates,
               llvm::function_ref<int(Operation *)> blockOf,
               llvm::function_ref<bool(KernelOp)> isConstant) {
  DenseSet<Operation *> hoist, candidate;
  for (KernelOp kernel : candidates)
    candidate.insert(kernel);
  auto writerOf = [&](Value input) {
    KernelOp writer = soleKernelWriter(rt::viewedBuffer(input));
    return writer && candidate.contains(writer) ? writer : KernelOp();
  };
  for (KernelOp kernel : candidates) {
    unsigned constants = 0;
    bool others = llvm::any_of(kernel.getInputs(), [&](Value input) {
      Value buffer = rt::viewedBuffer(input);
      KernelOp writer = soleKernelWriter(buffer);
      if (writer && (hoist.contains(writer) || isConstant(writer)))
        return !++constants;
      return !isa<BlockArgument>(buffer); // an axis index is an argument
    });
    if (kernel.getInputs().empty() || (constants && !others))
      hoist.insert(kernel);
  }
  // The candidates by a hash of kernel, attributes and inputs.
  DenseMap<Operation *, size_t> hashes;
  DenseMap<size_t, SmallVector<KernelOp, 2>> alike;
  for (KernelOp kernel : candidates) {
    size_t hash = llvm::hash_combine(
        attributesHash(kernel),
        llvm::hash_combine_range(kernel.getInputs().begin(),
                                 kernel.getInputs().end()));
    hashes[kernel] = hash;
    alike[hash].push_back(kernel);
  }
  // Until nothing changes: what another block reads, what a hoisted kernel
  // reads, and the counterparts of hoisted kernels.
  for (bool changed = true; changed;) {
    changed = false;
    for (KernelOp kernel : llvm::reverse(candidates)) {
      if (!hoist.contains(kernel) &&
          anyReader(kernel, [&](Operation *user) {
            return blockOf(user) != blockOf(kernel);
          }))
        changed |= hoist.insert(kernel).second;
      if (!hoist.contains(kernel))
        continue;
      for (Value input : kernel.getInputs())
        if (KernelOp writer = writerOf(input))
          changed |= hoist.insert(writer).second;
    }
    // The body and its copy stay alike: a kernel whose counterpart (the
    // same kernel on the same inputs in the other block) moves moves too,
    // and one without a counterpart (the copy's micro-batch has that value
    // from up front) moves.
    for (KernelOp kernel : candidates) {
      KernelOp counterpart;
      for (KernelOp other : alike[hashes.lookup(kernel)])
        if (blockOf(other) != blockOf(kernel) &&
            sameAttributes(other, kernel) &&
            llvm::equal(other.getInputs(), kernel.getInputs()) &&
            (!counterpart || hoist.contains(other)))
          counterpart = other;
      if (!counterpart || hoist.contains(counterpart))
        changed |= hoist.insert(kernel).second;
    }
  }
  return hoist;
}

bool fillBlocksOfFills(Block &body) {
  SmallVector<KernelOp> slices, fills;
  bool changed = false;
  for (auto kernel : body.getOps<KernelOp>())
    if (kernel.getKernel() == "slice_block")
      slices.push_back(kernel);
  for (KernelOp slice : slices) {
    KernelOp fill =
        soleKernelWriter(rt::viewedBuffer(slice.getInputs().front()));
    // Every element of the fill's buffer holds its value: so does a block.
    if (!fill || fill.getKernel() != "fill" || !fill.getInputs().empty())
      continue;
    OpBuilder builder(slice);
    KernelOp::create(builder, slice.getLoc(), fill.getKernel(), ValueRange(),
                     slice.getOutputs(), fill.getInts(), fill.getFloats());
    slice.erase();
    if (!llvm::is_contained(fills, fill))
      fills.push_back(fill);
    changed = true;
  }
  // A fill whose buffer only it (and views nobody reads) uses any more.
  for (KernelOp fill : fills) {
    Value buffer = fill.getOutputs().front();
    if (!llvm::all_of(buffer.getUsers(), [&](Operation *user) {
          return user == fill.getOperation() ||
                 (rt::isView(user) && user->use_empty());
        }))
      continue;
    Operation *alloc = buffer.getDefiningOp();
    for (Operation *user : llvm::make_early_inc_range(buffer.getUsers()))
      user->erase();
    alloc->erase();
  }
  return changed;
}

void addWrittenBuffers(Operation *op, DenseSet<Value> &written) {
  if (auto kernel = dyn_cast<rt::KernelOp>(op)) {
    for (Value out : kernel.getOutputs())
      written.insert(rt::viewedBuffer(out));
  } else if (!rt::isView(op) && !isa<memref::AllocOp>(op)) {
    for (Value operand : op->getOperands())
      if (isa<MemRefType>(operand.getType()))
        written.insert(rt::viewedBuffer(operand));
  }
}

} // namespace partition
