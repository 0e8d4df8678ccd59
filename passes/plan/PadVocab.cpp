//===- PadVocab.cpp - --dist-pad-vocab: a vocabulary tp can split ---------===//
//
// Megatron-LM pads the vocabulary (GPT-2's 50257 ids) to a multiple of
// tp x make-vocab-size-divisible-by so that the vocab-parallel embedding, LM
// head and loss split it evenly. Here the padding is a rewrite of the
// forward model, before autodiff, so that every later pass (the training
// step, mixed precision, the partitioner) sees ordinary shapes: the tables
// become [Vp, C] and the logits [B, T, Vp]. What makes the padded model the
// unpadded one is recorded on the loss, `vocab = V`, which the vocabulary-
// parallel loss kernels use to leave the padding ids out of the softmax and
// give them a gradient of exactly zero; so the padding rows, zero at
// initialisation, stay zero (AdamW of a zero gradient from zero moments
// moves nothing) and the loss and every gradient are the unpadded model's.
//
// The runtime needs to know which state tensors are padded to initialise
// and checkpoint them at their V logical rows: the model configuration (the
// program's model description) records `padded_vocab` and `padded_params`.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"
#include "passes/plan/Plan.h"
#include "passes/partition/Layout.h"

#include "dialects/Xfmr/XfmrDialect.h"
#include "dialects/Xfmr/XfmrOps.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/SetVector.h"

namespace partition {
#define GEN_PASS_DEF_PADVOCABPASS
#include "passes/Passes.h.inc"
} // namespace partition

using namespace mlir;
using namespace partition::xfmr;

namespace partition {
namespace {

/// Pads the vocabulary of `forward` from `vocab` to `padded` rows.
LogicalResult padForward(func::FuncOp forward, int64_t vocab, int64_t padded,
                         int64_t granule) {
  auto isParam = [&](Value value) {
    auto arg = dyn_cast<BlockArgument>(value);
    return arg && arg.getOwner()->getParentOp() == forward &&
           forward.getArgAttr(arg.getArgNumber(),
                              XfmrDialect::kParamAttrName);
  };
  auto describeParam = [&](BlockArgument arg) {
    return forward
        .getArgAttrOfType<StringAttr>(arg.getArgNumber(),
                                      XfmrDialect::kParamAttrName)
        .getValue();
  };
  auto refuse = [&](Operation *op, const Twine &problem) {
    return op->emitOpError()
           << problem << "; --dist-pad-vocab pads the vocabulary of " << vocab
           << " ids to " << padded << " (a multiple of tp x vocab_multiple = "
           << granule << ") only for embedding tables and a bias-less LM "
                         "head of parameters";
  };

  // The tables: the embeddings' and the LM heads' (one parameter when
  // tied), each padded once.
  llvm::SetVector<BlockArgument> tables;
  SmallVector<std::pair<LinearOp, SoftmaxCrossEntropyOp>> heads;
  WalkResult walk = forward.walk([&](Operation *op) {
    if (auto embedding = dyn_cast<EmbeddingOp>(op)) {
      if (embedding.getTable().getType().getDimSize(0) != vocab)
        return WalkResult::advance();
      if (!isParam(embedding.getTable())) {
        (void)refuse(op, "looks up a table that is not a parameter");
        return WalkResult::interrupt();
      }
      tables.insert(cast<BlockArgument>(embedding.getTable()));
      return WalkResult::advance();
    }
    auto loss = dyn_cast<SoftmaxCrossEntropyOp>(op);
    if (!loss || loss.getLogits().getType().getDimSize(2) != vocab)
      return WalkResult::advance();
    auto head = loss.getLogits().getDefiningOp<LinearOp>();
    if (!head || !isParam(head.getWeight()) || head.getBias() ||
        !head->hasOneUse()) {
      (void)refuse(op, "takes logits that are not the only use of a "
                       "bias-less linear of a parameter");
      return WalkResult::interrupt();
    }
    tables.insert(cast<BlockArgument>(head.getWeight()));
    heads.push_back({head, loss});
    return WalkResult::advance();
  });
  if (walk.wasInterrupted())
    return failure();

  // Every use of a padded table must be one the padding was made for.
  for (BlockArgument table : tables) {
    for (OpOperand &use : table.getUses()) {
      Operation *user = use.getOwner();
      bool lookup = isa<EmbeddingOp>(user) && use.getOperandNumber() == 1;
      bool head = llvm::any_of(heads, [&](auto &pair) {
        return pair.first.getOperation() == user &&
               use.getOperandNumber() == 1;
      });
      if (!lookup && !head)
        return refuse(user, "uses the vocabulary-sized parameter '" +
                                describeParam(table) + "'");
    }
  }

  for (BlockArgument table : tables) {
    auto type = cast<RankedTensorType>(table.getType());
    SmallVector<int64_t> shape(type.getShape());
    shape[0] = padded;
    table.setType(type.clone(shape));
  }
  Builder builder(forward.getContext());
  for (auto [head, loss] : heads) {
    auto type = cast<RankedTensorType>(head.getType());
    SmallVector<int64_t> shape(type.getShape());
    shape.back() = padded;
    head.getResult().setType(type.clone(shape));
    loss.setVocabAttr(builder.getI64IntegerAttr(vocab));
  }
  SmallVector<Type> inputs(forward.getBody().getArgumentTypes());
  forward.setFunctionType(
      builder.getFunctionType(inputs, forward.getResultTypes()));

  // For the runtime (initialisation and checkpoints at V rows).
  SmallVector<Attribute> names;
  for (BlockArgument table : tables)
    names.push_back(builder.getStringAttr(describeParam(table)));
  auto config =
      forward->getAttrOfType<DictionaryAttr>(XfmrDialect::kModelAttrName);
  NamedAttrList entries(config);
  entries.set("padded_vocab", builder.getI64IntegerAttr(padded));
  entries.set("padded_params", builder.getArrayAttr(names));
  forward->setAttr(XfmrDialect::kModelAttrName,
                   entries.getDictionary(forward.getContext()));
  return success();
}

struct PadVocabPass : impl::PadVocabPassBase<PadVocabPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    // Reports a missing plan (run --dist-apply-plan first).
    FailureOr<PartitionMesh> mesh = lookupPartitionMesh(module);
    if (failed(mesh))
      return signalPassFailure();
    dist::PlanAttr plan = dist::getPlan(module);
    if (!mesh->hasTensor())
      return;
    int64_t granule =
        mesh->shardsOf(mesh->tensorAxes) * plan.getVocabMultiple();
    for (auto forward : module.getOps<func::FuncOp>()) {
      auto config =
          forward->getAttrOfType<DictionaryAttr>(XfmrDialect::kModelAttrName);
      if (!config)
        continue;
      if (config.get("padded_vocab")) {
        forward.emitError("the vocabulary is padded already; run "
                          "--dist-pad-vocab once, before --xfmr-train-step");
        return signalPassFailure();
      }
      if (forward->hasAttr(XfmrDialect::kTrainStepAttrName) ||
          forward->hasAttr(XfmrDialect::kEvalStepAttrName)) {
        forward.emitError("--dist-pad-vocab pads the forward model; run it "
                          "before --xfmr-train-step");
        return signalPassFailure();
      }
      auto vocab = config.getAs<IntegerAttr>("vocab");
      if (!vocab)
        continue;
      int64_t padded = paddedVocab(vocab.getInt(), granule);
      if (padded == vocab.getInt())
        continue;
      if (failed(padForward(forward, vocab.getInt(), padded, granule)))
        return signalPassFailure();
    }
  }
};

} // namespace
} // namespace partition
