//===- MixedPrecision.cpp - bf16 forward pass, fp32 master weights --------===//
//
// Rewrites the forward function before autodiff, so that the backward pass
// and the optimizer's fp32 gradients follow from the ops' own backward rules
// (a cast's backward is the cast back) instead of a second rewrite of the
// training step.
//
// A token embedding looks its rows up in the fp32 table and casts them: the
// same bf16 values as rows of a cast table, without casting (and, in the
// backward, scattering into and casting back) the whole table each step;
// its gradient is then summed in fp32, as PyTorch's autocast, which leaves
// embeddings in fp32, does.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "passes/analysis/ForwardFunction.h"

#include "dialects/Xfmr/XfmrOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Verifier.h"
#include "llvm/ADT/SmallPtrSet.h"

namespace partition {
#define GEN_PASS_DEF_MIXEDPRECISIONPASS
#include "passes/Passes.h.inc"
} // namespace partition

using namespace mlir;
using namespace partition::xfmr;

namespace partition {
namespace {

/// f32 tensors of rank >= 1 become bf16; everything else keeps its type.
Type computeType(Type type) {
  auto tensor = dyn_cast<RankedTensorType>(type);
  if (!tensor || tensor.getRank() == 0 || !tensor.getElementType().isF32())
    return type;
  return tensor.clone(BFloat16Type::get(type.getContext()));
}

bool holdsBF16(Type type) {
  auto tensor = dyn_cast<RankedTensorType>(type);
  return tensor && tensor.getElementType().isBF16();
}

/// Whether `use` is the table of a token embedding, which reads only the
/// rows its tokens name.
bool readsTableOf(OpOperand &use) {
  auto lookup = dyn_cast<EmbeddingOp>(use.getOwner());
  return lookup && &use == &lookup.getTableMutable();
}

struct MixedPrecisionPass
    : impl::MixedPrecisionPassBase<MixedPrecisionPass> {
  void runOnOperation() override {
    FailureOr<func::FuncOp> forward =
        findForwardFunction(getOperation(), "--xfmr-mixed-precision",
                            "the forward pass, before --xfmr-train-step");
    if (failed(forward) || failed(convert(*forward)))
      return signalPassFailure();
  }

  LogicalResult convert(func::FuncOp forward) {
    WalkResult already = forward.walk([](Operation *op) {
      for (Type type : op->getResultTypes())
        if (holdsBF16(type))
          return WalkResult::interrupt();
      return WalkResult::advance();
    });
    if (already.wasInterrupted())
      return forward.emitError()
             << "already computes in bf16; run --xfmr-mixed-precision once";

    // Each use of a parameter reads its own cast, placed before the user.
    for (BlockArgument arg : forward.getArguments()) {
      if (!forward.getArgAttr(arg.getArgNumber(), XfmrDialect::kParamAttrName))
        continue;
      // A routing bias stays f32: it only shifts the selection, and the
      // step adds rate-sized steps to it that bf16 would round away.
      if (forward.getArgAttr(arg.getArgNumber(),
                             XfmrDialect::kRoutingBiasAttrName))
        continue;
      Type castType = computeType(arg.getType());
      if (castType == arg.getType())
        continue;
      for (OpOperand &use : llvm::make_early_inc_range(arg.getUses())) {
        Operation *user = use.getOwner();
        if (isa<func::ReturnOp>(user) || readsTableOf(use))
          continue;
        OpBuilder builder(user);
        use.set(CastOp::create(builder, user->getLoc(), castType, arg));
      }
    }

    // Lookups in an fp32 table keep fp32 rows and cast those.
    llvm::SmallPtrSet<Operation *, 2> fp32Lookups;
    forward.walk([&](EmbeddingOp lookup) {
      Type rows = computeType(lookup.getType());
      if (holdsBF16(lookup.getTable().getType()) || rows == lookup.getType())
        return;
      OpBuilder builder(lookup->getContext());
      builder.setInsertionPointAfter(lookup);
      auto cast = CastOp::create(builder, lookup.getLoc(), rows, lookup);
      lookup.getResult().replaceAllUsesExcept(cast, cast);
      fp32Lookups.insert(lookup);
    });

    // Results in program order: operands are converted before their users.
    bool changed = !fp32Lookups.empty();
    forward.walk([&](Operation *op) {
      if (isa<CastOp>(op) || fp32Lookups.contains(op) ||
          op->getDialect() !=
              op->getContext()->getLoadedDialect<XfmrDialect>())
        return;
      for (OpResult result : op->getResults()) {
        Type type = computeType(result.getType());
        if (type != result.getType()) {
          result.setType(type);
          changed = true;
        }
      }
    });
    if (!changed)
      return forward.emitError()
             << "has no f32 activations to compute in bf16";
    // A return of an activation (not the loss) would change the function's
    // type: the forward pass returns the scalar loss only.
    for (Type type : forward.getBody().front().getTerminator()->getOperandTypes())
      if (holdsBF16(type))
        return forward.emitError()
               << "returns a tensor that is now bf16; the forward function "
                  "returns the scalar loss only";
    return mlir::verify(forward);
  }
};

} // namespace
} // namespace partition
