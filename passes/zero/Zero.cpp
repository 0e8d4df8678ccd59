//===- Zero.cpp - --dist-zero: sharded optimizer state (ZeRO) -------------===//
//
// Rewrites each data-parallel gradient reduction that feeds AdamW into a
// reduce-scatter of a flat, padded bucket, AdamW on each rank's chunk (its
// moments sharded state) and an all-gather of the updated parameters
// (passes/Passes.td has the full description). The bucket layout
// (dist.flat_pack) puts chunk r of every tensor in row r, so one
// reduce-scatter along rows gives every rank its chunk of each tensor and
// any tensor size works: the chunk is ceil(n / dp), the tail zero padding,
// which AdamW keeps zero (zero gradient, zero moments, zero update).
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"
#include "passes/partition/Layout.h"

#include "dialects/Dist/DistOps.h"
#include "dialects/Xfmr/XfmrDialect.h"
#include "dialects/Xfmr/XfmrOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

namespace partition {
#define GEN_PASS_DEF_ZEROPASS
#include "passes/Passes.h.inc"
} // namespace partition

using namespace mlir;

namespace partition {
namespace {

using xfmr::AdamWOp;
using xfmr::XfmrDialect;

/// One gradient of a reduction and the AdamW update that reads its sum.
struct Member {
  Value grad;
  /// Mutable: op handles are cheap views, and the rewrite erases them.
  mutable AdamWOp update;
};

class StepSharder {
public:
  StepSharder(func::FuncOp step, const PartitionMesh &mesh, int64_t stage)
      : step(step), mesh(mesh), stage(stage),
        dp(mesh.sizeOf(mesh.dataAxis)) {}

  LogicalResult run();

private:
  /// The members of `reduce` when it is a sum over the data axis whose
  /// every result feeds AdamW's gradient alone; an empty list when it is
  /// some other reduction (the loss, a tensor-parallel partial sum).
  FailureOr<SmallVector<Member>> membersOf(dist::AllReduceOp reduce);
  LogicalResult shard(dist::AllReduceOp reduce, ArrayRef<Member> members);
  /// Makes argument `arg` (a moment) the flat shard of `chunk` elements.
  void shardMoment(BlockArgument arg, int64_t chunk);

  dist::ShardingAttr flatSharding() {
    return dist::ShardingAttr::get(step.getContext(),
                                   mesh.symbol.getValue(),
                                   {SmallVector<StringRef>{mesh.dataAxis}});
  }
  ArrayAttr dataAxes(OpBuilder &builder) {
    return builder.getStrArrayAttr({mesh.dataAxis});
  }

  func::FuncOp step;
  const PartitionMesh &mesh;
  int64_t stage;
  int64_t dp;
  /// Moments already sharded, and the flat_shard each got (for the results
  /// that update them).
  DenseMap<BlockArgument, DictionaryAttr> shardedMoments;
};

FailureOr<SmallVector<Member>>
StepSharder::membersOf(dist::AllReduceOp reduce) {
  SmallVector<Member> members;
  if (!llvm::is_contained(reduce.getAxes().getAsValueRange<StringAttr>(),
                          mesh.dataAxis))
    return members;
  for (auto [operand, result] :
       llvm::zip(reduce.getInputs(), reduce.getResults())) {
    AdamWOp update;
    if (result.hasOneUse())
      if (auto user = dyn_cast<AdamWOp>(*result.getUsers().begin());
          user && user.getGrad() == result && user.getParam() != result)
        update = user;
    // A gradient AdamW reads together with other ops would lose its whole
    // sum: ZeRO keeps only each rank's chunk of it.
    if (!update && llvm::any_of(result.getUsers(), [](Operation *user) {
          return isa<AdamWOp>(user);
        }))
      return reduce.emitOpError()
             << "sums a gradient that AdamW and other ops read; ZeRO keeps "
                "only each rank's chunk of the sum";
    members.push_back({operand, update});
  }
  unsigned updates = llvm::count_if(
      members, [](const Member &member) { return member.update; });
  // The loss, a tensor-parallel partial sum: not ZeRO's business.
  if (updates == 0)
    return SmallVector<Member>{};
  if (updates != members.size())
    return reduce.emitOpError()
           << "reduces gradients that AdamW reads together with other "
              "values; ZeRO needs buckets of gradients alone";
  return members;
}

void StepSharder::shardMoment(BlockArgument arg, int64_t chunk) {
  if (shardedMoments.count(arg))
    return;
  unsigned index = arg.getArgNumber();
  auto type = cast<RankedTensorType>(arg.getType());
  auto blockOf = step.getArgAttrOfType<dist::ShardingAttr>(
      index, dist::DistDialect::kLocalShardingAttrName);
  DictionaryAttr flat =
      dist::buildFlatShard(flatSharding(), type.getShape(), blockOf);
  step.removeArgAttr(index, dist::DistDialect::kLocalShardingAttrName);
  step.setArgAttr(index, dist::DistDialect::kFlatShardAttrName, flat);
  arg.setType(RankedTensorType::get({chunk}, type.getElementType()));
  shardedMoments[arg] = flat;
}

LogicalResult StepSharder::shard(dist::AllReduceOp reduce,
                                 ArrayRef<Member> members) {
  MLIRContext *context = step.getContext();
  OpBuilder builder(reduce);
  Location loc = reduce.getLoc();
  auto label = reduce->getAttrOfType<StringAttr>(
      dist::DistDialect::kLabelAttrName);
  auto labelled = [&](Operation *op, StringRef suffix) {
    op->setAttr(dist::DistDialect::kLabelAttrName,
                StringAttr::get(context, (label ? label.getValue().str()
                                                : std::string("gradients")) +
                                             suffix.str()));
  };

  // A sum over the data axis and others: the other axes first, whole.
  SmallVector<Value> grads;
  for (const Member &member : members)
    grads.push_back(member.grad);
  SmallVector<Attribute> otherAxes;
  for (Attribute axis : reduce.getAxes())
    if (cast<StringAttr>(axis).getValue() != mesh.dataAxis)
      otherAxes.push_back(axis);
  if (!otherAxes.empty()) {
    auto partial = dist::AllReduceOp::create(
        builder, loc, ValueRange(grads).getTypes(), grads,
        reduce.getMeshAttr(), builder.getArrayAttr(otherAxes),
        reduce.getReduceAttr());
    labelled(partial, "");
    grads.assign(partial.getResults().begin(), partial.getResults().end());
  }

  // Reduce-scatter the bucket: rank r keeps row r, its chunk of each.
  int64_t columns = 0;
  SmallVector<int64_t> chunks;
  SmallVector<Type> chunkTypes;
  for (Value grad : grads) {
    auto type = cast<RankedTensorType>(grad.getType());
    chunks.push_back(dist::flatChunk(type.getNumElements(), dp));
    chunkTypes.push_back(
        RankedTensorType::get({chunks.back()}, type.getElementType()));
    columns += chunks.back();
  }
  Type element = cast<RankedTensorType>(grads.front().getType()).getElementType();
  auto bucketType = RankedTensorType::get({dp, columns}, element);
  auto rowType = RankedTensorType::get({1, columns}, element);
  auto packed = dist::FlatPackOp::create(builder, loc, bucketType, grads);
  auto scattered = dist::ReduceScatterOp::create(
      builder, loc, rowType, packed, reduce.getMeshAttr(), dataAxes(builder),
      builder.getI64IntegerAttr(0), reduce.getReduceAttr());
  labelled(scattered, " (reduce-scatter)");
  auto gradChunks =
      dist::FlatUnpackOp::create(builder, loc, chunkTypes, scattered);

  // The updates, where the last of them was (their step and learning rate
  // are defined by then).
  AdamWOp last = members.front().update;
  for (const Member &member : members)
    if (last->isBeforeInBlock(member.update))
      last = member.update;
  builder.setInsertionPoint(last);
  SmallVector<Value> params;
  for (const Member &member : members)
    params.push_back(member.update.getParam());
  auto paramBucket = dist::FlatPackOp::create(
      builder, loc, RankedTensorType::get({dp, columns}, element), params);
  auto ownRow = dist::AllSliceOp::create(
      builder, loc, RankedTensorType::get({1, columns}, element), paramBucket,
      reduce.getMeshAttr(), dataAxes(builder), builder.getI64IntegerAttr(0));
  auto paramChunks =
      dist::FlatUnpackOp::create(builder, loc, chunkTypes, ownRow.getResult());

  SmallVector<Value> updatedChunks;
  for (auto [index, member] : llvm::enumerate(members)) {
    AdamWOp update = member.update;
    for (Value moment : {update.getMoment1(), update.getMoment2()}) {
      auto arg = dyn_cast<BlockArgument>(moment);
      if (!arg || arg.getOwner()->getParentOp() != step || !arg.hasOneUse())
        return update.emitOpError()
               << "reads a moment that is not a state argument of @"
               << step.getSymName() << " used by this update alone";
      shardMoment(arg, chunks[index]);
    }
    auto chunked = AdamWOp::create(
        builder, update.getLoc(),
        TypeRange{chunkTypes[index], update.getMoment1().getType(),
                  update.getMoment2().getType()},
        paramChunks.getResult(index), gradChunks.getResult(index),
        update.getMoment1(), update.getMoment2(), update.getStep(),
        update.getLr(), update.getBeta1Attr(), update.getBeta2Attr(),
        update.getEpsilonAttr(), update.getWeightDecayAttr());
    update.getNewMoment1().replaceAllUsesWith(chunked.getNewMoment1());
    update.getNewMoment2().replaceAllUsesWith(chunked.getNewMoment2());
    updatedChunks.push_back(chunked.getNewParam());
  }

  // Every rank gets every updated parameter back.
  auto ownUpdated = dist::FlatPackOp::create(builder, loc, rowType,
                                             updatedChunks);
  auto gathered = dist::AllGatherOp::create(
      builder, loc, bucketType, ownUpdated, reduce.getMeshAttr(),
      dataAxes(builder), builder.getI64IntegerAttr(0));
  labelled(gathered, " (updated parameters)");
  SmallVector<Type> paramTypes;
  for (Value param : params)
    paramTypes.push_back(param.getType());
  auto updated =
      dist::FlatUnpackOp::create(builder, loc, paramTypes, gathered);
  for (auto [member, param] : llvm::zip(members, updated.getResults())) {
    member.update.getNewParam().replaceAllUsesWith(param);
    member.update.erase();
  }
  reduce.erase();
  return success();
}

LogicalResult StepSharder::run() {
  Block &body = step.getBody().front();
  SmallVector<std::pair<dist::AllReduceOp, SmallVector<Member>>> work;
  for (auto reduce : body.getOps<dist::AllReduceOp>()) {
    FailureOr<SmallVector<Member>> members = membersOf(reduce);
    if (failed(members))
      return failure();
    if (!members->empty())
      work.push_back({reduce, std::move(*members)});
  }
  for (auto &[reduce, members] : work)
    if (failed(shard(reduce, members)))
      return failure();
  // Every AdamW update now works on chunks.
  for (auto update : body.getOps<AdamWOp>())
    if (!shardedMoments.count(dyn_cast<BlockArgument>(update.getMoment1())))
      return update.emitOpError()
             << "updates a parameter whose gradient is not summed over the "
                "data axis '"
             << mesh.dataAxis << "'; ZeRO shards the state over that sum";

  // The results that update a sharded moment are that moment's shard.
  Operation *terminator = body.getTerminator();
  for (unsigned r = 0, e = step.getNumResults(); r < e; ++r)
    for (StringRef attr :
         {XfmrDialect::kMoment1AttrName, XfmrDialect::kMoment2AttrName})
      if (auto name = step.getResultAttrOfType<StringAttr>(r, attr))
        for (auto [arg, flat] : shardedMoments)
          if (step.getArgAttrOfType<StringAttr>(arg.getArgNumber(), attr) ==
              name) {
            step.removeResultAttr(
                r, StringAttr::get(step.getContext(),
                                   dist::DistDialect::kLocalShardingAttrName));
            step.setResultAttr(r, dist::DistDialect::kFlatShardAttrName,
                               flat);
          }
  step.setType(FunctionType::get(step.getContext(), body.getArgumentTypes(),
                                 terminator->getOperandTypes()));
  return success();
}

struct ZeroPass : impl::ZeroPassBase<ZeroPass> {
  using ZeroPassBase::ZeroPassBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    dist::PlanAttr plan = dist::getPlan(module);
    int64_t chosen = stage >= 0 ? static_cast<int64_t>(stage)
                     : plan     ? plan.getZeroStage()
                                : 0;
    if (chosen > 2) {
      module.emitError() << "--dist-zero: stage " << chosen
                         << " is not implemented; stages 1 and 2 are (use "
                            "zero.stage 1 or 2)";
      return signalPassFailure();
    }
    if (chosen == 0)
      return;
    FailureOr<PartitionMesh> mesh = lookupPartitionMesh(module);
    if (failed(mesh))
      return signalPassFailure();
    if (!mesh->hasData())
      return;
    for (auto step : module.getOps<func::FuncOp>())
      if (step->hasAttr(XfmrDialect::kTrainStepAttrName) &&
          failed(StepSharder(step, *mesh, chosen).run()))
        return signalPassFailure();
  }
};

} // namespace
} // namespace partition
