//===- ExplicitPositions.cpp - positions as operands, for a permuted sequence -===//
//
// Context parallelism feeds each sequence permuted (zigzag chunks), so the
// ops that read positions from indices (the causal mask, RoPE, the learned
// position table) must read them from data instead. One
// xfmr.sequence_positions per function and sequence length, at the entry,
// so that the partitioner sees one value to split along the sequence.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "dialects/Xfmr/XfmrDialect.h"
#include "dialects/Xfmr/XfmrOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include "llvm/ADT/DenseMap.h"

namespace partition {
#define GEN_PASS_DEF_EXPLICITPOSITIONSPASS
#include "passes/Passes.h.inc"
} // namespace partition

using namespace mlir;
using namespace partition::xfmr;

namespace partition {
namespace {

int64_t sequenceLength(Value activation) {
  return cast<RankedTensorType>(activation.getType()).getDimSize(1);
}

struct ExplicitPositionsPass
    : impl::ExplicitPositionsPassBase<ExplicitPositionsPass> {
  using Base::Base;

  void runOnOperation() override {
    if (chunks < 1 || (chunks > 1 && chunks % 2 != 0)) {
      getOperation().emitError()
          << "--xfmr-explicit-positions: chunks must be 1 or even (two per "
             "context-parallel rank), got "
          << int64_t(chunks);
      return signalPassFailure();
    }
    for (auto function : getOperation().getOps<func::FuncOp>())
      if (failed(rewrite(function)))
        return signalPassFailure();
  }

  LogicalResult rewrite(func::FuncOp function) {
    if (function.isExternal())
      return success();
    SmallVector<Operation *> ops;
    function.walk([&](Operation *op) {
      if (auto attention = dyn_cast<AttentionOp>(op)) {
        if (!attention.getQueryPositions())
          ops.push_back(op);
      } else if (auto grad = dyn_cast<AttentionGradOp>(op)) {
        if (!grad.getQueryPositions())
          ops.push_back(op);
      } else if (auto embedding = dyn_cast<PositionEmbeddingOp>(op)) {
        if (!embedding.getPositions())
          ops.push_back(op);
      } else if (auto grad = dyn_cast<PositionEmbeddingGradOp>(op)) {
        if (!grad.getPositions())
          ops.push_back(op);
      }
    });
    if (ops.empty())
      return success();
    OpBuilder builder = OpBuilder::atBlockBegin(&function.getBody().front());
    llvm::DenseMap<int64_t, Value> positionsOf;
    // The positions of a sequence of length T, created once per function.
    auto positions = [&](Operation *op, int64_t length) -> FailureOr<Value> {
      if (length % int64_t(chunks) != 0)
        return op->emitOpError()
               << "has a sequence of " << length
               << ", which --xfmr-explicit-positions chunks=" << int64_t(chunks)
               << " does not divide";
      Value &value = positionsOf[length];
      if (!value)
        value = SequencePositionsOp::create(
            builder, function.getLoc(),
            RankedTensorType::get({length}, builder.getI32Type()),
            builder.getI64IntegerAttr(length),
            builder.getI64IntegerAttr(chunks));
      return value;
    };
    for (Operation *op : ops) {
      FailureOr<Value> pos = failure();
      if (auto attention = dyn_cast<AttentionOp>(op)) {
        if (failed(pos = positions(op, sequenceLength(attention.getQuery()))))
          return failure();
        attention.getQueryPositionsMutable().assign(*pos);
        attention.getKeyPositionsMutable().assign(*pos);
      } else if (auto grad = dyn_cast<AttentionGradOp>(op)) {
        if (failed(pos = positions(op, sequenceLength(grad.getQuery()))))
          return failure();
        grad.getQueryPositionsMutable().assign(*pos);
        grad.getKeyPositionsMutable().assign(*pos);
      } else if (auto embedding = dyn_cast<PositionEmbeddingOp>(op)) {
        if (failed(pos = positions(op, sequenceLength(embedding.getInput()))))
          return failure();
        embedding.getPositionsMutable().assign(*pos);
      } else if (auto grad = dyn_cast<PositionEmbeddingGradOp>(op)) {
        if (failed(pos = positions(op, sequenceLength(grad.getGrad()))))
          return failure();
        grad.getPositionsMutable().assign(*pos);
      }
    }
    // The caller feeds the sequence of its tokens and targets in that order.
    auto chunksAttr = builder.getI64IntegerAttr(chunks);
    for (unsigned i = 0; i < function.getNumArguments(); ++i) {
      auto role =
          function.getArgAttrOfType<StringAttr>(i, XfmrDialect::kInputAttrName);
      if (role && (role.getValue() == "tokens" || role.getValue() == "targets"))
        function.setArgAttr(i, XfmrDialect::kSequenceChunksAttrName,
                            chunksAttr);
    }
    return success();
  }
};

} // namespace
} // namespace partition
