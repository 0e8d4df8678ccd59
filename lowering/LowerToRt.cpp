//===- LowerToRt.cpp - bufferize a training step into kernel calls --------===//
//
// The training step is straight-line code on statically shaped tensors, so
// bufferization is a 1:1 map from tensor values to buffers: no aliasing
// analysis is needed beyond the in-place updates of the state, which are
// decided here from the position of each state tensor's last use. (MLIR's
// one-shot bufferization would need a BufferizableOpInterface model for every
// xfmr op and memref-level twins of each of them, to reach the same result.)
//
//===----------------------------------------------------------------------===//

#include "lowering/Passes.h"
#include "lowering/InOrderParallel.h"

#include "lowering/PipelineStages.h"
#include "lowering/StepLowering.h"

#include "mlir/Dialect/Tensor/IR/Tensor.h"

#include <functional>
#include <memory>
#include <optional>

namespace partition {
#define GEN_PASS_DEF_LOWERTORTPASS
#include "lowering/Passes.h.inc"
} // namespace partition

using namespace mlir;
using namespace partition::xfmr;
using partition::rt::KernelOp;
using partition::rt::RtDialect;

namespace partition::rtlowering {
namespace {

using xfmr::KernelCall;

/// The kernel `op` becomes and the parameters it passes: each xfmr op says
/// so itself (RuntimeKernelOpInterface); arith.addi, the step counter's
/// increment, is the one op of another dialect a step holds.
FailureOr<KernelCall> kernelFor(Operation *op) {
  if (auto kernelOp = dyn_cast<xfmr::RuntimeKernelOpInterface>(op))
    return kernelOp.getKernelCall();
  if (isa<arith::AddIOp>(op))
    return KernelCall{KernelId::AddI32};
  return op->emitOpError("has no runtime kernel");
}

} // namespace

void StepLowering::findTiedEmbeddingSums(Block &body) {
  // The right operand first: autodiff adds each new contribution on the
  // right of the sum so far, so that the sum is the buffer scattered onto,
  // as every micro-batch's embedding gradient is scattered onto the
  // accumulated one (and the micro-batch loop's code is the same for each).
  for (auto add : body.getOps<AddOp>())
    for (Value operand : {add.getRhs(), add.getLhs()}) {
      auto scatter = operand.getDefiningOp<EmbeddingGradOp>();
      if (!scatter || !operand.hasOneUse() || add.getLhs() == add.getRhs())
        continue;
      fusedAdds[add] = scatter;
      fusedEmbeddingGrads.insert(scatter);
      break;
    }
}

LogicalResult StepLowering::lowerTiedEmbeddingSum(OpBuilder &builder, AddOp add,
                                                  EmbeddingGradOp scatter,
                                                  unsigned position) {
  Value other = add.getLhs() == scatter.getResult() ? add.getRhs()
                                                    : add.getLhs();
  Value base = buffers.lookup(other);
  // Scatter onto the other gradient itself when nothing else reads it and
  // the sum is not a result that has a buffer of its own.
  bool reuseBase = other.hasOneUse() && !tiedTargets.count(add.getResult()) &&
                   base.getDefiningOp<memref::AllocOp>();
  Value output =
      reuseBase ? base : destinationFor(builder, add.getResult(), position,
                                        /*inPlace=*/true);
  createKernel(builder, add.getLoc(), KernelId::EmbeddingGradAdd,
               ValueRange{buffers.lookup(scatter.getGrad()),
                          buffers.lookup(scatter.getTokens()), base},
               ValueRange{output});
  buffers.map(add.getResult(), output);
  return success();
}

LogicalResult StepLowering::buildSignature() {
  MLIRContext *context = step.getContext();
  auto stringAttr = [&](StringRef s) { return StringAttr::get(context, s); };
  SmallVector<Type> argTypes;
  SmallVector<DictionaryAttr> argAttrs;
  // (role, name) of each old argument, to tie results to them.
  SmallVector<std::pair<std::string, std::string>> argKeys;
  for (unsigned i = 0, e = step.getNumArguments(); i < e; ++i) {
    std::string role, name;
    for (auto [attrName, roleName] :
         {std::pair<StringRef, StringRef>{XfmrDialect::kParamAttrName, "param"},
          {XfmrDialect::kMoment1AttrName, "moment1"},
          {XfmrDialect::kMoment2AttrName, "moment2"}})
      if (auto value = step.getArgAttrOfType<StringAttr>(i, attrName)) {
        role = roleName.str();
        name = value.getValue().str();
      }
    if (auto input =
            step.getArgAttrOfType<StringAttr>(i, XfmrDialect::kInputAttrName))
      role = input.getValue().str();
    if (role.empty())
      return step.emitError() << "argument #" << i
                              << " has no xfmr.param, xfmr.moment1, "
                                 "xfmr.moment2 or xfmr.input role";
    if (!isStaticTensor(step.getArgumentTypes()[i]))
      return step.emitError() << "argument #" << i
                              << " must be a statically shaped tensor, but is "
                              << step.getArgumentTypes()[i];
    argTypes.push_back(bufferType(step.getArgumentTypes()[i]));
    SmallVector<NamedAttribute> attrs{
        NamedAttribute(stringAttr(RtDialect::kRoleAttrName), stringAttr(role))};
    if (!name.empty())
      attrs.push_back(NamedAttribute(stringAttr(RtDialect::kNameAttrName),
                                     stringAttr(name)));
    // A block of a sharded logical tensor: the runtime initialises, saves
    // and restores it as the whole tensor, so the program must say how.
    for (StringRef shardingName : {dist::DistDialect::kLocalShardingAttrName,
                                   dist::DistDialect::kFlatShardAttrName})
      if (Attribute sharding = step.getArgAttr(i, shardingName))
        attrs.push_back(
            NamedAttribute(stringAttr(shardingName), sharding));
    argAttrs.push_back(DictionaryAttr::get(context, attrs));
    argKeys.push_back({role, name});
  }

  // Each result updates the argument with the same role and name, except the
  // loss and gradients, which get buffers of their own (new arguments).
  SmallVector<int> resultArg;
  bool haveLoss = false;
  int logitsResults = 0;
  for (unsigned r = 0, e = step.getNumResults(); r < e; ++r) {
    std::string role, name;
    for (auto [attrName, roleName] :
         {std::pair<StringRef, StringRef>{XfmrDialect::kParamAttrName, "param"},
          {XfmrDialect::kMoment1AttrName, "moment1"},
          {XfmrDialect::kMoment2AttrName, "moment2"},
          {XfmrDialect::kGradientAttrName, "gradient"}})
      if (auto value = step.getResultAttrOfType<StringAttr>(r, attrName)) {
        role = roleName.str();
        name = value.getValue().str();
      }
    if (auto output = step.getResultAttrOfType<StringAttr>(
            r, XfmrDialect::kOutputAttrName))
      role = output.getValue().str();
    if (!isStaticTensor(step.getResultTypes()[r]))
      return step.emitError() << "result #" << r
                              << " must be a statically shaped tensor, but is "
                              << step.getResultTypes()[r];
    if (role == "loss" || role == "gradient" || role == "logits") {
      // @logits_step returns logits instead of a loss, one buffer per
      // micro-batch, named by its index ("mb0", "mb1", ...).
      haveLoss |= role == "loss" || role == "logits";
      if (role == "logits")
        name = "mb" + std::to_string(logitsResults++);
      resultArg.push_back(argTypes.size());
      argTypes.push_back(bufferType(step.getResultTypes()[r]));
      SmallVector<NamedAttribute> attrs{NamedAttribute(
          stringAttr(RtDialect::kRoleAttrName), stringAttr(role))};
      if (!name.empty())
        attrs.push_back(NamedAttribute(stringAttr(RtDialect::kNameAttrName),
                                       stringAttr(name)));
      // The runtime assembles the logits from each rank's block.
      if (Attribute sharding = step.getResultAttr(
              r, dist::DistDialect::kLocalShardingAttrName);
          sharding && role == "logits")
        attrs.push_back(NamedAttribute(
            stringAttr(dist::DistDialect::kLocalShardingAttrName), sharding));
      argAttrs.push_back(DictionaryAttr::get(context, attrs));
      continue;
    }
    auto match = llvm::find(argKeys, std::make_pair(role, name));
    if (role.empty() || match == argKeys.end())
      return step.emitError() << "result #" << r
                              << " updates no argument (no argument has the "
                                 "same role and name)";
    // The result is written into the argument's buffer, which holds the
    // block the argument's sharding says.
    unsigned arg = match - argKeys.begin();
    for (StringRef shardingName : {dist::DistDialect::kLocalShardingAttrName,
                                   dist::DistDialect::kFlatShardAttrName})
      if (step.getResultAttr(r, shardingName) !=
          step.getArgAttr(arg, shardingName))
        return step.emitError()
               << "result #" << r << " updates argument #" << arg
               << " but its " << shardingName
               << " differs from the argument's";
    resultArg.push_back(arg);
  }
  // A pipeline stage other than the last hands its activations on instead
  // of computing the loss (dist.pipeline_stage; the stream check of the
  // program writer and the loader say which stage must have it).
  if (!haveLoss && !step->hasAttr(kPipelineStageAttrName))
    return step.emitError("training step has no result with "
                          "xfmr.output = \"loss\"");
  addAxisIndexArguments(argTypes, argAttrs);

  OpBuilder builder(step);
  lowered = func::FuncOp::create(builder, step.getLoc(), step.getSymName(),
                                 builder.getFunctionType(argTypes, {}));
  for (NamedAttribute attr : step->getDiscardableAttrs())
    lowered->setAttr(attr.getName(), attr.getValue());
  lowered.setAllArgAttrs(argAttrs);
  Block *body = lowered.addEntryBlock();
  for (auto [oldArg, newArg] :
       llvm::zip(step.getArguments(), body->getArguments()))
    buffers.map(oldArg, newArg);

  Operation *terminator = step.getBody().front().getTerminator();
  for (auto [r, operand] : llvm::enumerate(terminator->getOperands())) {
    Value target = body->getArgument(resultArg[r]);
    resultTargets.push_back(target);
    if (resultArg[r] < static_cast<int>(step.getNumArguments()))
      targetToOldArg[target] = step.getArgument(resultArg[r]);
    // A value returned twice is written once, then copied.
    tiedTargets.try_emplace(operand, target);
  }
  return success();
}

std::string joinAxes(ArrayAttr axes) {
  std::string joined;
  for (Attribute axis : axes)
    joined += (joined.empty() ? "" : ",") +
              cast<StringAttr>(axis).getValue().str();
  return joined;
}

void StepLowering::addAxisIndexArguments(
    SmallVectorImpl<Type> &argTypes, SmallVectorImpl<DictionaryAttr> &argAttrs) {
  // The index is constant for the run: the runtime writes it once into a
  // state buffer, which every op over the same axes reads.
  MLIRContext *context = step.getContext();
  auto add = [&](ArrayAttr axes) {
    std::string name = joinAxes(axes);
    if (axisIndexArgs.count(name))
      return;
    axisIndexArgs[name] = argTypes.size();
    argTypes.push_back(MemRefType::get({}, IntegerType::get(context, 32)));
    argAttrs.push_back(DictionaryAttr::get(
        context,
        {NamedAttribute(StringAttr::get(context, RtDialect::kRoleAttrName),
                        StringAttr::get(context, "axis_index")),
         NamedAttribute(StringAttr::get(context, RtDialect::kNameAttrName),
                        StringAttr::get(context, name))}));
  };
  for (Operation &op : step.getBody().front()) {
    if (auto index = dyn_cast<dist::AxisIndexOp>(op))
      add(index.getAxes());
    else if (auto slice = dyn_cast<dist::AllSliceOp>(op))
      add(slice.getAxes());
  }
}

Value StepLowering::destinationFor(OpBuilder &builder, Value result,
                                   unsigned position, bool inPlace) {
  auto tied = tiedTargets.find(result);
  if (tied != tiedTargets.end()) {
    Value target = tied->second;
    Value oldArg = targetToOldArg.lookup(target);
    unsigned last = oldArg ? lastUse.lookup(oldArg) : 0;
    bool oldValueDead = !oldArg || oldArg.use_empty() || last < position ||
                        (last == position && inPlace);
    if (oldValueDead)
      return target;
  }
  return memref::AllocOp::create(builder, result.getLoc(),
                                 bufferType(result.getType()));
}

LogicalResult StepLowering::lowerOp(OpBuilder &builder, Operation *op,
                                    unsigned position) {
  Location loc = op->getLoc();
  if (isa<rt::ActionMarkOp>(op)) {
    builder.clone(*op); // Where an action starts, for its walk.
    return success();
  }
  if (isa<dist::SendOp, dist::RecvOp>(op))
    return lowerTransfer(builder, op, position);
  if (auto allReduce = dyn_cast<dist::AllReduceOp>(op))
    return lowerAllReduce(builder, allReduce);
  if (isa<dist::AllGatherOp, dist::ReduceScatterOp, dist::RingShiftOp,
          dist::AllToAllOp>(op))
    return lowerBlockCollective(builder, op, position);
  if (auto slice = dyn_cast<dist::AllSliceOp>(op))
    return lowerAllSlice(builder, slice, position);
  auto fresh = [&](Value result) {
    return destinationFor(builder, result, position, false);
  };
  if (auto pack = dyn_cast<dist::FlatPackOp>(op)) {
    flatBuckets->lowerPack(builder, buffers, pack, fresh);
    return success();
  }
  if (auto unpack = dyn_cast<dist::FlatUnpackOp>(op)) {
    flatBuckets->lowerUnpack(builder, buffers, unpack, fresh);
    return success();
  }
  if (auto index = dyn_cast<dist::AxisIndexOp>(op)) {
    buffers.map(index.getResult(), lowered.getArgument(axisIndexArgs.lookup(
                                       joinAxes(index.getAxes()))));
    return success();
  }
  if (fusedEmbeddingGrads.contains(op))
    return success(); // Emitted by the add that consumes it.
  if (auto add = dyn_cast<AddOp>(op); add && fusedAdds.count(op))
    return lowerTiedEmbeddingSum(builder, add, fusedAdds.lookup(op), position);
  if (auto slice = dyn_cast<tensor::ExtractSliceOp>(op)) {
    // The slice's own shape, not the source's rank: a rank-reducing slice
    // must give its users a buffer of the rank they were typed for.
    Value source = buffers.lookup(slice.getSource());
    MemRefType type = memref::SubViewOp::inferRankReducedResultType(
        slice.getType().getShape(), cast<MemRefType>(source.getType()),
        slice.getMixedOffsets(), slice.getMixedSizes(),
        slice.getMixedStrides());
    Value view = memref::SubViewOp::create(
        builder, loc, type, source, slice.getMixedOffsets(),
        slice.getMixedSizes(), slice.getMixedStrides());
    buffers.map(slice.getResult(), view);
    return success();
  }
  if (auto constant = dyn_cast<arith::ConstantOp>(op)) {
    auto splat = dyn_cast<SplatElementsAttr>(constant.getValue());
    if (!splat)
      return op->emitOpError("only splat constants can be lowered");
    Type element = splat.getElementType();
    float value = isa<FloatType>(element)
                      ? splat.getSplatValue<APFloat>().convertToFloat()
                      : static_cast<float>(
                            splat.getSplatValue<APInt>().getSExtValue());
    Value buffer = destinationFor(builder, constant, position, false);
    createKernel(builder, loc, KernelId::Fill, ValueRange{}, ValueRange{buffer},
                 ArrayRef<int64_t>{}, ArrayRef<float>{value});
    buffers.map(constant.getResult(), buffer);
    return success();
  }

  FailureOr<KernelCall> call = kernelFor(op);
  if (failed(call))
    return failure();
  bool inPlace = runtime::kernelInfo(call->kernel).inPlace;
  SmallVector<Value> inputs;
  for (Value operand : op->getOperands())
    inputs.push_back(buffers.lookup(operand));
  SmallVector<Value> outputs;
  for (Value result : op->getResults()) {
    // A value computed only to be packed into a row: written in its slot.
    Value buffer = flatBuckets->slotFor(builder, result);
    if (!buffer)
      buffer = destinationFor(builder, result, position, inPlace);
    outputs.push_back(buffer);
    buffers.map(result, buffer);
  }
  createKernel(builder, loc, call->kernel, inputs, outputs, call->ints,
               call->floats);
  return success();
}

LogicalResult StepLowering::prepare() {
  if (!step.getBody().hasOneBlock())
    return step.emitError("a training step to lower must have a body of "
                          "exactly one block");
  Block &oldBody = step.getBody().front();
  // First: it may move ops.
  pairCountedExchanges(oldBody);
  for (auto [index, op] : llvm::enumerate(oldBody))
    positions[&op] = index;
  // A slice is a view of its source's buffer, so reads of the slice are
  // reads of the argument: the old value stays live until the last of them.
  std::function<unsigned(Value)> lastRead = [&](Value value) {
    unsigned last = 0;
    for (Operation *user : value.getUsers()) {
      last = std::max(last, positions[user]);
      if (auto slice = dyn_cast<tensor::ExtractSliceOp>(user))
        last = std::max(last, lastRead(slice.getResult()));
    }
    return last;
  };
  for (BlockArgument arg : oldBody.getArguments())
    lastUse[arg] = lastRead(arg);
  flatBuckets.emplace(oldBody, positions, lastUse, gatherShardsPerTensor);

  if (failed(buildSignature()))
    return failure();
  findTiedEmbeddingSums(oldBody);
  return success();
}

LogicalResult StepLowering::lowerBody() {
  Block &oldBody = step.getBody().front();
  OpBuilder builder = OpBuilder::atBlockBegin(&lowered.getBody().front());
  for (Operation &op : oldBody.without_terminator())
    if (failed(lowerOp(builder, &op, positions.lookup(&op))))
      return failure();
  Operation *terminator = oldBody.getTerminator();
  for (auto [operand, target] :
       llvm::zip(terminator->getOperands(), resultTargets)) {
    Value buffer = buffers.lookup(operand);
    if (buffer != target)
      createKernel(builder, terminator->getLoc(), KernelId::Copy,
                   ValueRange{buffer}, ValueRange{target});
  }
  func::ReturnOp::create(builder, terminator->getLoc());
  return success();
}

void StepLowering::finish(bool replace) {
  if (replace)
    step.erase();
  else if (lowered)
    lowered.erase();
}

} // namespace partition::rtlowering

namespace partition {
namespace {

struct LowerToRtPass : impl::LowerToRtPassBase<LowerToRtPass> {
  using LowerToRtPassBase::LowerToRtPassBase;
  void runOnOperation() override {
    SmallVector<func::FuncOp> steps;
    for (auto function : getOperation().getOps<func::FuncOp>())
      if (function->hasAttr(XfmrDialect::kTrainStepAttrName) ||
          function->hasAttr(XfmrDialect::kEvalStepAttrName))
        steps.push_back(function);
    if (steps.empty()) {
      getOperation().emitError(
          "no training step to lower (run --xfmr-train-step first)");
      return signalPassFailure();
    }
    // Each step (a pipeline's stages and their evaluation steps) is lowered
    // on its own: its new function is made beside it here, one at a time,
    // since that inserts into the module; the bodies, most of the work, on
    // the context's threads, with diagnostics as from a loop.
    SmallVector<std::unique_ptr<rtlowering::StepLowering>> lowerings;
    bool prepared = true;
    for (func::FuncOp step : steps) {
      lowerings.push_back(std::make_unique<rtlowering::StepLowering>(
          step, gatherShardsPerTensor));
      if (failed(lowerings.back()->prepare())) {
        prepared = false;
        break;
      }
    }
    LogicalResult lowered = failure();
    if (prepared)
      lowered = failableParallelForEachInOrder(
          &getContext(), lowerings.size(),
          [&](size_t index) { return lowerings[index]->lowerBody(); });
    for (auto &lowering : lowerings)
      lowering->finish(succeeded(lowered));
    if (failed(lowered))
      signalPassFailure();
  }
};

} // namespace
} // namespace partition
