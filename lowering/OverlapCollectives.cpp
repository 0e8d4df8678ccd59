//===- OverlapCollectives.cpp - start collectives early, wait late -------===//
//
// --rt-overlap-collectives: turns each data-parallel collective (a bucket's
// rt.all_reduce; ZeRO's rt.reduce_scatter of a gradient bucket and
// rt.all_gather of updated parameters) into an async start placed right
// after the last writer of its buffers and an rt.wait placed right before
// their next use, so that the runtime reduces gradient buckets while the
// backward pass goes on and gathers parameters while AdamW goes on; with
// tensor-parallel=true, also each tensor-parallel collective that has a
// kernel to hide behind (an input gradient's sum under the weight
// gradient's GEMM). Only the collective and
// its wait move; kernels keep their order (results stay bit-identical).
//
//===----------------------------------------------------------------------===//

#include "lowering/Passes.h"
#include "lowering/RtEffects.h"

#include "dialects/CheckedSize.h"
#include "dialects/Dist/DistDialect.h"
#include "dialects/Dist/DistOps.h"
#include "dialects/Rt/RtOps.h"
#include "dialects/Rt/RtViews.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include <cstdint>

#include <deque>

namespace partition {
#define GEN_PASS_DEF_OVERLAPCOLLECTIVESPASS
#include "lowering/Passes.h.inc"
} // namespace partition

using namespace mlir;

namespace partition {
namespace {

using namespace rteffects;

struct InFlight {
  rt::WaitOp wait;
  int64_t bytes;
  /// What max-in-flight counts: the ZeRO bucket whose per-tensor
  /// collectives (their `bucket`, lowering/FlatBuckets.h) count as one, or
  /// else the collective itself (its wait).
  const void *unit;
};

/// The bucket `collective` moves a tensor of, if it names one.
StringAttr bucketOf(Operation *collective) {
  if (auto scatter = dyn_cast<rt::ReduceScatterOp>(collective))
    return scatter.getBucketAttr();
  if (auto gather = dyn_cast<rt::AllGatherOp>(collective))
    return gather.getBucketAttr();
  return {};
}

struct OverlapCollectivesPass
    : impl::OverlapCollectivesPassBase<OverlapCollectivesPass> {
  using Base::Base;

  /// Each wait's collective's place in start order.
  DenseMap<Operation *, unsigned> startOrder;
  /// The waits of data-parallel collectives (those that sink).
  llvm::SmallPtrSet<Operation *, 16> dataWaits;
  /// The axes whose collectives start early, by role (the context axis's
  /// gradient sums are data-parallel ones: parameters are replicated over
  /// it too).
  std::optional<StringRef> dataAxis, expertAxis, contextAxis, tensorAxis;

  void runOnOperation() override {
    dist::PlanAttr plan = dist::getPlan(getOperation());
    if (!plan)
      return;
    if (dataParallel) {
      dataAxis = plan.getAxis(dist::AxisRole::Data);
      expertAxis = plan.getAxis(dist::AxisRole::Expert);
      contextAxis = plan.getAxis(dist::AxisRole::Context);
    }
    if (tensorParallel)
      tensorAxis = plan.getAxis(dist::AxisRole::Tensor);
    if (!dataAxis && !tensorAxis)
      return;
    if (maxInFlight < 0 || maxBytesInFlight < 0) {
      getOperation().emitError()
          << "--rt-overlap-collectives: max-in-flight (" << maxInFlight
          << ") and max-bytes-in-flight (" << maxBytesInFlight
          << ") must be non-negative";
      return signalPassFailure();
    }
    for (auto function : getOperation().getOps<func::FuncOp>())
      if (!function.isExternal())
        overlap(function.getBody().front());
  }

  /// The one axis of `op` when it is a synchronous collective over exactly
  /// one axis: the data axis (a bucket's all-reduce, ZeRO's reduce-scatter
  /// of a gradient bucket and all-gather of updated parameters, stage 3's
  /// of a layer's parameters) or the tensor axis (partial sums, sequence
  /// parallelism's scatters and gathers).
  static std::optional<StringRef> axisOf(Operation *op) {
    if (!isa<rt::AllReduceOp, rt::ReduceScatterOp, rt::AllGatherOp>(op) ||
        op->getNumResults() != 0)
      return std::nullopt;
    auto axes = op->getAttrOfType<ArrayAttr>("axes");
    if (!axes || axes.size() != 1)
      return std::nullopt;
    return cast<StringAttr>(axes[0]).getValue();
  }

  /// A collective over the data axis, or over the context axis and
  /// possibly the data axis (a gradient bucket of context parallelism, or
  /// ZeRO's over dp x cp).
  bool isData(Operation *op) {
    if (!isa<rt::AllReduceOp, rt::ReduceScatterOp, rt::AllGatherOp>(op) ||
        op->getNumResults() != 0)
      return false;
    auto axes = op->getAttrOfType<ArrayAttr>("axes");
    if (!axes || axes.empty() || axes.size() > 3)
      return false;
    // Over the data axes (the expert axis is data-parallel ranks too) and
    // the context axis.
    for (StringRef axis : axes.getAsValueRange<StringAttr>())
      if (!(dataAxis && axis == *dataAxis) &&
          !(expertAxis && axis == *expertAxis) &&
          !(contextAxis && axis == *contextAxis))
        return false;
    return true;
  }
  bool isTensor(Operation *op) {
    std::optional<StringRef> axis = axisOf(op);
    return axis && tensorAxis && *axis == *tensorAxis;
  }
  /// Ring attention's shift of the next key-value block over the context
  /// axis: started before the current block's attention, which reads the
  /// block being sent (an out-of-place shift only reads its input).
  bool isContextShift(Operation *op) {
    auto shift = dyn_cast<rt::RingShiftOp>(op);
    if (!shift || shift->getNumResults() != 0 || !contextAxis)
      return false;
    auto axes = shift.getAxes().getAsValueRange<StringAttr>();
    return llvm::all_of(axes, [&](StringRef axis) {
      return axis == *contextAxis;
    });
  }

  /// Whether a kernel runs in [from, to): work a started collective can
  /// hide behind.
  static bool kernelBetween(Operation *from, Operation *to) {
    for (Operation *op = from; op && op != to; op = op->getNextNode())
      if (isa<rt::KernelOp>(op))
        return true;
    return false;
  }

  /// The position of each op the pass found in the block (not of the
  /// starts and waits it inserts): Operation::isBeforeInBlock would number
  /// the whole block again after every insertion, a third of the compile
  /// of llama-70b dp4 x tp8.
  DenseMap<Operation *, unsigned> positions;

  /// The first op at or after `op` that has a position.
  Operation *anchorOf(Operation *op) const {
    while (!positions.count(op))
      op = op->getNextNode();
    return op;
  }
  /// Whether `a` comes before `b` in their block.
  bool isBefore(Operation *a, Operation *b) const {
    Operation *anchorA = anchorOf(a), *anchorB = anchorOf(b);
    if (anchorA != anchorB)
      return positions.lookup(anchorA) < positions.lookup(anchorB);
    // Both among the inserted ops before one anchor, or one of them the
    // anchor, which comes after the others.
    if (a == anchorA)
      return false;
    for (Operation *op = a->getNextNode(); op; op = op->getNextNode()) {
      if (op == b)
        return true;
      if (op == anchorA)
        return false;
    }
    return false;
  }

  void overlap(Block &body) {
    SmallVector<Operation *> candidates;
    positions.clear();
    for (auto [index, op] : llvm::enumerate(body)) {
      positions[&op] = index;
      if (isData(&op) || isTensor(&op) || isContextShift(&op))
        candidates.push_back(&op);
    }
    Operation *previousStart = nullptr;
    std::deque<InFlight> inFlight;
    SmallVector<rt::WaitOp> waits;
    int64_t bytesInFlight = 0;
    for (Operation *collective : candidates) {
      // `bases`: the buffers no other op may touch while it runs; a ring
      // shift's input (`shared`) may still be read, not written.
      llvm::SmallPtrSet<Value, 8> bases, shared;
      bool sharesInput = isContextShift(collective);
      if (sharesInput)
        shared.insert(baseBuffer(collective->getOperand(0)));
      int64_t bytes = 0;
      for (Value buffer : collective->getOperands()) {
        if (!shared.contains(baseBuffer(buffer)))
          bases.insert(baseBuffer(buffer));
        // Saturated: the memory plan refuses sizes beyond 2^48 later.
        int64_t more = saturatedByteSize(buffer.getType());
        bytes = more > INT64_MAX - bytes ? INT64_MAX : bytes + more;
      }
      // The start: just after the last op that writes, reads or defines a
      // buffer (or the previous start), so that it begins once the bucket
      // is complete and starts stay in program order.
      Operation *startBefore = &body.front();
      for (Operation *op = collective->getPrevNode(); op;
           op = op->getPrevNode())
        if (op == previousStart || touches(op, bases) ||
            writesAny(op, shared) || !movableAcross(op)) {
          startBefore = op->getNextNode();
          break;
        }
      // The wait: just before the next op that touches a buffer (making a
      // view of one touches nothing yet), else at the end of the block.
      Operation *waitBefore = body.getTerminator();
      for (Operation *op = collective->getNextNode(); op != waitBefore;
           op = op->getNextNode())
        if ((touches(op, bases) && !rt::isView(op)) || writesAny(op, shared) ||
            !movableAcross(op)) {
          waitBefore = op;
          break;
        }
      // A tensor-parallel collective is mostly read right after it (the
      // residual add, the norm's gradient): started only where a kernel
      // runs before that read (the weight gradient's GEMM after the input
      // gradient's); else a start and a wait would only add the hand-over
      // to the communication thread.
      if (isTensor(collective) && !kernelBetween(startBefore, waitBefore))
        continue;
      // The budget: collectives whose wait comes before this start are
      // done, wherever they are in start order (waits need not keep it:
      // each of ZeRO's per-tensor reduce-scatters is waited for at its own
      // AdamW); beyond the bounds, the oldest of the others are waited for
      // right here. Their waits all come after this start, so they only
      // move up (moved down, a wait would pass the reads of its buffers).
      for (auto it = inFlight.begin(); it != inFlight.end();) {
        if (!isBefore(it->wait, startBefore)) {
          ++it;
          continue;
        }
        bytesInFlight -= it->bytes;
        it = inFlight.erase(it);
      }
      StringAttr bucket = bucketOf(collective);
      const void *unit = bucket ? bucket.getAsOpaquePointer() : collective;
      auto overBudget = [&] {
        llvm::SmallDenseSet<const void *, 4> units{unit};
        for (const InFlight &other : inFlight)
          units.insert(other.unit);
        return (maxInFlight > 0 && int64_t(units.size()) > maxInFlight) ||
               (maxBytesInFlight > 0 &&
                bytesInFlight + bytes > maxBytesInFlight);
      };
      while (!inFlight.empty() && overBudget()) {
        inFlight.front().wait->moveBefore(startBefore);
        bytesInFlight -= inFlight.front().bytes;
        inFlight.pop_front();
      }
      bool data = isData(collective);
      // The same op, async: its operands and attributes, and a token.
      OpBuilder builder(startBefore);
      OperationState state(collective->getLoc(), collective->getName());
      state.addOperands(collective->getOperands());
      state.addAttributes(collective->getAttrs());
      state.addTypes(rt::TokenType::get(&getContext()));
      Operation *start = builder.create(state);
      builder.setInsertionPoint(waitBefore);
      auto wait =
          rt::WaitOp::create(builder, collective->getLoc(),
                             start->getResult(0), collective->getOperands());
      positions.erase(collective);
      collective->erase();
      previousStart = start;
      // Kept in start order, which is wait order for the oldest first.
      inFlight.push_back(
          {wait, bytes,
           bucket ? bucket.getAsOpaquePointer() : wait.getOperation()});
      bytesInFlight += bytes;
      waits.push_back(wait);
      if (data)
        dataWaits.insert(wait);
    }
    for (auto [order, wait] : llvm::enumerate(waits))
      startOrder[wait] = order;
    // The last started first: a wait stops above the wait of a collective
    // started after it, which must then already be as low as it goes.
    // Tensor-parallel waits stay where their value is first read: the
    // backward pass reads it next.
    for (rt::WaitOp wait : llvm::reverse(waits))
      if (dataWaits.contains(wait))
        sinkWithConsumers(wait);
  }

  /// Moves a wait, together with the kernels right after it that read the
  /// collective's buffers (AdamW of the bucket's parameters), below the
  /// ops that follow when they commute: the tied embedding's bucket, whose
  /// gradient is complete last, is then updated last, while the other
  /// buckets' AdamW runs during its all-reduce. Stops at any op that
  /// touches the collective's buffers or conflicts with the kernels, at a
  /// start (so that the bound holds, and so that ZeRO's gathered buckets
  /// do not all live until the end of the step: waited for before the next
  /// all-gather starts, each overlaps the next bucket's AdamW), at the wait of a collective
  /// started later (the communication thread completes collectives in start
  /// order: waiting for that one first would only delay the kernels), and at
  /// the end of the block.
  void sinkWithConsumers(rt::WaitOp wait) {
    llvm::SmallPtrSet<Value, 8> bases;
    for (Value buffer : wait.getBuffers())
      bases.insert(baseBuffer(buffer));
    SmallVector<Operation *> group{wait};
    for (Operation *op = wait->getNextNode(); op; op = op->getNextNode()) {
      auto kernel = dyn_cast<rt::KernelOp>(op);
      if (!kernel || !touches(kernel, bases))
        break;
      // Only kernels that read the collective's buffers, never write them.
      bool writesCollective = false;
      for (Value output : kernel.getOutputs())
        writesCollective |= bases.contains(baseBuffer(output));
      if (writesCollective)
        break;
      group.push_back(kernel);
    }
    if (group.size() == 1)
      return;
    Operation *before = group.back()->getNextNode();
    for (; before && !before->hasTrait<OpTrait::IsTerminator>();
         before = before->getNextNode()) {
      if (!movableAcross(before) || touches(before, bases) ||
          (isa<rt::AllReduceOp, rt::AllGatherOp, rt::ReduceScatterOp>(
               before) &&
           before->getNumResults() == 1))
        break;
      if (auto other = dyn_cast<rt::WaitOp>(before);
          other && startOrder.lookup(other) > startOrder.lookup(wait))
        break;
      if (llvm::any_of(llvm::drop_begin(group), [&](Operation *kernel) {
            return conflicts(kernel, before);
          }))
        break;
    }
    if (before == group.back()->getNextNode())
      return;
    for (Operation *op : group)
      op->moveBefore(before);
  }
};

} // namespace
} // namespace partition
