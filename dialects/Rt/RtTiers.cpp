//===- RtTiers.cpp - tier transfers and the tier of a buffer --------------===//

#include "dialects/Rt/RtTiers.h"

#include "dialects/Rt/RtOps.h"
#include "dialects/Rt/RtViews.h"

#include "mlir/Interfaces/FunctionInterfaces.h"

using namespace mlir;

namespace partition::rt {

std::optional<StringRef> tierOf(Value value) {
  Value base = viewedBuffer(value);
  StringAttr tier;
  if (auto argument = dyn_cast<BlockArgument>(base)) {
    if (auto function = dyn_cast_or_null<FunctionOpInterface>(
            argument.getOwner()->getParentOp()))
      if (argument.getOwner()->isEntryBlock())
        tier = function.getArgAttrOfType<StringAttr>(argument.getArgNumber(),
                                                     RtDialect::kTierAttrName);
  } else if (Operation *op = base.getDefiningOp()) {
    tier = op->getAttrOfType<StringAttr>(RtDialect::kTierAttrName);
  }
  if (!tier)
    return std::nullopt;
  return tier.getValue();
}

LogicalResult verifyInArena(Operation *op) {
  for (auto [index, operand] : llvm::enumerate(op->getOperands()))
    if (isa<MemRefType>(operand.getType()))
      if (std::optional<StringRef> tier = tierOf(operand))
        return op->emitOpError()
               << "operand #" << index << " lives in the " << *tier << " tier ("
               << RtDialect::kTierAttrName
               << "); kernels and collectives run on the arena: stage it "
                  "through rt.tier_read and rt.tier_write";
  return success();
}

namespace {

/// The checks both transfers share: `tiered` in a tier, `staged` in the
/// arena, one element type and count, static contiguous layouts, a label.
LogicalResult verifyTransfer(Operation *op, Value tiered, Value staged,
                             StringRef label, Value token) {
  if (failed(verifyAsyncToken(op, token)))
    return failure();
  bool read = isa<TierReadOp>(op);
  StringRef tieredName = read ? "source" : "destination";
  StringRef stagedName = read ? "destination" : "source";
  if (!tierOf(tiered))
    return op->emitOpError()
           << "the " << tieredName << " must live in a tier (a buffer marked "
           << RtDialect::kTierAttrName << ", or a view of one)";
  if (std::optional<StringRef> tier = tierOf(staged))
    return op->emitOpError()
           << "the " << stagedName << " lives in the " << *tier
           << " tier; it must be a staging buffer of the arena";
  auto tieredType = cast<MemRefType>(tiered.getType());
  auto stagedType = cast<MemRefType>(staged.getType());
  for (auto [what, type] : {std::pair<StringRef, MemRefType>{
                                "source", read ? tieredType : stagedType},
                            {"destination", read ? stagedType : tieredType}}) {
    Type element = type.getElementType();
    if (!(element.isF32() || element.isBF16() || element.isInteger(32)) ||
        !isContiguousRowMajor(type))
      return op->emitOpError()
             << what << " " << type
             << " must be f32, bf16 or i32 with a static shape and a "
                "contiguous row-major layout (the runtime moves whole byte "
                "ranges)";
  }
  if (tieredType.getElementType() != stagedType.getElementType() ||
      tieredType.getNumElements() != stagedType.getNumElements())
    return op->emitOpError()
           << "moves " << (read ? tieredType : stagedType) << " into "
           << (read ? stagedType : tieredType)
           << ": both must have one element type and as many elements";
  if (label.empty())
    return op->emitOpError("must have a non-empty label");
  return success();
}

} // namespace

LogicalResult TierReadOp::verify() {
  return verifyTransfer(*this, getSource(), getDestination(), getLabel(),
                        getToken());
}

LogicalResult TierWriteOp::verify() {
  return verifyTransfer(*this, getDestination(), getSource(), getLabel(),
                        getToken());
}

} // namespace partition::rt
