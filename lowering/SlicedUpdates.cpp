//===- SlicedUpdates.cpp - AdamW on a parameter's block where it lies -----===//
//
// --rt-fold-sliced-updates: ZeRO-1/2 slice each rank's chunk of a
// parameter (slice_block, lowering/FlatBuckets.h) into a row only for
// AdamW to read it there. Where that AdamW is the slice's only reader, it
// becomes an adamw_block that reads the chunk in the parameter itself: the
// copy of half the parameters (a dp2 gpt2-124m step: 62 M floats, 2% of
// the step on CPU ranks) and its row are gone. The same kernel on the same
// values: the results are bit-identical.
//
//===----------------------------------------------------------------------===//

#include "lowering/Passes.h"
#include "lowering/RtEffects.h"

#include "dialects/Rt/RtOps.h"
#include "dialects/Rt/RtViews.h"
#include "runtime/program/KernelTable.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Threading.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SetVector.h"

namespace partition {
#define GEN_PASS_DEF_FOLDSLICEDUPDATESPASS
#include "lowering/Passes.h.inc"
} // namespace partition

using namespace mlir;

namespace partition {
namespace {

/// adamw's inputs (runtime/program/Kernels.def): param, grad, m, v, step, lr.
constexpr unsigned kParam = 0;

bool isKernel(Operation *op, runtime::KernelId id) {
  auto kernel = dyn_cast<rt::KernelOp>(op);
  return kernel && kernel.getInfo().id == id;
}

struct Fold {
  rt::KernelOp slice, update;
};

/// The slices of `body` that an AdamW can read in place, and that AdamW.
SmallVector<Fold> findFolds(Block &body) {
  // The buffers a fold depends on: each slice's input, index and result.
  llvm::DenseSet<Value> watched;
  for (Operation &op : body)
    if (isKernel(&op, runtime::KernelId::SliceBlock))
      for (Value operand : op.getOperands())
        watched.insert(rt::viewedBuffer(operand));
  if (watched.empty())
    return {};
  // Every non-view use of those buffers, by position: who reads or writes
  // which part of them.
  DenseMap<Operation *, unsigned> position;
  DenseMap<Value, SmallVector<std::pair<unsigned, Value>>> accesses;
  SmallVector<Operation *> ops;
  for (Operation &op : body) {
    const unsigned at = ops.size();
    position[&op] = at;
    ops.push_back(&op);
    if (rt::isView(&op))
      continue;
    for (Value operand : op.getOperands())
      if (isa<MemRefType>(operand.getType())) {
        Value base = rt::viewedBuffer(operand);
        if (watched.contains(base))
          accesses[base].push_back({at, operand});
      }
  }
  auto writtenBetween = [&](Value buffer, unsigned from, unsigned to) {
    Value base = rt::viewedBuffer(buffer);
    llvm::SmallPtrSet<Value, 1> bases = {base};
    auto it = accesses.find(base);
    if (it == accesses.end())
      return false;
    for (auto [at, operand] : it->second)
      if (at > from && at < to && rteffects::writesAny(ops[at], bases))
        return true;
    return false;
  };

  SmallVector<Fold> folds;
  for (Operation *op : ops) {
    if (!isKernel(op, runtime::KernelId::SliceBlock))
      continue;
    auto slice = cast<rt::KernelOp>(op);
    // A chunk of the parameter seen flat: block `index` of `blocks` along
    // dimension 0 of a contiguous buffer is its elements [index * n, (index
    // + 1) * n).
    ArrayRef<int64_t> ints = slice.getInts();
    Value parameter = slice.getInputs()[0], index = slice.getInputs()[1];
    Value chunk = slice.getOutputs()[0];
    auto parameterType = cast<MemRefType>(parameter.getType());
    if (ints.size() != 2 || ints[0] != 0 ||
        !parameterType.getElementType().isF32() ||
        !rt::viewedBytes(parameter))
      continue;
    // Written into a buffer of the step's own (a row), whose bytes there
    // nothing but one AdamW's parameter reads.
    Value row = rt::viewedBuffer(chunk);
    std::optional<std::pair<int64_t, int64_t>> bytes = rt::viewedBytes(chunk);
    if (!bytes || !row.getDefiningOp<memref::AllocOp>())
      continue;
    const unsigned at = position[op];
    rt::KernelOp update;
    bool alone = true;
    for (auto [other, operand] : accesses.find(row)->second) {
      if (other <= at || !rt::mayOverlap(operand, chunk))
        continue;
      auto kernel = dyn_cast<rt::KernelOp>(ops[other]);
      bool readsChunk =
          kernel && isKernel(kernel, runtime::KernelId::AdamW) &&
          kernel.getInputs()[kParam] == operand &&
          rt::viewedBytes(operand) == bytes && (!update || update == kernel);
      if (!readsChunk) {
        alone = false;
        break;
      }
      // The chunk is AdamW's parameter and nothing else of it.
      for (OpOperand &use : kernel->getOpOperands())
        if (use.getOperandNumber() != kParam &&
            rt::viewedBuffer(use.get()) == row &&
            rt::mayOverlap(use.get(), chunk))
          alone = false;
      update = kernel;
    }
    if (!alone || !update)
      continue;
    // The parameter and the index still hold what the slice read when
    // AdamW runs, and both run in one stretch of the step (not one in the
    // micro-batch loop, the other after it).
    const unsigned updateAt = position[update];
    bool sameStretch = true;
    for (unsigned k = at + 1; k < updateAt; ++k)
      if (isa<rt::MicrobatchLoopBeginOp, rt::MicrobatchLoopEndOp>(ops[k]))
        sameStretch = false;
    if (!sameStretch || writtenBetween(parameter, at, updateAt) ||
        writtenBetween(index, at, updateAt))
      continue;
    folds.push_back({slice, update});
  }
  return folds;
}

/// Erases the views and allocations among `values` (and what they view)
/// that nothing uses any more.
void eraseUnused(llvm::SetVector<Value> values) {
  while (!values.empty()) {
    Value value = values.pop_back_val();
    Operation *op = value.getDefiningOp();
    if (!op || !value.use_empty() ||
        !(rt::isView(op) || isa<memref::AllocOp>(op)))
      continue;
    for (Value operand : op->getOperands())
      values.insert(operand);
    op->erase();
  }
}

/// Folds the slices of `function` that an AdamW can read in place.
void foldSlicedUpdates(func::FuncOp function) {
  std::string_view name = runtime::kernelName(runtime::KernelId::AdamWBlock);
  llvm::SetVector<Value> dropped;
  for (Fold fold : findFolds(function.getBody().front())) {
    OpBuilder builder(fold.update);
    ValueRange in = fold.update.getInputs();
    SmallVector<Value> inputs = {fold.slice.getInputs()[0],
                                 fold.slice.getInputs()[1]};
    inputs.append(in.begin() + 1, in.end());
    rt::KernelOp::create(builder, fold.update.getLoc(),
                         llvm::StringRef(name.data(), name.size()), inputs,
                         fold.update.getOutputs(),
                         ArrayRef<int64_t>{fold.slice.getInts()[1]},
                         fold.update.getFloats());
    dropped.insert(in[kParam]);
    dropped.insert(fold.slice.getOutputs()[0]);
    fold.update.erase();
    fold.slice.erase();
  }
  eraseUnused(std::move(dropped));
}

struct FoldSlicedUpdatesPass
    : public impl::FoldSlicedUpdatesPassBase<FoldSlicedUpdatesPass> {
  void runOnOperation() override {
    // Each function on its own (a pipeline's stages and evaluation steps
    // share nothing here), on the context's threads.
    SmallVector<func::FuncOp> functions;
    for (auto function : getOperation().getOps<func::FuncOp>())
      if (!function.isExternal())
        functions.push_back(function);
    parallelForEach(&getContext(), functions, foldSlicedUpdates);
  }
};

} // namespace
} // namespace partition
