//===- OverlapCollectives.cpp - start collectives early, wait late -------===//
//
// --rt-overlap-collectives: turns each data-parallel rt.all_reduce into an
// async start placed right after the last writer of its buffers and an
// rt.wait placed right before their next use, so that the runtime reduces
// gradient buckets while the backward pass goes on. Only the collective and
// its wait move; kernels keep their order (results stay bit-identical).
//
//===----------------------------------------------------------------------===//

#include "lowering/Passes.h"

#include "dialects/CheckedSize.h"
#include "dialects/Dist/DistDialect.h"
#include "dialects/Dist/DistOps.h"
#include "dialects/Rt/RtOps.h"

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

/// The buffer `value` views: the source of its subviews, recursively.
Value baseBuffer(Value value) {
  while (auto view = value.getDefiningOp<memref::SubViewOp>())
    value = view.getSource();
  return value;
}

/// Whether `op` reads, writes or defines (a view of) one of `bases`.
bool touches(Operation *op, const llvm::SmallPtrSetImpl<Value> &bases) {
  for (Value operand : op->getOperands())
    if (isa<MemRefType>(operand.getType()) &&
        bases.contains(baseBuffer(operand)))
      return true;
  for (Value result : op->getResults())
    if (isa<MemRefType>(result.getType()) && bases.contains(baseBuffer(result)))
      return true;
  return false;
}

/// Ops a start or wait may move across when they do not touch its buffers:
/// the rt ops (whose every memory effect is on their memref operands) and
/// the pure bookkeeping of the lowered step. Anything else stops the move.
bool movableAcross(Operation *op) {
  return isa<rt::KernelOp, rt::AllReduceOp, rt::AllGatherOp,
             rt::ReduceScatterOp, rt::WaitOp, rt::SendOp, rt::RecvOp,
             memref::AllocOp, memref::SubViewOp, arith::ConstantOp>(op);
}

struct InFlight {
  rt::WaitOp wait;
  int64_t bytes;
};

struct OverlapCollectivesPass
    : impl::OverlapCollectivesPassBase<OverlapCollectivesPass> {
  using Base::Base;

  void runOnOperation() override {
    dist::PlanAttr plan = dist::getPlan(getOperation());
    if (!plan)
      return;
    std::optional<StringRef> dataAxis = plan.getAxis(dist::AxisRole::Data);
    if (!dataAxis)
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
        overlap(function.getBody().front(), *dataAxis);
  }

  void overlap(Block &body, StringRef dataAxis) {
    SmallVector<rt::AllReduceOp> candidates;
    for (auto allReduce : body.getOps<rt::AllReduceOp>()) {
      ArrayAttr axes = allReduce.getAxes();
      if (!allReduce.getToken() && axes.size() == 1 &&
          cast<StringAttr>(axes[0]).getValue() == dataAxis)
        candidates.push_back(allReduce);
    }
    Operation *previousStart = nullptr;
    std::deque<InFlight> inFlight;
    int64_t bytesInFlight = 0;
    for (rt::AllReduceOp allReduce : candidates) {
      llvm::SmallPtrSet<Value, 8> bases;
      int64_t bytes = 0;
      for (Value buffer : allReduce.getBuffers()) {
        bases.insert(baseBuffer(buffer));
        // Saturated: the memory plan refuses sizes beyond 2^48 later.
        int64_t more = saturatedByteSize(buffer.getType());
        bytes = more > INT64_MAX - bytes ? INT64_MAX : bytes + more;
      }
      // The start: just after the last op that writes, reads or defines a
      // buffer (or the previous start), so that it begins once the bucket
      // is complete and starts stay in program order.
      Operation *startBefore = &body.front();
      for (Operation *op = allReduce->getPrevNode(); op;
           op = op->getPrevNode())
        if (op == previousStart || touches(op, bases) || !movableAcross(op)) {
          startBefore = op->getNextNode();
          break;
        }
      // The wait: just before the next op that touches a buffer, else at
      // the end of the block.
      Operation *waitBefore = body.getTerminator();
      for (Operation *op = allReduce->getNextNode(); op != waitBefore;
           op = op->getNextNode())
        if (touches(op, bases) || !movableAcross(op)) {
          waitBefore = op;
          break;
        }
      // The budget: collectives whose wait comes before this start are
      // done; beyond the bounds, the oldest are waited for right here.
      while (!inFlight.empty() &&
             inFlight.front().wait->isBeforeInBlock(startBefore)) {
        bytesInFlight -= inFlight.front().bytes;
        inFlight.pop_front();
      }
      auto overBudget = [&] {
        return (maxInFlight > 0 &&
                int64_t(inFlight.size()) + 1 > maxInFlight) ||
               (maxBytesInFlight > 0 &&
                bytesInFlight + bytes > maxBytesInFlight);
      };
      while (!inFlight.empty() && overBudget()) {
        inFlight.front().wait->moveBefore(startBefore);
        bytesInFlight -= inFlight.front().bytes;
        inFlight.pop_front();
      }
      OpBuilder builder(startBefore);
      auto start = rt::AllReduceOp::create(
          builder, allReduce.getLoc(), rt::TokenType::get(&getContext()),
          allReduce.getBuffers(), allReduce.getMeshAttr(),
          allReduce.getAxes(), allReduce.getReduceAttr(),
          allReduce.getLabelAttr());
      start->setDiscardableAttrs(allReduce->getDiscardableAttrDictionary());
      builder.setInsertionPoint(waitBefore);
      auto wait = rt::WaitOp::create(builder, allReduce.getLoc(),
                                     start.getToken(), allReduce.getBuffers());
      allReduce.erase();
      previousStart = start;
      // Kept in start order, which is wait order for the oldest first.
      inFlight.push_back({wait, bytes});
      bytesInFlight += bytes;
    }
  }
};

} // namespace
} // namespace partition
