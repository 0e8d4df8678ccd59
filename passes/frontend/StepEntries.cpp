//===- StepEntries.cpp - entry points derived from the forward pass ------===//

#include "passes/frontend/StepEntries.h"

#include "dialects/Xfmr/XfmrOps.h"
#include "passes/common/FunctionAttrEdits.h"
#include "passes/plan/Plan.h"

#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringMap.h"

using namespace mlir;
using namespace partition::xfmr;

namespace partition {

namespace {

constexpr StringLiteral kEvalStepName = "eval_step";
constexpr StringLiteral kLogitsStepName = "logits_step";

/// Gives an evaluation entry point the forward function's attributes,
/// xfmr.eval_step (`evalStep`), and its parameters' names, layers and
/// shardings (its first arguments are the parameters, in order).
void markEvaluationEntry(OpBuilder &builder, func::FuncOp forward,
                         const ForwardSignature &signature,
                         func::FuncOp entry,
                         ArrayRef<NamedAttribute> evalStep) {
  for (NamedAttribute attr : forward->getDiscardableAttrs())
    entry->setAttr(attr.getName(), attr.getValue());
  entry->setAttr(XfmrDialect::kEvalStepAttrName,
                 builder.getDictionaryAttr(evalStep));
  FunctionAttrEdits argAttrs(entry);
  for (auto [index, arg] : llvm::enumerate(signature.paramArgs)) {
    argAttrs.set(index, XfmrDialect::kParamAttrName,
                 forward.getArgAttr(arg, XfmrDialect::kParamAttrName));
    if (Attribute layer = forward.getArgAttr(arg, XfmrDialect::kLayerAttrName))
      argAttrs.set(index, XfmrDialect::kLayerAttrName, layer);
    if (Attribute rate =
            forward.getArgAttr(arg, XfmrDialect::kRoutingBiasAttrName))
      argAttrs.set(index, XfmrDialect::kRoutingBiasAttrName, rate);
    if (Attribute sharding = forward.getArgAttr(arg, kShardingAttrName))
      argAttrs.set(index, kShardingAttrName, sharding);
  }
  argAttrs.apply();
}

} // namespace

FailureOr<ForwardSignature> analyzeForward(func::FuncOp forward) {
  if (forward.isExternal())
    return forward.emitError("forward function has no body");
  if (!forward.getBody().hasOneBlock())
    return forward.emitError("forward function must be a single block");
  auto scalarF32 = RankedTensorType::get({}, Float32Type::get(forward.getContext()));
  if (forward.getNumResults() != 1 || forward.getResultTypes()[0] != scalarF32)
    return forward.emitError()
           << "forward function must return exactly one loss of type "
           << scalarF32 << ", but returns (" << forward.getResultTypes() << ")";

  ForwardSignature signature;
  std::optional<unsigned> tokens, targets;
  llvm::StringMap<unsigned> paramIndex;
  for (unsigned i = 0, e = forward.getNumArguments(); i < e; ++i) {
    if (auto name = forward.getArgAttrOfType<StringAttr>(
            i, XfmrDialect::kParamAttrName)) {
      // Moments, checkpoints and shardings refer to a parameter by its name
      // and size it by its shape: both must be unambiguous.
      auto [it, inserted] = paramIndex.try_emplace(name.getValue(), i);
      if (!inserted)
        return forward.emitError()
               << "arguments #" << it->second << " and #" << i
               << " are both the parameter " << name;
      Type type = forward.getArgumentTypes()[i];
      if (auto tensor = dyn_cast<RankedTensorType>(type);
          !tensor || !tensor.hasStaticShape())
        return forward.emitError()
               << "parameter " << name << " (argument #" << i
               << ") must have a static shape, but is " << type;
      signature.paramArgs.push_back(i);
      continue;
    }
    auto input =
        forward.getArgAttrOfType<StringAttr>(i, XfmrDialect::kInputAttrName);
    std::optional<unsigned> *slot = nullptr;
    if (input && input.getValue() == "tokens")
      slot = &tokens;
    else if (input && input.getValue() == "targets")
      slot = &targets;
    if (!slot)
      return forward.emitError()
             << "argument #" << i << " is neither a parameter (xfmr.param) "
             << "nor the tokens or targets (xfmr.input)";
    if (*slot)
      return forward.emitError()
             << "arguments #" << **slot << " and #" << i << " are both "
             << input;
    *slot = i;
  }
  if (!tokens || !targets)
    return forward.emitError(
        "forward function needs a tokens and a targets argument "
        "(xfmr.input = \"tokens\" / \"targets\")");
  // The step slices both along the batch dimension: they must be static
  // [batch, seq] tensors of token ids, and alike.
  Type tokensType = forward.getArgumentTypes()[*tokens];
  auto tokensTensor = dyn_cast<RankedTensorType>(tokensType);
  if (!tokensTensor || tokensTensor.getRank() != 2 ||
      !tokensTensor.hasStaticShape() ||
      !tokensTensor.getElementType().isInteger(32))
    return forward.emitError()
           << "tokens (argument #" << *tokens
           << ") must be a statically shaped [batch, seq] tensor of i32, "
              "but is "
           << tokensType;
  Type targetsType = forward.getArgumentTypes()[*targets];
  if (targetsType != tokensType)
    return forward.emitError()
           << "targets (argument #" << *targets
           << ") must have the type of the tokens, " << tokensType
           << ", but is " << targetsType;
  signature.tokensArg = *tokens;
  signature.targetsArg = *targets;
  return signature;
}

StepTokens stepTokensOf(func::FuncOp forward,
                        const ForwardSignature &signature,
                        int64_t microbatches) {
  auto microTokens =
      cast<RankedTensorType>(forward.getArgumentTypes()[signature.tokensArg]);
  int64_t microBatch = microTokens.getDimSize(0);
  return {microBatch,
          RankedTensorType::get(
              {microBatch * microbatches, microTokens.getDimSize(1)},
              microTokens.getElementType())};
}

std::optional<pipeline::LoopLayout>
stepLoopLayout(int64_t microbatches, const LoopShape &shape, bool forwardOnly) {
  std::optional<pipeline::ScheduleKind> kind =
      pipeline::parseScheduleKind(shape.schedule);
  if (!kind || microbatches > Plan::Pipeline::kMaxMicrobatches)
    return std::nullopt;
  if (shape.walk) {
    // Micro-batches 0, 1 (2 ... for interleaved 1F1B) and the last, which
    // stands for the real last; recorded as a loop of one micro-batch a
    // run so that the runs account for the rest (LoopLayout's numbers,
    // which the walk does not use).
    // Interleaved 1F1B runs micro-batches in groups of pp: a multiple of
    // it.
    int compiled = 3;
    if (*kind == pipeline::ScheduleKind::Interleaved1F1B)
      while (compiled % shape.stages != 0)
        ++compiled;
    if (microbatches < compiled)
      return std::nullopt;
    pipeline::LoopLayout layout;
    layout.stride = 1;
    layout.split = compiled - 1;
    layout.compiled = compiled;
    layout.microbatches = static_cast<int>(microbatches);
    layout.runs = static_cast<int>(microbatches) - compiled + 2;
    layout.settle = static_cast<int>(shape.minSettle);
    return layout;
  }
  pipeline::ScheduleConfig config;
  config.kind = *kind;
  config.stages = static_cast<int>(shape.stages);
  config.chunks = static_cast<int>(shape.chunks);
  config.microbatches = static_cast<int>(microbatches);
  return pipeline::microbatchLoopLayout(config, forwardOnly,
                                       static_cast<int>(shape.minSettle));
}

SmallVector<int64_t>
compiledMicroBatches(int64_t microbatches,
                     const std::optional<pipeline::LoopLayout> &layout) {
  if (!layout)
    return llvm::to_vector(llvm::seq<int64_t>(0, microbatches));
  SmallVector<int64_t> out;
  for (int real : layout->compiledMicrobatches())
    out.push_back(real);
  return out;
}

SmallVector<NamedAttribute> loopEntries(Builder &builder,
                                        const pipeline::LoopLayout &layout) {
  return {builder.getNamedAttr(kMicrobatchLoopKey,
                               builder.getI64IntegerAttr(layout.runs)),
          builder.getNamedAttr(kMicrobatchLoopStrideKey,
                               builder.getI64IntegerAttr(layout.stride)),
          builder.getNamedAttr(kMicrobatchLoopSplitKey,
                               builder.getI64IntegerAttr(layout.split)),
          builder.getNamedAttr(kMicrobatchLoopCompiledKey,
                               builder.getI64IntegerAttr(layout.compiled)),
          builder.getNamedAttr(kMicrobatchLoopSettleKey,
                               builder.getI64IntegerAttr(layout.settle))};
}

std::optional<pipeline::LoopLayout> recordedLoop(Operation *function) {
  for (StringRef name : {XfmrDialect::kTrainStepAttrName,
                         XfmrDialect::kEvalStepAttrName}) {
    auto entry = function->getAttrOfType<DictionaryAttr>(name);
    if (!entry)
      continue;
    auto runs = entry.getAs<IntegerAttr>(kMicrobatchLoopKey);
    auto microbatches = entry.getAs<IntegerAttr>("microbatches");
    if (!runs || !microbatches)
      return std::nullopt;
    auto number = [&](StringRef key, int64_t otherwise) {
      auto value = entry.getAs<IntegerAttr>(key);
      return value ? value.getInt() : otherwise;
    };
    pipeline::LoopLayout layout;
    layout.runs = static_cast<int>(runs.getInt());
    layout.microbatches = static_cast<int>(microbatches.getInt());
    // A step recorded before the pipeline loop: micro-batches 0, 1, 2, k-1.
    layout.stride = static_cast<int>(number(kMicrobatchLoopStrideKey, 1));
    layout.split = static_cast<int>(number(kMicrobatchLoopSplitKey, 3));
    layout.compiled = static_cast<int>(number(kMicrobatchLoopCompiledKey, 4));
    // Recorded before the body could be the first period: the second.
    layout.settle = static_cast<int>(number(kMicrobatchLoopSettleKey, 1));
    return layout;
  }
  return std::nullopt;
}

Value sliceBatch(OpBuilder &builder, Location loc, Value tokens,
                        int64_t index, int64_t microBatch) {
  auto type = cast<RankedTensorType>(tokens.getType());
  if (type.getDimSize(0) == microBatch)
    return tokens;
  auto sliceType = RankedTensorType::get({microBatch, type.getDimSize(1)},
                                         type.getElementType());
  SmallVector<OpFoldResult> offsets{builder.getIndexAttr(index * microBatch),
                                    builder.getIndexAttr(0)};
  SmallVector<OpFoldResult> sizes{builder.getIndexAttr(microBatch),
                                  builder.getIndexAttr(type.getDimSize(1))};
  SmallVector<OpFoldResult> strides(2, builder.getIndexAttr(1));
  return tensor::ExtractSliceOp::create(builder, loc, sliceType, tokens,
                                        offsets, sizes, strides);
}

/// The forward function's arguments as micro-batch `micro` of an entry
/// point sees them: the parameters are the entry block's first arguments,
/// the tokens (and the targets, when given) rows [micro*b, (micro+1)*b) of
/// its stacked `tokens` (`targets`).
static IRMapping microBatchArguments(OpBuilder &builder, func::FuncOp forward,
                                     const ForwardSignature &signature,
                                     Block *body, Value tokens, Value targets,
                                     int64_t micro, int64_t microBatch) {
  Location loc = forward.getLoc();
  IRMapping mapping;
  for (auto [index, arg] : llvm::enumerate(signature.paramArgs))
    mapping.map(forward.getArgument(arg), body->getArgument(index));
  mapping.map(forward.getArgument(signature.tokensArg),
              sliceBatch(builder, loc, tokens, micro, microBatch));
  if (targets)
    mapping.map(forward.getArgument(signature.targetsArg),
                sliceBatch(builder, loc, targets, micro, microBatch));
  return mapping;
}

/// @eval_step(params, tokens, targets) -> loss: the forward passes of the
/// training step's micro-batches and their mean loss, without gradients.
LogicalResult buildEvalStep(ModuleOp module, func::FuncOp forward,
                            const ForwardSignature &signature,
                            int64_t microbatches,
                            const std::optional<pipeline::LoopLayout> &layout) {
  if (SymbolTable::lookupSymbolIn(module, kEvalStepName))
    return forward.emitError() << "symbol @" << kEvalStepName
                               << " already exists; the evaluation step "
                                  "needs that name";
  OpBuilder builder(forward);
  Location loc = forward.getLoc();
  auto scalarF32 = RankedTensorType::get({}, builder.getF32Type());
  StepTokens stacked = stepTokensOf(forward, signature, microbatches);
  int64_t microBatch = stacked.microBatch;
  RankedTensorType stepTokens = stacked.type;

  SmallVector<Type> argTypes;
  for (unsigned arg : signature.paramArgs)
    argTypes.push_back(forward.getArgumentTypes()[arg]);
  size_t numParams = argTypes.size();
  argTypes.append({stepTokens, stepTokens});
  auto eval = func::FuncOp::create(
      builder, loc, kEvalStepName,
      builder.getFunctionType(argTypes, {scalarF32}));
  SmallVector<int64_t> micros = compiledMicroBatches(microbatches, layout);
  SmallVector<NamedAttribute> entry{builder.getNamedAttr(
      "microbatches", builder.getI64IntegerAttr(microbatches))};
  if (layout)
    entry.append(loopEntries(builder, *layout));
  markEvaluationEntry(builder, forward, signature, eval, entry);
  for (auto [index, arg] :
       {std::pair<unsigned, unsigned>{numParams, signature.tokensArg},
        {numParams + 1, signature.targetsArg}})
    if (Attribute sharding = forward.getArgAttr(arg, kShardingAttrName))
      eval.setArgAttr(index, kShardingAttrName, sharding);
  eval.setArgAttr(numParams, XfmrDialect::kInputAttrName,
                  builder.getStringAttr("tokens"));
  eval.setArgAttr(numParams + 1, XfmrDialect::kInputAttrName,
                  builder.getStringAttr("targets"));
  eval.setResultAttr(0, XfmrDialect::kOutputAttrName,
                     builder.getStringAttr("loss"));

  Block *body = eval.addEntryBlock();
  builder.setInsertionPointToStart(body);
  Value tokens = body->getArgument(numParams);
  Value targets = body->getArgument(numParams + 1);
  Block &forwardBody = forward.getBody().front();
  // Looped, the sum starts at zero so that every micro-batch adds alike.
  Value total;
  if (layout)
    total = arith::ConstantOp::create(
        builder, loc, cast<TypedAttr>(builder.getZeroAttr(scalarF32)));
  for (int64_t micro : micros) {
    IRMapping mapping = microBatchArguments(builder, forward, signature, body,
                                            tokens, targets, micro,
                                            microBatch);
    for (Operation &op : forwardBody.without_terminator())
      builder.clone(op, mapping);
    Value loss =
        mapping.lookupOrDefault(forwardBody.getTerminator()->getOperand(0));
    total = total ? AddOp::create(builder, loc, scalarF32, total, loss)
                        .getResult()
                  : loss;
  }
  if (microbatches > 1)
    total = ScaleOp::create(builder, loc, scalarF32, total,
                            builder.getF32FloatAttr(1.0 / microbatches));
  func::ReturnOp::create(builder, loc, total);
  return success();
}

/// @logits_step(params, tokens) -> (logits_0, ..., logits_k-1): the
/// forward pass of each of the step's k micro-batches up to the logits its
/// loss is computed from, in fp32, one result per micro-batch in order, for
/// checking a model's outputs (partition-run --dump-logits). Micro-batch m
/// is rows [m*b, (m+1)*b) of the tokens, as in @eval_step, so that a
/// pipeline's stages run it as they run @eval_step (the last stage returns
/// every result); the runtime puts the rows back in the batch's order. It
/// is an evaluation entry point, so it carries xfmr.eval_step (with
/// `logits = true`): the partitioner, ZeRO and the lowering treat it as
/// they treat @eval_step, and each result is returned in blocks like state
/// (the runtime gathers them). Its output buffers live for the whole run
/// (the memory plan keeps function results), so it is built only when
/// asked for.
LogicalResult buildLogitsStep(ModuleOp module, func::FuncOp forward,
                              const ForwardSignature &signature,
                              int64_t microbatches) {
  if (SymbolTable::lookupSymbolIn(module, kLogitsStepName))
    return forward.emitError() << "symbol @" << kLogitsStepName
                               << " already exists; the logits step needs "
                                  "that name";
  Block &forwardBody = forward.getBody().front();
  Value loss = forwardBody.getTerminator()->getOperand(0);
  auto crossEntropy = loss.getDefiningOp<SoftmaxCrossEntropyOp>();
  if (!crossEntropy)
    return forward.emitError("the loss is not an "
                             "xfmr.softmax_cross_entropy of logits, so "
                             "there are no logits to return");
  Value logits = crossEntropy.getLogits();
  // The ops the logits depend on (not the loss, nor the targets).
  llvm::DenseSet<Operation *> needed;
  SmallVector<Value> pending{logits};
  while (!pending.empty()) {
    Operation *op = pending.pop_back_val().getDefiningOp();
    if (!op || !needed.insert(op).second)
      continue;
    for (Value operand : op->getOperands())
      pending.push_back(operand);
  }

  OpBuilder builder(forward);
  Location loc = forward.getLoc();
  auto logitsType = cast<RankedTensorType>(logits.getType());
  auto resultType =
      RankedTensorType::get(logitsType.getShape(), builder.getF32Type());
  StepTokens stacked = stepTokensOf(forward, signature, microbatches);
  int64_t microBatch = stacked.microBatch;
  RankedTensorType stepTokens = stacked.type;
  SmallVector<Type> argTypes;
  for (unsigned arg : signature.paramArgs)
    argTypes.push_back(forward.getArgumentTypes()[arg]);
  size_t numParams = argTypes.size();
  argTypes.push_back(stepTokens);
  SmallVector<Type> resultTypes(microbatches, resultType);
  auto step = func::FuncOp::create(
      builder, loc, kLogitsStepName,
      builder.getFunctionType(argTypes, resultTypes));
  markEvaluationEntry(
      builder, forward, signature, step,
      {builder.getNamedAttr("microbatches",
                            builder.getI64IntegerAttr(microbatches)),
       builder.getNamedAttr("logits", builder.getUnitAttr())});
  if (Attribute sharding =
          forward.getArgAttr(signature.tokensArg, kShardingAttrName))
    step.setArgAttr(numParams, kShardingAttrName, sharding);
  step.setArgAttr(numParams, XfmrDialect::kInputAttrName,
                  builder.getStringAttr("tokens"));
  for (int64_t micro = 0; micro < microbatches; ++micro)
    step.setResultAttr(micro, XfmrDialect::kOutputAttrName,
                       builder.getStringAttr("logits"));

  Block *body = step.addEntryBlock();
  builder.setInsertionPointToStart(body);
  Value tokens = body->getArgument(numParams);
  SmallVector<Value> results;
  for (int64_t micro = 0; micro < microbatches; ++micro) {
    IRMapping mapping =
        microBatchArguments(builder, forward, signature, body, tokens,
                            /*targets=*/nullptr, micro, microBatch);
    for (Operation &op : forwardBody.without_terminator())
      if (needed.contains(&op))
        builder.clone(op, mapping);
    Value result = mapping.lookupOrDefault(logits);
    // bf16 plans compute the logits in bf16: they are dumped as fp32.
    if (logitsType.getElementType() != builder.getF32Type())
      result = CastOp::create(builder, loc, resultType, result);
    results.push_back(result);
  }
  func::ReturnOp::create(builder, loc, results);
  return success();
}

} // namespace partition
