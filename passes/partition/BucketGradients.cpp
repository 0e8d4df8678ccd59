//===- BucketGradients.cpp - --dist-bucket-gradients ----------------------===//
//
// Groups the data-parallel sums that --dist-partition made (one all_reduce
// over the data axis per gradient, labelled "data-parallel sum (to
// bucket)") into buckets of at most `bucket-bytes`, as PyTorch DDP does: in
// backward order, each bucket all-reduced right after the last gradient in
// it is computed, so that communication can overlap the rest of the
// backward pass. A bucket closes when full, and before a gradient it cannot
// wait for (one computed after another member is first needed). The loss
// is reduced on its own ("loss"): it is needed for reporting only; so is
// the expert load of aux-free balancing ("expert load"), which only the
// routing bias's update reads.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"
#include "passes/partition/Layout.h"

#include "dialects/CheckedSize.h"

#include "dialects/Xfmr/XfmrDialect.h"
#include "dialects/Xfmr/XfmrOps.h"

#include "mlir/IR/Builders.h"

namespace partition {
#define GEN_PASS_DEF_BUCKETGRADIENTSPASS
#include "passes/Passes.h.inc"
} // namespace partition

using namespace mlir;

namespace partition {
namespace {

LogicalResult bucketStep(func::FuncOp step, int64_t bucketBytes) {
  Block &body = step.getBody().front();
  SmallVector<dist::AllReduceOp> pending;
  for (auto reduce : body.getOps<dist::AllReduceOp>())
    if (auto label = reduce->getAttrOfType<StringAttr>(
            dist::DistDialect::kLabelAttrName);
        label && label.getValue() == kUnbucketedLabel) {
      if (reduce->getNumOperands() != 1)
        return reduce.emitOpError()
               << "is labelled '" << kUnbucketedLabel
               << "' but reduces " << reduce->getNumOperands()
               << " values; --dist-partition makes one per value";
      pending.push_back(reduce);
    }
  if (pending.empty())
    return success();

  DenseMap<Operation *, unsigned> positions;
  for (auto [index, op] : llvm::enumerate(body))
    positions[&op] = index;
  auto definedAt = [&](dist::AllReduceOp reduce) -> unsigned {
    Value value = reduce->getOperand(0);
    return isa<BlockArgument>(value) ? 0
                                     : positions.lookup(value.getDefiningOp());
  };
  auto firstUseOf = [&](dist::AllReduceOp reduce) {
    unsigned first = ~0u;
    for (Operation *user : reduce->getResult(0).getUsers())
      first = std::min(first, positions.lookup(user));
    return first;
  };
  Operation *terminator = body.getTerminator();
  // The label of a sum reduced on its own, or "" for a gradient.
  auto soloLabel = [&](dist::AllReduceOp reduce) -> StringRef {
    for (OpOperand &use : reduce->getResult(0).getUses()) {
      if (isa<xfmr::MoeBiasUpdateOp>(use.getOwner()))
        return "expert load";
      if (use.getOwner() == terminator)
        if (auto output = step.getResultAttrOfType<StringAttr>(
                use.getOperandNumber(), xfmr::XfmrDialect::kOutputAttrName);
            output && output.getValue() == "loss")
          return "loss";
    }
    return "";
  };

  struct Bucket {
    SmallVector<dist::AllReduceOp> members;
    int64_t bytes = 0;
    unsigned firstUse = ~0u;
    StringRef solo; // a sum reduced on its own: its label
  };
  // In the order the gradients are computed (the reductions of one op's
  // results are in the order they were needed).
  llvm::stable_sort(pending, [&](dist::AllReduceOp a, dist::AllReduceOp b) {
    return definedAt(a) < definedAt(b);
  });
  SmallVector<Bucket> buckets;
  for (dist::AllReduceOp reduce : pending) {
    StringRef solo = soloLabel(reduce);
    int64_t bytes = saturatedByteSize(reduce->getOperand(0).getType());
    Bucket *open = buckets.empty() ? nullptr : &buckets.back();
    if (!solo.empty() || !open || !open->solo.empty() ||
        open->bytes >= bucketBytes ||
        open->members.front().getAxesAttr() != reduce.getAxesAttr() ||
        open->bytes + bytes > bucketBytes ||
        definedAt(reduce) >= open->firstUse) {
      buckets.emplace_back();
      open = &buckets.back();
      open->solo = solo;
    }
    open->members.push_back(reduce);
    open->bytes += bytes;
    open->firstUse = std::min(open->firstUse, firstUseOf(reduce));
  }

  unsigned gradientBuckets = 0;
  for (Bucket &bucket : buckets) {
    dist::AllReduceOp last = *llvm::max_element(
        bucket.members, [&](dist::AllReduceOp a, dist::AllReduceOp b) {
          return definedAt(a) < definedAt(b);
        });
    OpBuilder builder(step.getContext());
    Value lastValue = last->getOperand(0);
    builder.setInsertionPointAfterValue(lastValue);
    SmallVector<Value> values;
    SmallVector<Type> types;
    for (dist::AllReduceOp member : bucket.members) {
      values.push_back(member->getOperand(0));
      types.push_back(member->getOperand(0).getType());
    }
    auto reduce = dist::AllReduceOp::create(
        builder, last.getLoc(), types, values, last.getMeshAttr(),
        last.getAxesAttr(), last.getReduceAttr());
    std::string label =
        !bucket.solo.empty()
            ? bucket.solo.str()
            : "gradient bucket " + std::to_string(gradientBuckets++);
    reduce->setAttr(dist::DistDialect::kLabelAttrName,
                    builder.getStringAttr(label));
    for (auto [member, sum] : llvm::zip(bucket.members, reduce.getResults())) {
      member->getResult(0).replaceAllUsesWith(sum);
      member.erase();
    }
  }
  return success();
}

struct BucketGradientsPass
    : impl::BucketGradientsPassBase<BucketGradientsPass> {
  using BucketGradientsPassBase::BucketGradientsPassBase;

  // Checked before any pass of the pipeline runs.
  LogicalResult initialize(MLIRContext *context) override {
    if (bucketBytes > 0)
      return success();
    return emitError(UnknownLoc::get(context))
           << "--dist-bucket-gradients: bucket-bytes must be positive, got "
           << static_cast<int64_t>(bucketBytes);
  }

  void runOnOperation() override {
    for (func::FuncOp step : stepsToPartition(getOperation()))
      if (failed(bucketStep(step, bucketBytes)))
        return signalPassFailure();
  }
};

} // namespace
} // namespace partition
