//===- Zero.cpp - --dist-zero: sharded optimizer state (ZeRO) -------------===//
//
// Rewrites each data-parallel gradient reduction that feeds AdamW into a
// reduce-scatter of a flat, padded bucket, AdamW on each rank's chunk (its
// moments sharded state) and an all-gather of the updated parameters;
// under stage 3 the parameters are chunks too, gathered per layer before
// their forward and backward uses instead (passes/Passes.td has the full
// description). The bucket layout
// (dist.flat_pack) puts chunk r of every tensor in row r, so one
// reduce-scatter along rows gives every rank its chunk of each tensor and
// any tensor size works: the chunk is ceil(n / dp), the tail zero padding,
// which AdamW keeps zero (zero gradient, zero moments, zero update).
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"
#include "passes/partition/Layout.h"

#include "dialects/Dist/DistOps.h"
#include "dialects/Rt/RtOps.h"
#include "dialects/Xfmr/XfmrDialect.h"
#include "dialects/Xfmr/XfmrOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

#include <map>

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
        groupAxes(shardingAxes(mesh)) {}

  /// The axes ZeRO shards the state over: every axis the parameters are
  /// replicated over and their gradients summed over, the data axis and
  /// the context axis (Megatron-LM's distributed optimizer shards over
  /// dp x cp likewise).
  static Axes shardingAxes(const PartitionMesh &mesh) {
    Axes axes;
    for (StringRef axis : mesh.batchAxes())
      axes.push_back(axis);
    if (mesh.hasContext())
      axes.push_back(mesh.contextAxis);
    return mesh.inMeshOrder(axes);
  }

  LogicalResult run();
  /// Stage 3: every parameter becomes its flat shard; each layer's
  /// parameters are all-gathered before each run of forward uses and each
  /// run of backward uses, the gather issued one gather ahead (prefetch).
  /// Also for the evaluation step, whose state is the training step's.
  LogicalResult shardParameters();

private:
  /// The members of `reduce` when it is a sum over the data axis whose
  /// every result feeds AdamW's gradient alone; an empty list when it is
  /// some other reduction (the loss, a tensor-parallel partial sum).
  FailureOr<SmallVector<Member>> membersOf(dist::AllReduceOp reduce);
  LogicalResult shard(dist::AllReduceOp reduce, ArrayRef<Member> members);
  /// The axes `value`'s state (a parameter argument's) is sharded over:
  /// the group's axes but those it is split over already. Expert
  /// parallelism's experts are split over the expert axis, so their state
  /// is sharded over the ranks that hold the same experts (Megatron-LM's
  /// expert-data-parallel group: the data axis), and over nothing when
  /// those are one rank (expert_parallel = dp).
  Axes groupOf(Value value) {
    auto arg = dyn_cast<BlockArgument>(value);
    if (!arg)
      return groupAxes;
    // Sharded already (stage 3's parameters): over the group it names.
    if (Attribute flat = step.getArgAttr(arg.getArgNumber(),
                                         dist::DistDialect::kFlatShardAttrName))
      if (FailureOr<dist::FlatShard> shard = dist::readFlatShard(flat);
          succeeded(shard))
        return Axes(shard->flat.getDimAxes(0));
    auto sharding = step.getArgAttrOfType<dist::ShardingAttr>(
        arg.getArgNumber(), dist::DistDialect::kLocalShardingAttrName);
    if (!sharding)
      return groupAxes;
    Layout layout = Layout::fromAttr(sharding, arg.getType());
    Axes group;
    for (StringRef axis : groupAxes)
      if (llvm::none_of(layout.dims, [&](const Axes &axes) {
            return llvm::is_contained(axes, axis);
          }))
        group.push_back(axis);
    return group;
  }
  /// Makes argument `arg` (a moment) the flat shard of `chunk` elements
  /// over `group`.
  void shardMoment(BlockArgument arg, int64_t chunk, const Axes &group);
  /// Marks a result that updates a sharded argument (same role and name).
  void markResults();

  dist::ShardingAttr flatSharding(const Axes &group) {
    return dist::ShardingAttr::get(
        step.getContext(), mesh.symbol.getValue(),
        {SmallVector<StringRef>(group.begin(), group.end())});
  }

  func::FuncOp step;
  const PartitionMesh &mesh;
  int64_t stage;
  /// shardingAxes(mesh): the group of the parameters split over none of
  /// them (groupOf gives each parameter's).
  Axes groupAxes;
  /// Moments already sharded, and the flat_shard each got (for the results
  /// that update them).
  DenseMap<BlockArgument, DictionaryAttr> shardedMoments;
  /// Stage 3's parameters, sharded the same way.
  DenseMap<BlockArgument, DictionaryAttr> shardedParams;
};

/// Backward ops are the *_grad ops autodiff emits (and the vocabulary-
/// parallel loss's gradient); everything else that reads a parameter is
/// forward work (recomputed forward work included).
bool isBackward(Operation *op) {
  return op->getName().getStringRef().contains("_grad");
}

FailureOr<SmallVector<Member>>
StepSharder::membersOf(dist::AllReduceOp reduce) {
  SmallVector<Member> members;
  auto reduced = [&](StringRef axis) {
    return llvm::is_contained(reduce.getAxes().getAsValueRange<StringAttr>(),
                              axis);
  };
  if (llvm::none_of(groupAxes, reduced))
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
  // A bucket's gradients share a group (buckets are made per set of
  // axes); a sum over less than the group, or a group of one rank, is
  // left alone (run() names the updates that stay whole wrongly).
  Axes group = groupOf(members.front().update.getParam());
  for (const Member &member : members)
    if (groupOf(member.update.getParam()) != group)
      return reduce.emitOpError()
             << "reduces gradients of parameters sharded over different "
                "groups; ZeRO needs a bucket per group";
  if (mesh.shardsOf(group) < 2 || !llvm::all_of(group, reduced))
    return SmallVector<Member>{};
  return members;
}

void StepSharder::shardMoment(BlockArgument arg, int64_t chunk,
                              const Axes &group) {
  if (shardedMoments.count(arg) || shardedParams.count(arg))
    return;
  unsigned index = arg.getArgNumber();
  auto type = cast<RankedTensorType>(arg.getType());
  auto blockOf = step.getArgAttrOfType<dist::ShardingAttr>(
      index, dist::DistDialect::kLocalShardingAttrName);
  DictionaryAttr flat =
      dist::buildFlatShard(flatSharding(group), type.getShape(), blockOf);
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

  // The members' group (membersOf checked they share it): every data-
  // parallel rank, or the expert-data-parallel ones for the experts.
  Axes group = groupOf(members.front().update.getParam());
  int64_t dp = mesh.shardsOf(group);
  ArrayAttr groupAttr = builder.getStrArrayAttr(ArrayRef<StringRef>(group));
  // A sum over the group and others: the other axes first, whole.
  SmallVector<Value> grads;
  for (const Member &member : members)
    grads.push_back(member.grad);
  SmallVector<Attribute> otherAxes;
  for (Attribute axis : reduce.getAxes())
    if (!llvm::is_contained(group, cast<StringAttr>(axis).getValue()))
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
      builder, loc, rowType, packed, reduce.getMeshAttr(), groupAttr,
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
  // Stage 3: the parameters are their chunks already.
  SmallVector<Value> paramChunks;
  if (stage >= 3) {
    for (auto [param, type] : llvm::zip(params, chunkTypes))
      if (param.getType() != type)
        return members.front().update.emitOpError()
               << "reads a parameter that is not its own flat shard under "
                  "stage 3";
    paramChunks = params;
  } else {
    auto paramBucket = dist::FlatPackOp::create(
        builder, loc, RankedTensorType::get({dp, columns}, element), params);
    auto ownRow = dist::AllSliceOp::create(
        builder, loc, RankedTensorType::get({1, columns}, element),
        paramBucket, reduce.getMeshAttr(), groupAttr,
        builder.getI64IntegerAttr(0));
    auto unpacked = dist::FlatUnpackOp::create(builder, loc, chunkTypes,
                                               ownRow.getResult());
    paramChunks.assign(unpacked.getResults().begin(),
                       unpacked.getResults().end());
  }

  SmallVector<Value> updatedChunks;
  for (auto [index, member] : llvm::enumerate(members)) {
    AdamWOp update = member.update;
    for (Value moment : {update.getMoment1(), update.getMoment2()}) {
      auto arg = dyn_cast<BlockArgument>(moment);
      if (!arg || arg.getOwner()->getParentOp() != step || !arg.hasOneUse())
        return update.emitOpError()
               << "reads a moment that is not a state argument of @"
               << step.getSymName() << " used by this update alone";
      shardMoment(arg, chunks[index], group);
    }
    auto chunked = AdamWOp::create(
        builder, update.getLoc(),
        TypeRange{chunkTypes[index], update.getMoment1().getType(),
                  update.getMoment2().getType()},
        paramChunks[index], gradChunks.getResult(index),
        update.getMoment1(), update.getMoment2(), update.getStep(),
        update.getLr(), update.getBeta1Attr(), update.getBeta2Attr(),
        update.getEpsilonAttr(), update.getWeightDecayAttr());
    update.getNewMoment1().replaceAllUsesWith(chunked.getNewMoment1());
    update.getNewMoment2().replaceAllUsesWith(chunked.getNewMoment2());
    updatedChunks.push_back(chunked.getNewParam());
  }

  // Stage 3: each rank keeps its updated chunk, gathered when next used.
  if (stage >= 3) {
    for (auto [member, chunk] : llvm::zip(members, updatedChunks)) {
      member.update.getNewParam().replaceAllUsesWith(chunk);
      member.update.erase();
    }
    reduce.erase();
    return success();
  }
  // Every rank gets every updated parameter back.
  auto ownUpdated = dist::FlatPackOp::create(builder, loc, rowType,
                                             updatedChunks);
  auto gathered = dist::AllGatherOp::create(
      builder, loc, bucketType, ownUpdated, reduce.getMeshAttr(),
      groupAttr, builder.getI64IntegerAttr(0));
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

LogicalResult StepSharder::shardParameters() {
  Block &body = step.getBody().front();
  DenseMap<Operation *, unsigned> positions;
  // The action each op belongs to where a pipeline stage's actions are
  // marked for an action walk (--dist-pipeline=mark-actions=true): the
  // walk runs one copy of each kind of action for every micro-batch, so
  // each action gathers what it reads itself (as DeepSpeed's stage 3
  // does per forward and backward) rather than reusing what an earlier
  // micro-batch's action gathered.
  DenseMap<Operation *, unsigned> actionOf;
  unsigned action = 0;
  for (auto [index, op] : llvm::enumerate(body)) {
    positions[&op] = index;
    if (isa<rt::ActionMarkOp>(op))
      ++action;
    actionOf[&op] = action;
  }
  // Parameters by layer (xfmr.layer; the others, embeddings and the final
  // norm, each a group of their own) and by the ranks they are sharded
  // over (a MoE layer's experts over their expert-data-parallel group, its
  // other parameters over every data-parallel rank), in argument order.
  // Parameters whose group is one rank stay whole.
  std::map<std::pair<int64_t, std::string>, SmallVector<BlockArgument>>
      layers;
  int64_t ungrouped = -1;
  for (BlockArgument arg : body.getArguments()) {
    unsigned index = arg.getArgNumber();
    if (!step.getArgAttr(index, XfmrDialect::kParamAttrName) ||
        mesh.shardsOf(groupOf(arg)) < 2)
      continue;
    // State that AdamW does not train (an aux-free routing bias, moved
    // whole by its own update) stays whole: it has no chunk to update.
    if (step.getArgAttr(index, XfmrDialect::kRoutingBiasAttrName))
      continue;
    auto layer = step.getArgAttrOfType<IntegerAttr>(
        index, XfmrDialect::kLayerAttrName);
    layers[{layer ? layer.getInt() : ungrouped--,
            llvm::join(groupOf(arg), ",")}]
        .push_back(arg);
  }
  // Each run of same-phase uses of a group (within one action, where they
  // are marked) gets one gather.
  struct Gather {
    Axes group;
    SmallVector<BlockArgument> params;
    SmallVector<Type> types;
    SmallVector<OpOperand *> uses;
    unsigned first = ~0u;
  };
  SmallVector<Gather> gathers;
  for (auto &[layer, params] : layers) {
    SmallVector<OpOperand *> uses;
    for (BlockArgument param : params)
      for (OpOperand &use : param.getUses()) {
        if (auto update = dyn_cast<AdamWOp>(use.getOwner());
            update && update.getParam() == param)
          continue; // Updates its own chunk.
        uses.push_back(&use);
      }
    llvm::stable_sort(uses, [&](OpOperand *a, OpOperand *b) {
      return positions.lookup(a->getOwner()) < positions.lookup(b->getOwner());
    });
    std::optional<bool> phase;
    unsigned inAction = 0;
    for (OpOperand *use : uses) {
      bool backward = isBackward(use->getOwner());
      unsigned useAction = actionOf.lookup(use->getOwner());
      if (!phase || *phase != backward || useAction != inAction) {
        inAction = useAction;
        gathers.emplace_back();
        gathers.back().group = groupOf(params.front());
        gathers.back().params = params;
        for (BlockArgument param : params)
          gathers.back().types.push_back(param.getType());
        gathers.back().first = positions.lookup(use->getOwner());
        phase = backward;
      }
      gathers.back().uses.push_back(use);
    }
  }
  llvm::stable_sort(gathers, [](const Gather &a, const Gather &b) {
    return a.first < b.first;
  });
  // Every parameter becomes its chunk.
  for (auto &[layer, params] : layers)
    for (BlockArgument param : params) {
      auto type = cast<RankedTensorType>(param.getType());
      unsigned index = param.getArgNumber();
      auto blockOf = step.getArgAttrOfType<dist::ShardingAttr>(
          index, dist::DistDialect::kLocalShardingAttrName);
      Axes group = groupOf(param);
      DictionaryAttr flat =
          dist::buildFlatShard(flatSharding(group), type.getShape(), blockOf);
      step.removeArgAttr(index, dist::DistDialect::kLocalShardingAttrName);
      step.setArgAttr(index, dist::DistDialect::kFlatShardAttrName, flat);
      param.setType(RankedTensorType::get(
          {dist::flatChunk(type.getNumElements(), mesh.shardsOf(group))},
          type.getElementType()));
      shardedParams[param] = flat;
    }
  // The gathers, each issued where the one before it is first used, so
  // that it overlaps the previous layer's work (prefetch); within its
  // action, where they are marked.
  Operation *previousFirst = nullptr;
  for (Gather &gather : gathers) {
    Operation *firstUse = gather.uses.front()->getOwner();
    bool prefetch = previousFirst && actionOf.lookup(previousFirst) ==
                                         actionOf.lookup(firstUse);
    OpBuilder builder(prefetch ? previousFirst : firstUse);
    previousFirst = firstUse;
    Location loc = firstUse->getLoc();
    SmallVector<Value> chunks(gather.params.begin(), gather.params.end());
    int64_t columns = 0;
    for (BlockArgument param : gather.params)
      columns += cast<RankedTensorType>(param.getType()).getDimSize(0);
    Type element =
        cast<RankedTensorType>(gather.params.front().getType()).getElementType();
    auto row = dist::FlatPackOp::create(
        builder, loc, RankedTensorType::get({1, columns}, element), chunks);
    auto all = dist::AllGatherOp::create(
        builder, loc,
        RankedTensorType::get({mesh.shardsOf(gather.group), columns},
                              element),
        row, mesh.symbol,
        builder.getStrArrayAttr(ArrayRef<StringRef>(gather.group)),
        builder.getI64IntegerAttr(0));
    all->setAttr(
        dist::DistDialect::kLabelAttrName,
        builder.getStringAttr(
            "parameters from " +
            stateOf(step, gather.params.front().getArgNumber()).second.str() +
            (isBackward(firstUse) ? " (backward)" : " (forward)")));
    auto whole = dist::FlatUnpackOp::create(builder, loc, gather.types, all);
    for (OpOperand *use : gather.uses) {
      auto at = llvm::find(gather.params, cast<BlockArgument>(use->get()));
      use->set(whole.getResult(at - gather.params.begin()));
    }
  }
  return success();
}

void StepSharder::markResults() {
  Block &body = step.getBody().front();
  for (unsigned r = 0, e = step.getNumResults(); r < e; ++r)
    for (auto *sharded : {&shardedMoments, &shardedParams})
      for (StringRef attr :
           {XfmrDialect::kMoment1AttrName, XfmrDialect::kMoment2AttrName,
            XfmrDialect::kParamAttrName})
        if (auto name = step.getResultAttrOfType<StringAttr>(r, attr))
          for (auto [arg, flat] : *sharded)
            if (step.getArgAttrOfType<StringAttr>(arg.getArgNumber(), attr) ==
                name) {
              step.removeResultAttr(
                  r, StringAttr::get(step.getContext(),
                                     dist::DistDialect::kLocalShardingAttrName));
              step.setResultAttr(r, dist::DistDialect::kFlatShardAttrName,
                                 flat);
            }
  step.setType(FunctionType::get(step.getContext(), body.getArgumentTypes(),
                                 body.getTerminator()->getOperandTypes()));
}

LogicalResult StepSharder::run() {
  Block &body = step.getBody().front();
  if (stage >= 3 && failed(shardParameters()))
    return failure();
  if (!step->hasAttr(XfmrDialect::kTrainStepAttrName)) {
    markResults();
    return success();
  }
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
  // Every AdamW update now works on chunks, but those of parameters whose
  // group is one rank (experts split over every data-parallel rank: their
  // state is partitioned with them).
  for (auto update : body.getOps<AdamWOp>())
    if (!shardedMoments.count(dyn_cast<BlockArgument>(update.getMoment1())) &&
        mesh.shardsOf(groupOf(update.getParam())) > 1)
      return update.emitOpError()
             << "updates a parameter whose gradient is not summed over "
             << describe(groupOf(update.getParam()))
             << "; ZeRO shards the state over that sum";
  markResults();
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
    if (chosen > 3) {
      module.emitError() << "--dist-zero: stage " << chosen
                         << " does not exist; use 0, 1, 2 or 3";
      return signalPassFailure();
    }
    if (chosen == 0)
      return;
    FailureOr<PartitionMesh> mesh = lookupPartitionMesh(module);
    if (failed(mesh))
      return signalPassFailure();
    if (!mesh->hasData())
      return;
    // Stage 3 changes the parameters the evaluation step reads too.
    for (auto step : module.getOps<func::FuncOp>())
      if ((step->hasAttr(XfmrDialect::kTrainStepAttrName) ||
           (chosen >= 3 && step->hasAttr(XfmrDialect::kEvalStepAttrName))) &&
          failed(StepSharder(step, *mesh, chosen).run()))
        return signalPassFailure();
  }
};

} // namespace
} // namespace partition
