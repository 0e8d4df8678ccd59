//===- TrainStep.cpp - autodiff + AdamW: the whole training step ----------===//
//
// Builds @train_step from the forward function: per micro-batch a clone of
// the forward pass followed by its reverse-mode derivative, then one AdamW
// update per trained parameter and one xfmr.moe_bias_update per routing bias
// (xfmr.routing_bias: state, not trained). The derivative is generic: each op
// emits its own backward through AutodiffOpInterface.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "passes/frontend/StepEntries.h"

#include "passes/analysis/ForwardFunction.h"
#include "passes/common/FunctionAttrEdits.h"
#include "passes/plan/Plan.h"

#include "dialects/Xfmr/XfmrOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/MapVector.h"

namespace partition {
#define GEN_PASS_DEF_TRAINSTEPPASS
#include "passes/Passes.h.inc"
} // namespace partition

using namespace mlir;
using namespace partition::xfmr;

namespace partition {

namespace {

constexpr StringLiteral kTrainStepName = "train_step";

/// Training can only change a loss that depends on a parameter: a loss that
/// does not (a constant, or one computed from the inputs alone) is an error,
/// as it would "train" at the same loss forever. A parameter the loss does
/// not depend on is a warning, not an error: its gradient is zero, which is
/// legitimate for a frozen or not-yet-used weight (PyTorch DDP refuses it
/// only because its reducer would wait for the gradient forever). Dependence
/// is followed through floating-point values, as autodiff follows it, so
/// "depends" means "receives a gradient".
LogicalResult checkLossDependsOnParameters(func::FuncOp forward,
                                           const ForwardSignature &signature) {
  Block &body = forward.getBody().front();
  Value loss = body.getTerminator()->getOperand(0);
  auto isFloatTensor = [](Value value) {
    auto type = dyn_cast<RankedTensorType>(value.getType());
    return type && isa<FloatType>(type.getElementType());
  };
  llvm::DenseSet<Value> reachesLoss{loss};
  for (Operation &op : llvm::reverse(body.without_terminator())) {
    if (llvm::none_of(op.getResults(),
                      [&](Value v) { return reachesLoss.contains(v); }))
      continue;
    for (Value operand : op.getOperands())
      if (isFloatTensor(operand))
        reachesLoss.insert(operand);
  }
  SmallVector<unsigned> unused;
  for (unsigned arg : signature.paramArgs)
    if (!reachesLoss.contains(forward.getArgument(arg)))
      unused.push_back(arg);
  auto paramName = [&](unsigned arg) {
    return forward.getArgAttrOfType<StringAttr>(arg,
                                                XfmrDialect::kParamAttrName);
  };
  if (unused.size() == signature.paramArgs.size()) {
    Operation *where = loss.getDefiningOp();
    InFlightDiagnostic error =
        where ? where->emitError() : body.getTerminator()->emitError();
    error << "the loss returned by @" << forward.getSymName()
          << " does not depend on any parameter (xfmr.param), so training "
             "cannot change it: compute the loss from the parameters";
    return error;
  }
  for (unsigned arg : unused)
    forward.emitWarning()
        << "the loss does not depend on parameter " << paramName(arg)
        << " (argument #" << arg
        << "): its gradient is always zero, so only weight decay changes "
           "it; remove it unless it is meant to stay unused";
  return success();
}

/// One argument or result of the training step and the attribute that says
/// what it is.
struct Slot {
  Type type;
  StringRef attr;
  StringAttr value;
};

/// Reverse-mode differentiation of straight-line tensor code. One instance
/// serves all micro-batches, so parameter gradients accumulate across them.
class ReverseModeDifferentiator {
public:
  explicit ReverseModeDifferentiator(OpBuilder &builder) : builder(builder) {}

  /// Marks values that depend on a parameter: only they need gradients.
  void markActive(Value value) { active.insert(value); }

  /// Extends the active set over `ops`, in program order.
  void propagateActivity(ArrayRef<Operation *> ops) {
    for (Operation *op : ops) {
      if (llvm::none_of(op->getOperands(),
                        [&](Value v) { return active.contains(v); }))
        continue;
      for (Value result : op->getResults())
        if (isFloatTensor(result))
          active.insert(result);
    }
  }

  /// Emits the backward of `ops` (in program order) at the builder's
  /// insertion point, seeded with d`output` = `seed`.
  LogicalResult differentiate(ArrayRef<Operation *> ops, Value output,
                              Value seed) {
    accumulate(output, seed);
    for (Operation *op : llvm::reverse(ops)) {
      SmallVector<Value> resultGrads;
      for (Value result : op->getResults())
        resultGrads.push_back(gradients.lookup(result));
      if (llvm::all_of(resultGrads, [](Value g) { return !g; }))
        continue;
      // No operand depends on a parameter: nothing to propagate (this also
      // spares constants and other rule-less leaves, e.g. a constant loss).
      if (llvm::none_of(op->getOperands(),
                        [&](Value v) { return active.contains(v); }))
        continue;
      auto rule = dyn_cast<AutodiffOpInterface>(op);
      if (!rule)
        return op->emitOpError()
               << "has no gradient rule (it does not implement "
                  "AutodiffOpInterface), but the loss depends on it";
      SmallVector<bool> needOperandGrad;
      for (Value operand : op->getOperands())
        needOperandGrad.push_back(active.contains(operand));
      FailureOr<SmallVector<Value>> operandGrads =
          rule.buildBackward(builder, resultGrads, needOperandGrad);
      if (failed(operandGrads))
        return failure();
      for (auto [operand, grad] : llvm::zip(op->getOperands(), *operandGrads))
        if (grad && active.contains(operand))
          accumulate(operand, grad);
    }
    return success();
  }

  /// The gradient accumulated for `value`, or null when it has none.
  Value gradient(Value value) const { return gradients.lookup(value); }

  /// Starts `value`'s gradient at `zero`, so that every contribution,
  /// the first included, is added (a looped step's micro-batches then all
  /// run the same code).
  void startAtZero(Value value, Value zero) { gradients[value] = zero; }

private:
  static bool isFloatTensor(Value value) {
    auto type = dyn_cast<RankedTensorType>(value.getType());
    return type && isa<FloatType>(type.getElementType());
  }

  /// A value used several times receives the sum of its uses' gradients.
  void accumulate(Value value, Value grad) {
    Value &slot = gradients[value];
    slot = slot ? AddOp::create(builder, grad.getLoc(), grad.getType(), slot,
                                grad)
                      .getResult()
                : grad;
  }

  OpBuilder &builder;
  llvm::DenseSet<Value> active;
  llvm::DenseMap<Value, Value> gradients;
};

/// The training step as declared: its function, how many parameters it
/// takes, their moments' types and the rows of one micro-batch.
struct TrainStepLayout {
  func::FuncOp step;
  size_t numParams;
  /// The indices (among the parameters) of the trained ones, which have
  /// moments, and the routing biases' rates (by index), which do not.
  SmallVector<size_t> trained;
  llvm::DenseMap<size_t, FloatAttr> routingBiases;
  SmallVector<RankedTensorType> momentTypes;
  int64_t microBatch;
};

/// Each routing bias's (parameter index) moe_route counts, one per
/// micro-batch: the load its update needs.
/// Per routing bias (its argument index): the step's summed expert load.
using RoutedLoads = llvm::MapVector<size_t, Value>;

struct TrainStepPass : impl::TrainStepPassBase<TrainStepPass> {
  using Base::Base;

  void runOnOperation() override {
    FailureOr<func::FuncOp> found = findForwardFunction(
        getOperation(), "--xfmr-train-step", "the forward pass");
    if (failed(found))
      return signalPassFailure();
    func::FuncOp forward = *found;
    // The loop's layout: the schedule for every micro-batch, expanded and
    // checked once here, then asked for while the step is built.
    if (loop)
      trainLoop = stepLoopLayout(microbatches, loopShape(),
                                 /*forwardOnly=*/false);
    if (failed(buildTrainStep(forward)))
      return signalPassFailure();
    if (withEval) {
      FailureOr<ForwardSignature> signature = analyzeForward(forward);
      if (failed(signature) || failed(buildEvalStep(getOperation(), forward, *signature,
                                                  microbatches, evalLayout())))
        return signalPassFailure();
    }
    if (withLogits) {
      FailureOr<ForwardSignature> signature = analyzeForward(forward);
      if (failed(signature) || failed(buildLogitsStep(getOperation(), forward, *signature,
                                                    microbatches)))
        return signalPassFailure();
    }
    forward.erase();
  }

  LogicalResult checkOptions(func::FuncOp forward) {
    if (optimizer != "adamw" && optimizer != "none")
      return forward.emitError() << "optimizer must be adamw or none, but is "
                                 << optimizer.getValue();
    if (microbatches < 1 || microbatches > Plan::Pipeline::kMaxMicrobatches)
      return forward.emitError()
             << "microbatches must be between 1 and "
             << Plan::Pipeline::kMaxMicrobatches << ", but is "
             << microbatches.getValue();
    int64_t copies = compiledMicroBatches(microbatches, trainLayout()).size();
    if (auto model =
            forward->getAttrOfType<DictionaryAttr>(XfmrDialect::kModelAttrName))
      if (auto layers = model.getAs<IntegerAttr>("layers");
          layers && layers.getInt() * copies >
                        Plan::Pipeline::kMaxLayerMicrobatches)
        return forward.emitError()
               << "the step would be unrolled " << copies
               << " times over " << layers.getInt() << " layers ("
               << layers.getInt() * copies
               << " layer micro-batches); at most "
               << Plan::Pipeline::kMaxLayerMicrobatches
               << " compile (about 7 KB of program and 80 KB of compile "
                  "memory each): use fewer micro-batches (partition-compile "
                  "--microbatches, or pipeline.microbatches in the plan)";
    for (auto [name, beta] : {std::pair<StringRef, double>{"beta1", beta1},
                              {"beta2", beta2}})
      if (!(beta >= 0.0 && beta < 1.0))
        return forward.emitError()
               << name << " must be in [0, 1), but is " << beta;
    if (!(epsilon > 0.0))
      return forward.emitError() << "epsilon must be positive, but is "
                                 << epsilon;
    if (!(weightDecay >= 0.0))
      return forward.emitError()
             << "weight-decay must be non-negative, but is " << weightDecay;
    return success();
  }

  LogicalResult buildTrainStep(func::FuncOp forward) {
    if (failed(checkOptions(forward)))
      return failure();
    FailureOr<ForwardSignature> signature = analyzeForward(forward);
    if (failed(signature) ||
        failed(checkLossDependsOnParameters(forward, *signature)))
      return failure();
    if (auto existing = SymbolTable::lookupSymbolIn(getOperation(),
                                                    kTrainStepName);
        existing && existing != forward)
      return existing->emitError()
             << "symbol @" << kTrainStepName
             << " already exists; the training step needs that name";

    OpBuilder builder(forward);
    TrainStepLayout layout = declareTrainStep(builder, forward, *signature);
    func::FuncOp step = layout.step;
    Location loc = forward.getLoc();

    Block *body = step.addEntryBlock();
    builder.setInsertionPointToStart(body);
    auto stepArgs = body->getArguments();
    size_t numParams = layout.numParams;
    ValueRange params = stepArgs.take_front(numParams);
    Value tokens = stepArgs[stepArgs.size() - 2];
    Value targets = stepArgs.back();

    // --- Forward and backward of each micro-batch. ------------------------
    SmallVector<Value> grads;
    RoutedLoads routed;
    FailureOr<Value> meanLoss =
        forwardAndBackward(builder, forward, *signature, layout, params,
                           tokens, targets, grads, routed);
    if (failed(meanLoss))
      return failure();
    SmallVector<Value> results{*meanLoss};
    if (optimizer != "adamw") {
      results.append(grads);
      func::ReturnOp::create(builder, loc, results);
      return success();
    }

    // --- AdamW. ------------------------------------------------------------
    appendAdamW(builder, loc, stepArgs, layout, grads, routed, results);
    func::ReturnOp::create(builder, loc, results);
    return success();
  }

  /// The training step's function, declared before `forward` with its
  /// arguments and results and their attributes (the body is empty).
  /// With AdamW:  (params, moment1, moment2, step, lr, tokens, targets)
  ///              -> (loss, params', moment1', moment2', step + 1)
  /// Without:     (params, tokens, targets) -> (loss, gradients)
  /// The moments and gradients are the trained parameters' (not the
  /// routing biases').
  TrainStepLayout declareTrainStep(OpBuilder &builder, func::FuncOp forward,
                                   const ForwardSignature &signature) {
    Location loc = forward.getLoc();
    auto f32 = builder.getF32Type();
    auto scalarF32 = RankedTensorType::get({}, f32);
    auto scalarI32 = RankedTensorType::get({}, builder.getI32Type());

    bool withOptimizer = optimizer == "adamw";
    StepTokens stacked = stepTokensOf(forward, signature, microbatches);
    int64_t microBatch = stacked.microBatch;
    RankedTensorType stepTokens = stacked.type;

    SmallVector<Slot> argSlots, resultSlots;
    SmallVector<RankedTensorType> momentTypes;
    SmallVector<size_t> trained;
    llvm::DenseMap<size_t, FloatAttr> routingBiases;
    auto role = [&](StringRef value) { return builder.getStringAttr(value); };
    for (auto [index, arg] : llvm::enumerate(signature.paramArgs)) {
      auto type = cast<RankedTensorType>(forward.getArgumentTypes()[arg]);
      argSlots.push_back({type, XfmrDialect::kParamAttrName,
                          forward.getArgAttrOfType<StringAttr>(
                              arg, XfmrDialect::kParamAttrName)});
      // A routing bias is state the step moves by its own rule: it has no
      // gradient and no moments.
      if (auto rate = forward.getArgAttrOfType<FloatAttr>(
              arg, XfmrDialect::kRoutingBiasAttrName)) {
        routingBiases[index] = rate;
        continue;
      }
      trained.push_back(index);
      momentTypes.push_back(RankedTensorType::get(type.getShape(), f32));
    }
    size_t numParams = argSlots.size(), numTrained = trained.size();
    resultSlots.push_back({scalarF32, XfmrDialect::kOutputAttrName, role("loss")});
    if (withOptimizer) {
      for (StringRef attr :
           {XfmrDialect::kMoment1AttrName, XfmrDialect::kMoment2AttrName})
        for (size_t i = 0; i < numTrained; ++i)
          argSlots.push_back({momentTypes[i], attr, argSlots[trained[i]].value});
      argSlots.push_back({scalarI32, XfmrDialect::kInputAttrName, role("step")});
      argSlots.push_back({scalarF32, XfmrDialect::kInputAttrName, role("lr")});
      // The state comes back updated, in the order it came in.
      resultSlots.append(argSlots.begin(),
                         argSlots.begin() + numParams + 2 * numTrained);
      resultSlots.push_back({scalarI32, XfmrDialect::kOutputAttrName, role("step")});
    } else {
      for (size_t i : trained)
        resultSlots.push_back({argSlots[i].type, XfmrDialect::kGradientAttrName,
                               argSlots[i].value});
    }
    argSlots.push_back({stepTokens, XfmrDialect::kInputAttrName, role("tokens")});
    argSlots.push_back({stepTokens, XfmrDialect::kInputAttrName, role("targets")});

    auto typesOf = [](ArrayRef<Slot> slots) {
      return llvm::to_vector(llvm::map_range(slots, [](const Slot &slot) {
        return slot.type;
      }));
    };
    auto step = func::FuncOp::create(
        builder, loc, kTrainStepName,
        builder.getFunctionType(typesOf(argSlots), typesOf(resultSlots)));
    for (NamedAttribute attr : forward->getDiscardableAttrs())
      step->setAttr(attr.getName(), attr.getValue());
    step->setAttr(XfmrDialect::kTrainStepAttrName, hyperParameters(builder));
    // Set at once (FunctionAttrEdits): setArgAttr per argument was
    // quadratic in the arguments.
    FunctionAttrEdits argAttrs(step);
    for (auto [index, slot] : llvm::enumerate(argSlots))
      argAttrs.set(index, slot.attr, slot.value);
    // A parameter's layer goes with it and with its moments; a routing
    // bias stays marked (ZeRO leaves it whole).
    for (auto [index, arg] : llvm::enumerate(signature.paramArgs)) {
      if (Attribute layer = forward.getArgAttr(arg, XfmrDialect::kLayerAttrName))
        argAttrs.set(index, XfmrDialect::kLayerAttrName, layer);
      if (Attribute rate =
              forward.getArgAttr(arg, XfmrDialect::kRoutingBiasAttrName))
        argAttrs.set(index, XfmrDialect::kRoutingBiasAttrName, rate);
    }
    if (withOptimizer)
      for (auto [moment, index] : llvm::enumerate(trained))
        if (Attribute layer = forward.getArgAttr(signature.paramArgs[index],
                                                 XfmrDialect::kLayerAttrName))
          for (size_t copy = 0; copy < 2; ++copy)
            argAttrs.set(numParams + copy * numTrained + moment,
                         XfmrDialect::kLayerAttrName, layer);
    // Sharding annotations on the weights travel with them (the moments
    // follow their parameter when the step is partitioned).
    for (auto [index, arg] : llvm::enumerate(signature.paramArgs))
      if (Attribute sharding = forward.getArgAttr(arg, kShardingAttrName))
        argAttrs.set(index, kShardingAttrName, sharding);
    // So do annotations of the tokens and targets (the last two arguments).
    unsigned numArgs = argSlots.size();
    for (auto [index, arg] :
         {std::pair<unsigned, unsigned>{numArgs - 2, signature.tokensArg},
          {numArgs - 1, signature.targetsArg}})
      if (Attribute sharding = forward.getArgAttr(arg, kShardingAttrName))
        argAttrs.set(index, kShardingAttrName, sharding);
    argAttrs.apply();
    FunctionAttrEdits resultAttrs(step, FunctionAttrEdits::Of::Results);
    for (auto [index, slot] : llvm::enumerate(resultSlots))
      resultAttrs.set(index, slot.attr, slot.value);
    resultAttrs.apply();
    return {step, numParams, trained, routingBiases, momentTypes, microBatch};
  }

  /// The forward and backward passes of every micro-batch of the step (of
  /// those the loop needs only under the micro-batch loop, whose body's
  /// code then runs for the others), built at `builder`'s insertion
  /// point: returns the mean loss, sets `grads` to each trained parameter's
  /// gradient (of that mean) and `routed` to the summed load of the routes
  /// that take each routing bias. Each micro-batch adds its loss and loads
  /// to running sums right after its backward pass, so that nothing of a
  /// micro-batch outlives it but those sums and the gradients'.
  FailureOr<Value> forwardAndBackward(OpBuilder &builder, func::FuncOp forward,
                                      const ForwardSignature &signature,
                                      const TrainStepLayout &layout,
                                      ValueRange params, Value tokens,
                                      Value targets,
                                      SmallVectorImpl<Value> &grads,
                                      RoutedLoads &routed) {
    Location loc = forward.getLoc();
    int64_t microBatch = layout.microBatch;
    auto scalarF32 = RankedTensorType::get({}, builder.getF32Type());
    ReverseModeDifferentiator differentiator(builder);
    for (size_t index : layout.trained)
      differentiator.markActive(params[index]);
    // d(mean of k losses)/d(loss_i) = 1/k: seeding with it averages the
    // accumulated gradients without a separate scaling pass.
    double inverseCount = 1.0 / static_cast<double>(microbatches);
    Value seed = arith::ConstantOp::create(
        builder, loc,
        DenseElementsAttr::get(scalarF32, builder.getF32FloatAttr(inverseCount)
                                              .getValue()));
    Value meanLoss;
    // Under the micro-batch loop every sum starts at zero: the first
    // micro-batch then adds as the others do, and the loop's body can be
    // the first period (scheduling/MicrobatchLoop.h). 0 + x is x, so the
    // sums are unchanged.
    auto zerosOf = [&](Type type) -> Value {
      return arith::ConstantOp::create(
          builder, loc, cast<TypedAttr>(builder.getZeroAttr(type)));
    };
    if (trainLayout()) {
      meanLoss = zerosOf(scalarF32);
      for (size_t index : layout.trained)
        differentiator.startAtZero(params[index],
                                   zerosOf(params[index].getType()));
      // The loads of the routing biases that routes take, in route order.
      for (Operation &op : forward.getBody().front())
        if (auto route = dyn_cast<MoeRouteOp>(op))
          for (auto [index, rate] : layout.routingBiases)
            if (route.getBias() &&
                route.getBias() ==
                    forward.getArgument(signature.paramArgs[index]) &&
                !routed.count(index))
              routed[index] = zerosOf(params[index].getType());
    }
    for (int64_t micro : compiledMicroBatches(microbatches, trainLayout())) {
      IRMapping mapping;
      for (auto [index, arg] : llvm::enumerate(signature.paramArgs))
        mapping.map(forward.getArgument(arg), params[index]);
      mapping.map(forward.getArgument(signature.tokensArg),
                  sliceBatch(builder, loc, tokens, micro, microBatch));
      mapping.map(forward.getArgument(signature.targetsArg),
                  sliceBatch(builder, loc, targets, micro, microBatch));

      SmallVector<Operation *> cloned;
      SmallVector<std::pair<size_t, Value>> counts;
      Block &forwardBody = forward.getBody().front();
      for (Operation &op : forwardBody.without_terminator()) {
        cloned.push_back(builder.clone(op, mapping));
        if (auto route = dyn_cast<MoeRouteOp>(cloned.back()))
          if (Value bias = route.getBias())
            for (auto [index, rate] : layout.routingBiases)
              if (bias == params[index])
                counts.push_back({index, route.getCounts()});
      }
      Value loss = mapping.lookupOrDefault(
          forwardBody.getTerminator()->getOperand(0));
      differentiator.propagateActivity(cloned);
      if (failed(differentiator.differentiate(cloned, loss, seed)))
        return failure();
      meanLoss = meanLoss ? AddOp::create(builder, loc, scalarF32, meanLoss,
                                          loss)
                                .getResult()
                          : loss;
      // DeepSeek-V3's bias update reads the step's load: each
      // micro-batch's routes add theirs.
      for (auto [index, micro] : counts) {
        Value bias = params[index];
        auto biasType = cast<RankedTensorType>(bias.getType());
        Value part =
            MoeExpertLoadOp::create(builder, bias.getLoc(), biasType, micro);
        Value &load = routed[index];
        load = load ? AddOp::create(builder, bias.getLoc(), biasType, load,
                                    part)
                          .getResult()
                    : part;
      }
    }
    if (microbatches > 1)
      meanLoss = ScaleOp::create(builder, loc, scalarF32, meanLoss,
                                 builder.getF32FloatAttr(inverseCount));
    for (size_t index : layout.trained) {
      Value param = params[index];
      Value grad = differentiator.gradient(param);
      if (!grad) // The loss does not depend on it: its gradient is zero.
        grad = arith::ConstantOp::create(
            builder, loc, cast<TypedAttr>(builder.getZeroAttr(param.getType())));
      grads.push_back(grad);
    }
    return meanLoss;
  }

  /// One AdamW update per trained parameter and one bias update per routing
  /// bias, appending the new parameters, moments and step counter to
  /// `results`.
  void appendAdamW(OpBuilder &builder, Location loc, ValueRange stepArgs,
                   const TrainStepLayout &layout, ArrayRef<Value> grads,
                   const RoutedLoads &routed,
                   SmallVectorImpl<Value> &results) {
    auto scalarI32 = RankedTensorType::get({}, builder.getI32Type());
    size_t numParams = layout.numParams, numTrained = layout.trained.size();
    ValueRange params = stepArgs.take_front(numParams);
    ValueRange moment1 = stepArgs.slice(numParams, numTrained);
    ValueRange moment2 = stepArgs.slice(numParams + numTrained, numTrained);
    Value stepCount = stepArgs[numParams + 2 * numTrained];
    Value lr = stepArgs[numParams + 2 * numTrained + 1];
    Value one = arith::ConstantOp::create(
        builder, loc, DenseElementsAttr::get(scalarI32, builder.getI32IntegerAttr(1)
                                                           .getValue()));
    Value nextStep = arith::AddIOp::create(builder, loc, stepCount, one);
    SmallVector<Value> newParams(params.begin(), params.end());
    SmallVector<Value> newMoment1, newMoment2;
    for (auto [i, index] : llvm::enumerate(layout.trained)) {
      Value param = params[index];
      auto paramType = cast<RankedTensorType>(param.getType());
      const RankedTensorType &momentType = layout.momentTypes[i];
      // Decay matrices only, as Megatron-LM and nanoGPT do: decaying norm
      // gains and biases towards zero hurts and saves nothing.
      double decay = paramType.getRank() >= 2 ? weightDecay.getValue() : 0.0;
      auto update = AdamWOp::create(
          builder, param.getLoc(), paramType, momentType, momentType, param,
          grads[i], moment1[i], moment2[i], nextStep, lr,
          builder.getF32FloatAttr(beta1), builder.getF32FloatAttr(beta2),
          builder.getF32FloatAttr(epsilon), builder.getF32FloatAttr(decay));
      newParams[index] = update.getNewParam();
      newMoment1.push_back(update.getNewMoment1());
      newMoment2.push_back(update.getNewMoment2());
    }
    // DeepSeek-V3's bias update, once per step from the step's load (each
    // micro-batch's summed), whatever the micro-batching. A bias no route
    // takes keeps its value.
    for (auto [index, load] : routed) {
      Value bias = params[index];
      newParams[index] = MoeBiasUpdateOp::create(
          builder, bias.getLoc(), cast<RankedTensorType>(bias.getType()), bias,
          load, layout.routingBiases.lookup(index));
    }

    results.append(newParams);
    results.append(newMoment1);
    results.append(newMoment2);
    results.push_back(nextStep);
  }

  DictionaryAttr hyperParameters(OpBuilder &builder) {
    SmallVector<NamedAttribute> entries{
        builder.getNamedAttr("optimizer", builder.getStringAttr(optimizer)),
        builder.getNamedAttr("microbatches",
                             builder.getI64IntegerAttr(microbatches)),
        builder.getNamedAttr("beta1", builder.getF32FloatAttr(beta1)),
        builder.getNamedAttr("beta2", builder.getF32FloatAttr(beta2)),
        builder.getNamedAttr("epsilon", builder.getF32FloatAttr(epsilon)),
        builder.getNamedAttr("weight_decay",
                             builder.getF32FloatAttr(weightDecay)),
    };
    if (trainLayout())
      entries.append(loopEntries(builder, *trainLayout()));
    return builder.getDictionaryAttr(entries);
  }

  LoopShape loopShape() const {
    LoopShape shape;
    shape.stages = loopStages;
    shape.chunks = loopChunks;
    shape.schedule = loopSchedule;
    shape.minSettle = loopSettle;
    shape.walk = loopWalk && loopStages > 1;
    return shape;
  }
  /// The training step's loop (and the evaluation step's), when asked for
  /// and the micro-batches allow one.
  const std::optional<pipeline::LoopLayout> &trainLayout() const {
    return trainLoop;
  }
  std::optional<pipeline::LoopLayout> evalLayout() const {
    if (!loop)
      return std::nullopt;
    return stepLoopLayout(microbatches, loopShape(), /*forwardOnly=*/true);
  }

  std::optional<pipeline::LoopLayout> trainLoop;
};

} // namespace
} // namespace partition
