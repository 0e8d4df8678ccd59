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

MemRefType bufferType(Type tensorType) {
  auto tensor = cast<RankedTensorType>(tensorType);
  return MemRefType::get(tensor.getShape(), tensor.getElementType());
}

} // namespace

FlatBucketLowering::FlatBucketLowering(
    Block &body, const DenseMap<Operation *, unsigned> &positions,
    DenseMap<Value, unsigned> &lastUse) {
  for (auto pack : body.getOps<dist::FlatPackOp>()) {
    int64_t rows = pack.getResult().getType().getDimSize(0);
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
  if (slicedPacks.contains(pack))
    return; // lowerSlicedPack reads the tensors themselves.
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
    Value flat = contiguous(builder, loc, buffers.lookup(input));
    auto type = cast<MemRefType>(flat.getType());
    if (type.getRank() != 1) {
      ReassociationIndices all;
      for (int64_t d = 0; d < type.getRank(); ++d)
        all.push_back(d);
      flat = memref::CollapseShapeOp::create(builder, loc, flat,
                                             ArrayRef<ReassociationIndices>{all});
    }
    createKernel(builder, loc, KernelId::SliceBlock, ValueRange{flat, index},
                 rowSlot(builder, loc, row, offset, chunk), {0, rowCount});
    offset += chunk;
  }
  buffers.map(slice.getResult(), row);
}

} // namespace partition
