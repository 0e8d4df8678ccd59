//===- MicrobatchLoop.cpp - one copy of the middle micro-batches' code ----===//
//
// --rt-microbatch-loop: a step built with `microbatch-loop` holds the code
// of micro-batches 0, 1, 2 and k-1 (--xfmr-train-step). This pass checks
// that micro-batch 2's code is micro-batch 1's (the same ops, reading the
// same buffers, micro-batch 1's results where 1 read micro-batch 0's),
// deletes it, makes micro-batch 1's code read and write the buffers it
// carries from one micro-batch to the next in place, and brackets it with
// rt.microbatch_loop_begin / _end: the runtime runs it for micro-batches 1
// to k-2. The step's size and compile time then no longer grow with k.
//
// Why matching the code is enough: micro-batch 2's code is correct after
// micro-batch 1's (the compiled step is); if it is the same instructions on
// the same buffers, running those instructions once more after themselves
// is correct again, for any number of runs, the inputs aside (the runtime
// copies micro-batch i's rows into micro-batch 1's slice).
//
//===----------------------------------------------------------------------===//

#include "lowering/Passes.h"

#include "dialects/Rt/RtOps.h"
#include "dialects/Rt/RtViews.h"
#include "dialects/Xfmr/XfmrDialect.h"
#include "passes/frontend/StepEntries.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SetVector.h"

namespace partition {
#define GEN_PASS_DEF_MICROBATCHLOOPPASS
#include "lowering/Passes.h.inc"
} // namespace partition

using namespace mlir;
using partition::rt::KernelOp;
using partition::rt::RtDialect;

namespace partition {
namespace {

/// The micro-batch whose rows of a step input (an argument with rt.role
/// "tokens" or "targets") `op` views, or -1.
int64_t sliceMicroBatch(Operation *op) {
  auto subview = dyn_cast<memref::SubViewOp>(op);
  if (!subview)
    return -1;
  auto source = dyn_cast<BlockArgument>(subview.getSource());
  if (!source)
    return -1;
  auto function = cast<func::FuncOp>(source.getOwner()->getParentOp());
  auto role = function.getArgAttrOfType<StringAttr>(source.getArgNumber(),
                                                    RtDialect::kRoleAttrName);
  if (!role || (role.getValue() != "tokens" && role.getValue() != "targets"))
    return -1;
  int64_t rows = subview.getStaticSizes()[0];
  if (rows <= 0 || ShapedType::isDynamic(subview.getStaticOffsets()[0]))
    return -1;
  return subview.getStaticOffsets()[0] / rows;
}

/// The rows of micro-batch `micro` of a [k * rows, ...] input, whole rows:
/// the layout the runtime's copies assume.
bool isWholeRows(memref::SubViewOp slice) {
  auto source = cast<MemRefType>(slice.getSource().getType());
  ArrayRef<int64_t> offsets = slice.getStaticOffsets();
  ArrayRef<int64_t> sizes = slice.getStaticSizes();
  ArrayRef<int64_t> strides = slice.getStaticStrides();
  if (!source.getLayout().isIdentity() || sizes[0] <= 0 ||
      offsets[0] % sizes[0] != 0)
    return false;
  for (unsigned dim = 0; dim < offsets.size(); ++dim)
    if (strides[dim] != 1 ||
        (dim > 0 && (offsets[dim] != 0 || sizes[dim] != source.getDimSize(dim))))
      return false;
  return true;
}

/// Kernels that may write their result over their first input, element by
/// element (a gradient added to the accumulated one).
bool isElementwiseInPlace(Operation *op) {
  auto kernel = dyn_cast<KernelOp>(op);
  return kernel && kernel.getKernel() == "add";
}

/// The micro-batch loop of one function.
class Reroll {
public:
  Reroll(func::FuncOp function, int64_t count)
      : function(function), count(count) {}
  LogicalResult run();

private:
  InFlightDiagnostic fail() {
    return function.emitError()
           << "--rt-microbatch-loop: cannot keep one copy of @"
           << function.getSymName() << "'s middle micro-batches: ";
  }
  LogicalResult findBlocks();
  LogicalResult match();
  LogicalResult matchOp(Operation *first, Operation *second);
  LogicalResult matchOperand(Operation *first, Value x, Value y);
  LogicalResult checkCarried();
  void rewrite();

  bool inFirst(Operation *op) const {
    auto it = position.find(op);
    return it != position.end() && it->second >= begin[0] &&
           it->second < begin[1];
  }
  bool inSecond(Operation *op) const {
    auto it = position.find(op);
    return it != position.end() && it->second >= begin[1] &&
           it->second < begin[2];
  }
  bool inFirst(Value value) const {
    Operation *op = value.getDefiningOp();
    return op && inFirst(op);
  }

  func::FuncOp function;
  int64_t count;
  SmallVector<Operation *> ops;
  DenseMap<Operation *, size_t> position;
  /// Where micro-batches 1, 2 and 3 (k-1) start: the first op that views
  /// their rows. The loop's code is [begin[0], begin[1]), the copy it must
  /// match [begin[1], begin[2]).
  size_t begin[3] = {0, 0, 0};
  /// Micro-batch 2's values for micro-batch 1's.
  IRMapping secondOf;
  /// Buffers one micro-batch hands the next: micro-batch 1's code reads x,
  /// written before it, where micro-batch 2's reads y, written by micro-
  /// batch 1's code. In order of discovery.
  llvm::MapVector<Value, Value> carried;
  /// Micro-batch 1's views of its rows.
  SmallVector<Value> slices;
};

LogicalResult Reroll::findBlocks() {
  Block &body = function.getBody().front();
  for (Operation &op : body) {
    position[&op] = ops.size();
    ops.push_back(&op);
  }
  size_t none = ops.size();
  size_t first[4] = {none, none, none, none};
  for (auto [index, op] : llvm::enumerate(ops)) {
    int64_t micro = sliceMicroBatch(op);
    // The step built micro-batches 0, 1, 2 and k-1 (--xfmr-train-step
    // microbatch-loop): k-1 is the fourth.
    int64_t slot = micro <= 2 ? micro : micro == count + 1 ? 3 : -1;
    if (micro >= 0 && slot < 0)
      return fail() << "it views micro-batch " << micro
                    << "'s rows, but a loop over " << count
                    << " micro-batches builds micro-batches 0, 1, 2 and "
                    << count + 1 << " only";
    if (slot >= 0)
      first[slot] = std::min(first[slot], index);
  }
  for (int slot = 0; slot < 4; ++slot)
    if (first[slot] == none || (slot > 0 && first[slot] <= first[slot - 1]))
      return fail() << "the rows of micro-batches 0, 1, 2 and " << count + 1
                    << " are not first read in that order";
  begin[0] = first[1];
  begin[1] = first[2];
  begin[2] = first[3];
  if (begin[1] - begin[0] != begin[2] - begin[1])
    return fail() << "micro-batch 1's code has " << begin[1] - begin[0]
                  << " ops and micro-batch 2's " << begin[2] - begin[1];
  return success();
}

LogicalResult Reroll::matchOperand(Operation *first, Value x, Value y) {
  if (inFirst(x)) {
    // A value of micro-batch 1: micro-batch 2 reads its own.
    if (secondOf.lookupOrNull(x) != y)
      return fail() << "micro-batch 2 reads another value than micro-batch "
                       "1's counterpart at "
                    << first->getName() << " (op #" << position.lookup(first)
                    << ")";
    return success();
  }
  if (x == y)
    return success(); // Written before both: the same for every run.
  if (inFirst(y)) {
    // Handed on: x was written before the loop, y by micro-batch 1.
    auto [it, inserted] = carried.insert({x, y});
    if (!inserted && it->second != y)
      return fail() << "micro-batch 1 reads one buffer where micro-batch 2 "
                       "reads two";
    return success();
  }
  return fail() << "micro-batch 2 reads a value written before micro-batch "
                   "1 that micro-batch 1 does not, at "
                << first->getName() << " (op #" << position.lookup(first)
                << ")";
}

LogicalResult Reroll::matchOp(Operation *first, Operation *second) {
  auto where = [&] {
    return fail() << "micro-batch 2's op #" << position.lookup(second)
                  << " (" << second->getName() << ") is not micro-batch 1's ("
                  << first->getName() << "): ";
  };
  if (first->getName() != second->getName() ||
      first->getNumOperands() != second->getNumOperands() ||
      first->getNumResults() != second->getNumResults() ||
      first->getNumRegions() != 0 || second->getNumRegions() != 0)
    return where() << "another kind of op";
  int64_t firstSlice = sliceMicroBatch(first);
  int64_t secondSlice = sliceMicroBatch(second);
  if (firstSlice >= 0 || secondSlice >= 0) {
    // Micro-batch 1's and 2's views of their rows: the same but for the
    // rows.
    auto a = cast<memref::SubViewOp>(first);
    auto b = dyn_cast<memref::SubViewOp>(second);
    if (firstSlice != 1 || secondSlice != 2 || !b ||
        a.getSource() != b.getSource() ||
        a.getStaticSizes() != b.getStaticSizes() || !isWholeRows(a) ||
        !isWholeRows(b))
      return where() << "views other rows of the step's inputs";
    slices.push_back(a.getResult());
    secondOf.map(a.getResult(), b.getResult());
    return success();
  }
  // Labels name a collective in traces and errors ("partial sum 7 over
  // [tp]"): the loop's runs go by micro-batch 1's.
  auto attributes = [](Operation *op) {
    NamedAttrList list(op->getAttrDictionary());
    list.erase("label");
    return list.getDictionary(op->getContext());
  };
  if (attributes(first) != attributes(second) ||
      first->getResultTypes() != second->getResultTypes())
    return where() << "other attributes or result types";
  for (auto [x, y] : llvm::zip(first->getOperands(), second->getOperands()))
    if (failed(matchOperand(first, x, y)))
      return failure();
  for (auto [x, y] : llvm::zip(first->getResults(), second->getResults()))
    secondOf.map(x, y);
  return success();
}

LogicalResult Reroll::match() {
  for (size_t i = begin[0]; i < begin[1]; ++i)
    if (failed(matchOp(ops[i], ops[i + (begin[1] - begin[0])])))
      return failure();
  // What comes after reads micro-batch 2's values, which become micro-batch
  // 1's (its last run's); never micro-batch 1's own, which a loop cannot
  // keep apart from the runs after it.
  for (size_t i = begin[0]; i < begin[2]; ++i)
    for (Value result : ops[i]->getResults())
      for (Operation *user : result.getUsers()) {
        if (inFirst(user) || inSecond(user))
          continue;
        if (i < begin[1])
          return fail() << "op #" << position.lookup(user) << " ("
                        << user->getName() << ") after the loop reads a "
                        << "value of micro-batch 1 (op #" << i << ")";
        if (!isa<MemRefType>(result.getType()))
          return fail() << "op #" << position.lookup(user) << " ("
                        << user->getName() << ") after the loop waits for "
                        << "what micro-batch 2 started (op #" << i
                        << "): each run must finish what it starts";
      }
  return checkCarried();
}

LogicalResult Reroll::checkCarried() {
  auto accessesOf = [&](Value buffer) {
    SmallVector<size_t> at;
    SmallVector<Value> pending{buffer};
    while (!pending.empty()) {
      Value value = pending.pop_back_val();
      for (Operation *user : value.getUsers()) {
        if (rt::isView(user)) {
          pending.push_back(user->getResult(0));
          continue;
        }
        if (inFirst(user))
          at.push_back(position.lookup(user));
      }
    }
    return at;
  };
  for (auto [x, y] : carried) {
    auto xAlloc = x.getDefiningOp<memref::AllocOp>();
    auto yAlloc = y.getDefiningOp<memref::AllocOp>();
    if (!xAlloc || !yAlloc || x.getType() != y.getType())
      return fail() << "micro-batch 1 hands micro-batch 2 a "
                    << y.getType()
                    << " that is not a whole buffer of the one it read";
    // x's buffer now holds y: the loop's code must be done with x before it
    // writes y, or write y over x element by element.
    SmallVector<size_t> xAt = accessesOf(x), yAt = accessesOf(y);
    if (xAt.empty() || yAt.empty())
      continue;
    size_t lastX = *llvm::max_element(xAt), firstY = *llvm::min_element(yAt);
    if (lastX < firstY ||
        (lastX == firstY && isElementwiseInPlace(ops[lastX]) &&
         ops[lastX]->getOperand(0) == x))
      continue;
    return fail() << "micro-batch 1 writes the " << y.getType()
                  << " it hands on (op #" << firstY
                  << ") before it is done reading the one it was handed (op #"
                  << lastX << ")";
  }
  // What comes after the loop must not read a handed buffer's old value:
  // the loop writes over it.
  for (auto [x, y] : carried) {
    SmallVector<Value> pending{x};
    while (!pending.empty()) {
      Value value = pending.pop_back_val();
      for (Operation *user : value.getUsers()) {
        if (rt::isView(user))
          pending.push_back(user->getResult(0));
        else if (position.lookup(user) >= begin[2])
          return fail() << "op #" << position.lookup(user) << " ("
                        << user->getName() << ") after the loop reads a "
                        << "buffer micro-batch 1 writes over";
      }
    }
  }
  return success();
}

void Reroll::rewrite() {
  // After the loop, micro-batch 2's values are micro-batch 1's (its last
  // run's).
  for (size_t i = begin[1]; i < begin[2]; ++i)
    for (Value result : ops[i]->getResults())
      result.replaceUsesWithIf(
          ops[i - (begin[1] - begin[0])]->getResult(
              cast<OpResult>(result).getResultNumber()),
          [&](OpOperand &use) { return !inSecond(use.getOwner()); });
  for (size_t i = begin[2]; i-- > begin[1];)
    ops[i]->erase();
  // Each handed-on buffer is the one it was handed, written in place.
  for (auto [x, y] : carried) {
    Operation *alloc = y.getDefiningOp();
    y.replaceAllUsesWith(x);
    alloc->erase();
  }
  // The buffers written before the loop that it uses stay live to its end.
  SetVector<Value> live;
  Block &body = function.getBody().front();
  Operation *firstOp = ops[begin[0]];
  Operation *lastOp = ops[begin[1] - 1];
  for (Operation *op = firstOp;; op = op->getNextNode()) {
    for (Value operand : op->getOperands()) {
      if (!isa<MemRefType>(operand.getType()))
        continue;
      Value base = rt::viewedBuffer(operand);
      if (Operation *def = base.getDefiningOp();
          def && isa<memref::AllocOp>(def) && def->getBlock() == &body &&
          def->isBeforeInBlock(firstOp))
        live.insert(base);
    }
    if (op == lastOp)
      break;
  }
  OpBuilder builder(firstOp);
  auto loopBegin = rt::MicrobatchLoopBeginOp::create(
      builder, firstOp->getLoc(), count, slices);
  // The views of micro-batch 1's rows come first: the loop's begin names
  // them, and views are not instructions.
  for (Value slice : slices)
    slice.getDefiningOp()->moveBefore(loopBegin);
  builder.setInsertionPointAfter(lastOp);
  rt::MicrobatchLoopEndOp::create(builder, lastOp->getLoc(),
                                  live.getArrayRef());
}

LogicalResult Reroll::run() {
  if (failed(findBlocks()) || failed(match()))
    return failure();
  rewrite();
  return success();
}

/// The loop count a step asks for (xfmr.train_step's or xfmr.eval_step's
/// microbatch_loop), or 0.
int64_t loopCount(func::FuncOp function) {
  for (StringRef name : {xfmr::XfmrDialect::kTrainStepAttrName,
                         xfmr::XfmrDialect::kEvalStepAttrName})
    if (auto entry = function->getAttrOfType<DictionaryAttr>(name))
      if (auto count = entry.getAs<IntegerAttr>(kMicrobatchLoopKey))
        return count.getInt();
  return 0;
}

struct MicrobatchLoopPass
    : impl::MicrobatchLoopPassBase<MicrobatchLoopPass> {
  void runOnOperation() override {
    for (auto function : getOperation().getOps<func::FuncOp>()) {
      int64_t count = loopCount(function);
      if (count <= 0 || function.isExternal())
        continue;
      if (failed(Reroll(function, count).run()))
        return signalPassFailure();
    }
  }
};

} // namespace
} // namespace partition
