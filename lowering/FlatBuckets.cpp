//===- FlatBuckets.cpp - ZeRO's flat buckets with few copies -------------===//

#include "lowering/FlatBuckets.h"

#include "dialects/Rt/RtOps.h"
#include "runtime/program/KernelTable.h"

#include "mlir/Dialect/MemRef/IR/MemRef.h"

using namespace mlir;

namespace partition {
namespace {

using runtime::KernelId;

void createKernel(OpBuilder &builder, Location loc, KernelId kernel,
                  ValueRange inputs, ValueRange outputs,
                  ArrayRef<int64_t> ints) {
  std::string_view name = runtime::kernelName(kernel);
  rt::KernelOp::create(builder, loc, StringRef(name.data(), name.size()),
                       inputs, outputs, ints, ArrayRef<float>{});
}

int64_t elementsOf(Value value) {
  return cast<ShapedType>(value.getType()).getNumElements();
}

/// Columns [offset, offset + size) of a single-row bucket, as a 1-D view.
Value rowSlot(OpBuilder &builder, Location loc, Value row, int64_t offset,
              int64_t size) {
  SmallVector<OpFoldResult> offsets{builder.getIndexAttr(0),
                                    builder.getIndexAttr(offset)};
  SmallVector<OpFoldResult> sizes{builder.getIndexAttr(1),
                                  builder.getIndexAttr(size)};
  SmallVector<OpFoldResult> strides{builder.getIndexAttr(1),
                                    builder.getIndexAttr(1)};
  MemRefType type = memref::SubViewOp::inferRankReducedResultType(
      {size}, cast<MemRefType>(row.getType()), offsets, sizes, strides);
  return memref::SubViewOp::create(builder, loc, type, row, offsets, sizes,
                                   strides);
}

/// `buffer`, or a copy of it when it is a view of another layout: the
/// kernels that read whole tensors read them contiguous.
Value contiguous(OpBuilder &builder, Location loc, Value buffer) {
  auto type = cast<MemRefType>(buffer.getType());
  if (type.getLayout().isIdentity())
    return buffer;
  Value copy = memref::AllocOp::create(
      builder, loc, MemRefType::get(type.getShape(), type.getElementType()));
  createKernel(builder, loc, KernelId::Copy, buffer, copy, {});
  return copy;
}

/// An identity-layout `buffer` seen flat: one dimension of its elements.
Value flatView(OpBuilder &builder, Location loc, Value buffer) {
  auto type = cast<MemRefType>(buffer.getType());
  if (type.getRank() == 1)
    return buffer;
  ReassociationIndices all;
  for (int64_t d = 0; d < type.getRank(); ++d)
    all.push_back(d);
  return memref::CollapseShapeOp::create(builder, loc, buffer,
                                         ArrayRef<ReassociationIndices>{all});
}

MemRefType bufferType(Type tensorType) {
  auto tensor = cast<RankedTensorType>(tensorType);
  return MemRefType::get(tensor.getShape(), tensor.getElementType());
}

/// The dist.flat_unpack that alone reads `collective`'s result, if any.
dist::FlatUnpackOp soleUnpack(Operation *collective) {
  Value result = collective->getResult(0);
  if (!result.hasOneUse())
    return {};
  return dyn_cast<dist::FlatUnpackOp>(*result.getUsers().begin());
}

/// Whether `pack`, read by `collective` alone (a reduce-scatter or an
/// all-gather along the rows), can be left out: each tensor moved by a
/// collective of its own, on its own buffer seen flat. Row r of a bucket
/// holds chunk r of each tensor, and chunk r of a tensor of n = c * rows
/// elements is its elements [r * c, (r + 1) * c) seen flat; so, with no
/// padding, chunk i of the reduce-scattered row is the reduce-scatter of
/// tensor i seen flat, and the gathered bucket's tensor i is the
/// all-gather of chunk i. The reduce-scattered row must be unpacked into
/// its chunks (by views today, so nothing else reads the row); the
/// gathered row must hold values computed for it alone (AdamW's updated
/// chunks) or, with `shards`, the step's arguments (ZeRO-3's parameter
/// shards, which nothing writes before the gather), unpacked whole, one to
/// one.
bool movesPerTensor(dist::FlatPackOp pack, Operation *collective,
                    bool shards) {
  bool gather = isa<dist::AllGatherOp>(collective);
  if ((!gather && !isa<dist::ReduceScatterOp>(collective)) ||
      collective->getAttrOfType<IntegerAttr>("dim").getInt() != 0)
    return false;
  dist::FlatUnpackOp unpack = soleUnpack(collective);
  if (!unpack || unpack.getNumResults() != pack.getInputs().size())
    return false;
  int64_t packRows = pack.getResult().getType().getDimSize(0);
  int64_t unpackRows = unpack.getInput().getType().getDimSize(0);
  if ((gather ? packRows : unpackRows) != 1)
    return false;
  for (auto [input, result] :
       llvm::zip(pack.getInputs(), unpack.getResults())) {
    int64_t in = elementsOf(input), out = elementsOf(result);
    bool whole = gather ? out == in * unpackRows
                        : in % packRows == 0 && out == in / packRows;
    if (!whole)
      return false;
    bool ownValue = input.getDefiningOp() && input.hasOneUse();
    bool shard = shards && isa<BlockArgument>(input);
    if (gather ? !ownValue && !shard
               : cast<RankedTensorType>(result.getType()).getRank() != 1)
      return false;
  }
  return true;
}

} // namespace

FlatBucketLowering::FlatBucketLowering(
    Block &body, const DenseMap<Operation *, unsigned> &positions,
    DenseMap<Value, unsigned> &lastUse, bool gatherShards) {
  for (auto pack : body.getOps<dist::FlatPackOp>()) {
    int64_t rows = pack.getResult().getType().getDimSize(0);
    // Moved tensor by tensor: no bucket, no row, no slots.
    if (pack->hasOneUse())
      if (Operation *collective = *pack->getUsers().begin();
          movesPerTensor(pack, collective, gatherShards)) {
        perTensor.insert({pack, collective, soleUnpack(collective)});
        continue;
      }
    // The parameters, packed only to slice this rank's row: sliced tensor
    // by tensor, when each splits into whole chunks (no padding to write).
    if (pack->hasOneUse())
      if (auto slice = dyn_cast<dist::AllSliceOp>(*pack->getUsers().begin());
          slice && slice.getDim() == 0 &&
          llvm::all_of(pack.getInputs(), [&](Value input) {
            return elementsOf(input) % rows == 0;
          })) {
        slicedPacks.insert(pack);
        // The slice reads them: no update may take their buffers before.
        for (Value input : pack.getInputs())
          if (auto it = lastUse.find(input); it != lastUse.end())
            it->second = std::max(it->second, positions.lookup(slice));
        continue;
      }
    if (rows != 1)
      continue;
    int64_t offset = 0;
    for (Value input : pack.getInputs()) {
      if (input.getDefiningOp() && input.hasOneUse() &&
          cast<RankedTensorType>(input.getType()).getRank() == 1)
        slots[input] = {pack, offset};
      offset += elementsOf(input);
    }
  }
}

Value FlatBucketLowering::slotFor(OpBuilder &builder, Value result) {
  auto slot = slots.find(result);
  if (slot == slots.end())
    return {};
  Value &row = rows[slot->second.pack];
  if (!row)
    row = memref::AllocOp::create(
        builder, slot->second.pack.getLoc(),
        bufferType(slot->second.pack.getResult().getType()));
  placed.insert(result);
  return rowSlot(builder, result.getLoc(), row, slot->second.offset,
                 elementsOf(result));
}

void FlatBucketLowering::lowerPack(OpBuilder &builder, IRMapping &buffers,
                                   dist::FlatPackOp pack,
                                   const Destination &destination) {
  // lowerSlicedPack and lowerPerTensor read the tensors themselves.
  if (slicedPacks.contains(pack) || perTensor.contains(pack))
    return;
  Value bucket = rows.lookup(pack);
  if (!bucket)
    bucket = destination(pack.getResult());
  int64_t rowCount = pack.getResult().getType().getDimSize(0), offset = 0;
  for (Value input : pack.getInputs()) {
    // A tensor not written in its slot (or a bucket of several rows): one
    // flat_pack each, writing its columns of the bucket.
    if (!placed.contains(input))
      createKernel(builder, pack.getLoc(), KernelId::FlatPack,
                   contiguous(builder, pack.getLoc(), buffers.lookup(input)),
                   bucket, {offset});
    offset += dist::flatChunk(elementsOf(input), rowCount);
  }
  buffers.map(pack.getResult(), bucket);
}

void FlatBucketLowering::lowerUnpack(OpBuilder &builder, IRMapping &buffers,
                                     dist::FlatUnpackOp unpack,
                                     const Destination &destination) {
  if (perTensor.contains(unpack))
    return; // lowerPerTensor gave each result its buffer.
  Value bucket = buffers.lookup(unpack.getInput());
  int64_t rowCount = unpack.getInput().getType().getDimSize(0), offset = 0;
  bool views = rowCount == 1 && llvm::all_of(unpack.getResults(), [](Value r) {
                 return cast<RankedTensorType>(r.getType()).getRank() == 1;
               });
  if (!views)
    bucket = contiguous(builder, unpack.getLoc(), bucket);
  for (Value result : unpack.getResults()) {
    if (views) {
      buffers.map(result, rowSlot(builder, unpack.getLoc(), bucket, offset,
                                  elementsOf(result)));
    } else {
      Value out = destination(result);
      createKernel(builder, unpack.getLoc(), KernelId::FlatUnpack, bucket,
                   out, {offset});
      buffers.map(result, out);
    }
    offset += dist::flatChunk(elementsOf(result), rowCount);
  }
}

bool FlatBucketLowering::slicesPack(dist::AllSliceOp slice) const {
  Operation *pack = slice.getInput().getDefiningOp();
  return pack && slicedPacks.contains(pack);
}

void FlatBucketLowering::lowerSlicedPack(OpBuilder &builder,
                                         IRMapping &buffers,
                                         dist::AllSliceOp slice, Value index,
                                         const Destination &destination) {
  auto pack = cast<dist::FlatPackOp>(slice.getInput().getDefiningOp());
  Location loc = slice.getLoc();
  int64_t rowCount = pack.getResult().getType().getDimSize(0), offset = 0;
  Value row = destination(slice.getResult());
  for (Value input : pack.getInputs()) {
    int64_t chunk = elementsOf(input) / rowCount;
    // Seen flat, the tensor is `rowCount` chunks: this rank's is block
    // `index` along its only dimension.
    Value flat =
        flatView(builder, loc, contiguous(builder, loc, buffers.lookup(input)));
    createKernel(builder, loc, KernelId::SliceBlock, ValueRange{flat, index},
                 rowSlot(builder, loc, row, offset, chunk), {0, rowCount});
    offset += chunk;
  }
  buffers.map(slice.getResult(), row);
}

bool FlatBucketLowering::movedPerTensor(Operation *collective) const {
  return perTensor.contains(collective);
}

void FlatBucketLowering::lowerPerTensor(OpBuilder &builder, IRMapping &buffers,
                                        Operation *collective, StringAttr label,
                                        const Destination &destination) {
  auto pack = cast<dist::FlatPackOp>(collective->getOperand(0).getDefiningOp());
  dist::FlatUnpackOp unpack = soleUnpack(collective);
  Location loc = collective->getLoc();
  auto mesh = collective->getAttrOfType<FlatSymbolRefAttr>("mesh");
  auto axes = collective->getAttrOfType<ArrayAttr>("axes");
  IntegerAttr dim = builder.getI64IntegerAttr(0);
  auto scatter = dyn_cast<dist::ReduceScatterOp>(collective);
  for (auto [index, input, result] :
       llvm::enumerate(pack.getInputs(), unpack.getResults())) {
    // The label names the tensor too, for the runtime's errors.
    StringAttr tensorLabel = builder.getStringAttr(label.getValue() + " #" +
                                                   Twine(index));
    Value in =
        flatView(builder, loc, contiguous(builder, loc, buffers.lookup(input)));
    // A fresh buffer or the state buffer the result updates: the identity
    // layout either way.
    Value out = destination(result);
    // `bucket`: --rt-overlap-collectives counts the bucket's collectives
    // as one.
    if (scatter)
      rt::ReduceScatterOp::create(builder, loc, /*token=*/Type(), in,
                                  flatView(builder, loc, out), mesh, axes, dim,
                                  scatter.getReduceAttr(), tensorLabel, label);
    else
      rt::AllGatherOp::create(builder, loc, /*token=*/Type(), in,
                              flatView(builder, loc, out), mesh, axes, dim,
                              tensorLabel, label);
    buffers.map(result, out);
  }
}

} // namespace partition
