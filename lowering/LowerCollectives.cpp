//===- LowerCollectives.cpp - --lower-to-rt: collectives and transfers ---===//
//
// The dist collectives of a step as rt collectives on its buffers: an
// all-reduce in place, the block collectives (all-gather, reduce-scatter,
// all-to-all) on whole buffers (a strided micro-batch view is copied
// first), an all-slice as a local block copy, sends and receives.
//
//===----------------------------------------------------------------------===//

#include "lowering/StepLowering.h"

namespace partition::rtlowering {

/// The label of a collective whose dist op has no dist.label.
constexpr StringLiteral kDefaultCollectiveLabel = "all_reduce";

LogicalResult StepLowering::lowerAllReduce(OpBuilder &builder,
                                           dist::AllReduceOp op) {
  Location loc = op.getLoc();
  SmallVector<Value> bucket;
  for (Value input : op.getInputs()) {
    auto type = cast<RankedTensorType>(input.getType());
    if (!type.getElementType().isF32() && !type.getElementType().isBF16())
      return op.emitOpError() << "reduces " << type
                              << ", but the runtime reduces f32 and bf16 "
                                 "buffers only";
    // The runtime reduces in place. The input's buffer may take the result
    // only when nothing reads the input afterwards and the buffer is a
    // temporary of its own: an argument holds state (or the step's input)
    // that other code, or the next step, reads, and a view aliases its
    // source.
    Value buffer = buffers.lookup(input);
    bool overwritable = input.hasOneUse() &&
                        buffer.getDefiningOp<memref::AllocOp>() &&
                        !llvm::is_contained(bucket, buffer);
    if (!overwritable) {
      Value copy = memref::AllocOp::create(builder, input.getLoc(),
                                           bufferType(type));
      createKernel(builder, loc, KernelId::Copy, ValueRange{buffer},
                   ValueRange{copy});
      buffer = copy;
    }
    bucket.push_back(buffer);
  }
  auto label = op->getAttrOfType<StringAttr>(dist::DistDialect::kLabelAttrName);
  rt::AllReduceOp::create(
      builder, loc, /*token=*/Type(), bucket, op.getMeshAttr(), op.getAxes(), op.getReduceAttr(),
      builder.getStringAttr(label && !label.getValue().empty()
                                ? label.getValue()
                                : StringRef(kDefaultCollectiveLabel)));
  // A returned result is copied into its target at the return, like any
  // other value whose buffer is not the target.
  for (auto [result, buffer] : llvm::zip(op.getResults(), bucket))
    buffers.map(result, buffer);
  return success();
}

/// The size of the group of `axes` of `mesh`, and fails (reporting on
/// `op`) unless `axes` are listed in the mesh's order when `ordered`: the
/// runtime ranks a group by mesh coordinates, in the mesh's axis order.
FailureOr<int64_t> groupOf(Operation *op, FlatSymbolRefAttr meshName,
                           ArrayAttr axes, bool ordered) {
  FailureOr<dist::MeshShape> mesh = dist::lookupMeshShape(
      op, meshName, nullptr, [&] { return op->emitOpError(); });
  if (failed(mesh))
    return failure();
  int64_t group = 1, previous = -1;
  for (Attribute axis : axes) {
    int64_t index = mesh->find(cast<StringAttr>(axis).getValue());
    if (index < 0)
      return op->emitOpError() << "axis " << axis << " is not an axis of "
                               << meshName;
    if (ordered && index < previous)
      return op->emitOpError()
             << "runs over axes " << axes << ", which are not in the order "
             << "of the axes of " << meshName
             << ": the runtime orders a group by mesh coordinates";
    previous = index;
    group *= mesh->sizes[index];
  }
  return group;
}

/// A buffer the runtime can move as whole blocks: `buffer` itself when it
/// has the identity layout, else a copy (a micro-batch view is strided).
Value wholeBuffer(OpBuilder &builder, Location loc, Value buffer) {
  auto type = cast<MemRefType>(buffer.getType());
  if (type.getLayout().isIdentity())
    return buffer;
  Value copy = memref::AllocOp::create(
      builder, loc, MemRefType::get(type.getShape(), type.getElementType()));
  createKernel(builder, loc, KernelId::Copy, ValueRange{buffer},
               ValueRange{copy});
  return copy;
}

LogicalResult StepLowering::lowerBlockCollective(OpBuilder &builder,
                                                 Operation *op,
                                                 unsigned position) {
  Location loc = op->getLoc();
  Value input = op->getOperand(0), result = op->getResult(0);
  auto type = cast<RankedTensorType>(input.getType());
  bool shift = isa<dist::RingShiftOp>(op);
  bool gather = isa<dist::AllGatherOp>(op);
  auto move = dyn_cast<dist::AllToAllOp>(op);
  StringRef kind = shift    ? "ring_shift"
                   : gather ? "all_gather"
                   : move   ? "all_to_all"
                            : "reduce_scatter";
  // A gather, a shift or an all_to_all moves elements (token ids,
  // positions, expert counts too); a reduction adds floats.
  Type element = type.getElementType();
  bool moves = gather || shift || move;
  bool supported = element.isF32() || element.isBF16() ||
                   (moves && element.isInteger(32));
  if (!supported)
    return op->emitOpError() << "moves " << type << ", but the runtime's "
                             << kind << " moves "
                             << (moves ? "f32, bf16 and i32" : "f32 and bf16")
                             << " buffers only";
  auto meshName = op->getAttrOfType<FlatSymbolRefAttr>("mesh");
  auto axes = op->getAttrOfType<ArrayAttr>("axes");
  if (failed(groupOf(op, meshName, axes, /*ordered=*/true)))
    return failure();
  auto label = op->getAttrOfType<StringAttr>(dist::DistDialect::kLabelAttrName);
  StringAttr labelAttr = builder.getStringAttr(
      label && !label.getValue().empty() ? label.getValue() : kind);
  // ZeRO's bucket, moved tensor by tensor: it was never packed.
  if (flatBuckets->movedPerTensor(op)) {
    flatBuckets->lowerPerTensor(builder, buffers, op, labelAttr, [&](Value r) {
      return destinationFor(builder, r, position, /*inPlace=*/false);
    });
    return success();
  }
  Value in = wholeBuffer(builder, loc, buffers.lookup(input));
  Value out = destinationFor(builder, result, position, /*inPlace=*/false);
  auto dim = op->getAttrOfType<IntegerAttr>("dim");
  if (shift)
    rt::RingShiftOp::create(builder, loc, /*token=*/Type(), in, out, meshName,
                            axes, labelAttr);
  else if (move) {
    SmallVector<Value, 2> counts;
    IntegerAttr rowsDim;
    if (auto it = countedExchanges.find(op); it != countedExchanges.end()) {
      counts = {wholeBuffer(builder, loc, buffers.lookup(it->second.first)),
                wholeBuffer(builder, loc, buffers.lookup(it->second.second))};
      rowsDim = builder.getI64IntegerAttr(
          cast<RankedTensorType>(it->second.first.getType()).getRank());
    }
    rt::AllToAllOp::create(builder, loc, /*token=*/Type(), in, out, counts,
                           meshName, axes, move.getSplitDimAttr(),
                           move.getConcatDimAttr(), labelAttr, rowsDim);
  }
  else if (gather)
    rt::AllGatherOp::create(builder, loc, /*token=*/Type(), in, out, meshName,
                            axes, dim, labelAttr, /*bucket=*/StringAttr());
  else
    rt::ReduceScatterOp::create(
        builder, loc, /*token=*/Type(), in, out, meshName, axes, dim,
        cast<dist::ReduceScatterOp>(op).getReduceAttr(), labelAttr,
        /*bucket=*/StringAttr());
  buffers.map(result, out);
  return success();
}

namespace {

/// The counts of filled rows of a mixture-of-experts buffer's cells (its
/// [B, E] dimensions before the capacity's rows), where the step holds
/// them: the routing's counts for the dispatched buffer and the combine's
/// gradient, the expert GEMMs' counts for their outputs, those of the
/// exchanges already paired (`exchanged`); null when unknown.
Value countsOfBuffer(Value value, const DenseMap<Value, Value> &exchanged) {
  if (auto it = exchanged.find(value); it != exchanged.end())
    return it->second;
  Operation *def = value.getDefiningOp();
  if (!def)
    return {};
  auto routeCounts = [](Value slots) -> Value {
    auto route = slots.getDefiningOp<xfmr::MoeRouteOp>();
    return route ? route.getCounts() : Value();
  };
  if (auto dispatch = dyn_cast<xfmr::MoeDispatchOp>(def))
    return routeCounts(dispatch.getSlots());
  if (auto combine = dyn_cast<xfmr::MoeCombineGradOp>(def))
    return value == combine.getExpertOutputGrad()
               ? routeCounts(combine.getSlots())
               : Value();
  if (auto linear = dyn_cast<xfmr::ExpertLinearOp>(def))
    return linear.getCounts();
  if (auto grad = dyn_cast<xfmr::ExpertLinearGradInputOp>(def))
    return grad.getCounts();
  // A sum of buffers with the same cells (the experts' input gradient from
  // w1 and w3), and a cast, keep them.
  if (auto add = dyn_cast<xfmr::AddOp>(def)) {
    Value lhs = countsOfBuffer(add.getLhs(), exchanged);
    return lhs == countsOfBuffer(add.getRhs(), exchanged) ? lhs : Value();
  }
  if (auto cast = dyn_cast<xfmr::CastOp>(def))
    return countsOfBuffer(cast->getOperand(0), exchanged);
  return {};
}

bool sameGroup(dist::AllToAllOp a, dist::AllToAllOp b) {
  return a.getMeshAttr() == b.getMeshAttr() && a.getAxes() == b.getAxes();
}

} // namespace

void StepLowering::pairCountedExchanges(Block &body) {
  DenseMap<Value, Value> exchanged;
  SmallVector<dist::AllToAllOp> moves(body.getOps<dist::AllToAllOp>());
  for (dist::AllToAllOp move : moves) {
    auto type = cast<RankedTensorType>(move.getInput().getType());
    if (!isa<FloatType>(type.getElementType()))
      continue;
    Value in = countsOfBuffer(move.getInput(), exchanged);
    if (!in)
      continue;
    int64_t rows = cast<RankedTensorType>(in.getType()).getRank();
    if (rows <= int64_t(move.getSplitDim()) ||
        rows <= int64_t(move.getConcatDim()) || rows + 1 >= type.getRank())
      continue;
    // The output's counts: the same exchange of the input's counts (the
    // dispatch side), or the counts the input's were exchanged from (the
    // way back).
    Value out;
    for (Operation *user : in.getUsers()) {
      auto counts = dyn_cast<dist::AllToAllOp>(user);
      if (counts && counts.getInput() == in && sameGroup(counts, move) &&
          counts.getSplitDim() == move.getSplitDim() &&
          counts.getConcatDim() == move.getConcatDim()) {
        // Its operand is defined before `move` (it is `move`'s input's
        // counts): it may run first, and must, to be read by it.
        if (move->isBeforeInBlock(counts))
          counts->moveBefore(move);
        out = counts.getResult();
        break;
      }
    }
    if (auto back = in.getDefiningOp<dist::AllToAllOp>();
        !out && back && sameGroup(back, move) &&
        back.getSplitDim() == move.getConcatDim() &&
        back.getConcatDim() == move.getSplitDim())
      out = back.getInput();
    if (!out)
      continue;
    countedExchanges[move] = {in, out};
    exchanged[move.getResult()] = out;
  }
}

LogicalResult StepLowering::lowerAllSlice(OpBuilder &builder,
                                          dist::AllSliceOp op,
                                          unsigned position) {
  auto type = cast<RankedTensorType>(op.getInput().getType());
  if (!type.getElementType().isF32() && !type.getElementType().isBF16() &&
      !type.getElementType().isInteger(32))
    return op.emitOpError() << "slices " << type
                            << ", but the runtime's slice_block slices f32, "
                               "bf16 and i32 buffers only";
  // The first listed axis is major in the index, as in the group order of
  // dist.all_gather, so any order of axes is fine here.
  FailureOr<int64_t> blocks =
      groupOf(op, op.getMeshAttr(), op.getAxes(), /*ordered=*/false);
  if (failed(blocks))
    return failure();
  Value index = lowered.getArgument(axisIndexArgs.lookup(joinAxes(op.getAxes())));
  if (flatBuckets->slicesPack(op)) {
    flatBuckets->lowerSlicedPack(builder, buffers, op, index, [&](Value r) {
      return destinationFor(builder, r, position, false);
    });
    return success();
  }
  Value out = destinationFor(builder, op.getResult(), position, false);
  createKernel(builder, op.getLoc(), KernelId::SliceBlock,
               ValueRange{buffers.lookup(op.getInput()), index},
               ValueRange{out},
               ArrayRef<int64_t>{static_cast<int64_t>(op.getDim()), *blocks});
  buffers.map(op.getResult(), out);
  return success();
}

LogicalResult StepLowering::lowerTransfer(OpBuilder &builder, Operation *op,
                                          unsigned position) {
  Location loc = op->getLoc();
  bool send = isa<dist::SendOp>(op);
  Value value = send ? op->getOperand(0) : op->getResult(0);
  auto type = cast<RankedTensorType>(value.getType());
  Type element = type.getElementType();
  if (!element.isF32() && !element.isBF16() && !element.isInteger(32))
    return op->emitOpError() << (send ? "sends " : "receives ") << type
                             << ", but the runtime moves f32, bf16 and i32 "
                                "buffers only";
  auto meshName = op->getAttrOfType<FlatSymbolRefAttr>("mesh");
  auto axes = op->getAttrOfType<ArrayAttr>("peer_axes");
  auto coords = op->getAttrOfType<DenseI64ArrayAttr>("peer_coords");
  if (axes.size() != 1)
    return op->emitOpError()
           << "names its peer by " << axes.size()
           << " coordinates, but the runtime moves data between pipeline "
              "stages only: give the peer's coordinate on the pipeline axis "
              "alone";
  // Without a label, the peer names the transfer (both sides alike: "pp").
  auto label = op->getAttrOfType<StringAttr>("label");
  std::string text =
      label && !label.getValue().empty()
          ? label.getValue().str()
          : (send ? "send to " : "recv from ") +
                cast<StringAttr>(axes[0]).getValue().str() + "=" +
                std::to_string(coords[0]);
  StringAttr labelAttr = builder.getStringAttr(text);
  if (send) {
    Value in = wholeBuffer(builder, loc, buffers.lookup(value));
    rt::SendOp::create(builder, loc, in, meshName, axes, coords, labelAttr);
    return success();
  }
  Value out = destinationFor(builder, value, position, /*inPlace=*/false);
  rt::RecvOp::create(builder, loc, out, meshName, axes, coords, labelAttr);
  buffers.map(value, out);
  return success();
}

} // namespace partition::rtlowering
