//===- FlatBuckets.h - ZeRO's flat buckets with few copies ------*- C++ -*-===//
//
// ZeRO (passes/zero/Zero.cpp) moves gradients and parameters through flat
// buckets [rows, columns] whose row r holds chunk r of every tensor
// (dist.flat_pack / dist.flat_unpack). Lowered literally, each pack and
// unpack is a copy of its tensors, and a ZeRO-1/2 step copied 4.5 times
// the bucket's elements per step where plain data parallelism copies 2:
// more than the halved AdamW saves. Most of those copies need no kernel:
//
//  - a bucket whose tensors each split into whole chunks (no padding) need
//    not exist at all: chunk r of a tensor of c * rows elements is its
//    elements [r * c, (r + 1) * c) seen flat, so each tensor gets a
//    collective of its own on its own buffer (a memref.collapse_shape):
//    the gradients' reduce-scatter, each into a fresh chunk, and the
//    updated chunks' all-gather, each straight into its parameter. No
//    pack, no row, no unpack. ZeRO-3's gathers of its parameter shards
//    (the step's arguments) likewise, each shard gathered straight into
//    its parameter, unless --rt-offload-optimizer is to stage the shards'
//    tier reads through their pack (--lower-to-rt
//    gather-shards-per-tensor=false): those keep their bucket;
//  - otherwise a single row (a reduce-scatter's result, this rank's
//    parameter chunks) is unpacked by views: chunk i is a contiguous slice
//    of the row;
//  - a single row packed from values computed for it alone (AdamW's
//    updated chunks, when the bucket is padded) is written in place: each
//    producer writes its slot;
//  - the parameters packed into a whole bucket only to slice this rank's
//    row (dist.all_slice) are sliced directly, tensor by tensor, each seen
//    flat (slice_block of chunk r into the row's slot): half the elements
//    copied once instead of all of them copied and half copied again.
//
// Without padding, a ZeRO-1/2 step then copies only the parameters' half
// (the slice); with it, the gradients' pack and the gathered bucket's
// unpack too. Bucket layouts and the checkpoints are unchanged, and so are
// the results at dp = 2; over more ranks a tensor's reduce-scatter may add
// in another order than its bucket's (the runtime picks the algorithm by
// size: below 64 KiB MPI's own, else a ring).
//
//===----------------------------------------------------------------------===//
#ifndef PARTITION_LOWERING_FLATBUCKETS_H
#define PARTITION_LOWERING_FLATBUCKETS_H

#include "dialects/Dist/DistOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"

#include <functional>

namespace partition {

class FlatBucketLowering {
public:
  /// The fresh destination of a result (the step lowering's).
  using Destination = std::function<mlir::Value(mlir::Value result)>;

  /// Plans the step's buckets before it is lowered; extends `lastUse` of
  /// the parameters sliced directly to the slice, which reads them there.
  /// `gatherShards`: ZeRO-3's all-gathers of parameter shards (the step's
  /// arguments) may move tensor by tensor too.
  FlatBucketLowering(mlir::Block &body,
                     const llvm::DenseMap<mlir::Operation *, unsigned> &positions,
                     llvm::DenseMap<mlir::Value, unsigned> &lastUse,
                     bool gatherShards);

  /// Where `result` is written when it is packed into a single row: a view
  /// of its slot in the row (the row allocated on the first call); a null
  /// value otherwise.
  mlir::Value slotFor(mlir::OpBuilder &builder, mlir::Value result);

  /// dist.flat_pack: one flat_pack kernel per tensor not already in its
  /// slot; nothing for a bucket that is only sliced.
  void lowerPack(mlir::OpBuilder &builder, mlir::IRMapping &buffers,
                 dist::FlatPackOp pack, const Destination &destination);
  /// dist.flat_unpack: views of a single row, else one flat_unpack kernel
  /// per tensor.
  void lowerUnpack(mlir::OpBuilder &builder, mlir::IRMapping &buffers,
                   dist::FlatUnpackOp unpack,
                   const Destination &destination);
  /// Whether `slice` slices a bucket packed for it alone (then
  /// lowerSlicedPack lowers it).
  bool slicesPack(dist::AllSliceOp slice) const;
  /// This rank's row of the packed bucket, `index` its index in the group:
  /// each tensor's chunk sliced into its slot.
  void lowerSlicedPack(mlir::OpBuilder &builder, mlir::IRMapping &buffers,
                       dist::AllSliceOp slice, mlir::Value index,
                       const Destination &destination);

  /// Whether `collective` (a dist.reduce_scatter or dist.all_gather)
  /// moves a bucket whose tensors each get a collective of their own
  /// (lowerPerTensor; lowerPack and lowerUnpack then lower nothing).
  bool movedPerTensor(mlir::Operation *collective) const;
  /// One rt collective per tensor of the bucket `collective` moves, from
  /// the packed tensor's buffer seen flat to the unpacked result's, each
  /// labelled `label` and the tensor's index.
  void lowerPerTensor(mlir::OpBuilder &builder, mlir::IRMapping &buffers,
                      mlir::Operation *collective, mlir::StringAttr label,
                      const Destination &destination);

private:
  struct Slot {
    dist::FlatPackOp pack;
    int64_t offset;
  };
  /// Values computed only to be packed into a single row, and where.
  llvm::DenseMap<mlir::Value, Slot> slots;
  /// The rows allocated for them, and the values given their slot.
  llvm::DenseMap<mlir::Operation *, mlir::Value> rows;
  llvm::DenseSet<mlir::Value> placed;
  /// Buckets packed only to slice this rank's row.
  llvm::SmallPtrSet<mlir::Operation *, 8> slicedPacks;
  /// The packs, collectives and unpacks of buckets moved tensor by tensor.
  llvm::SmallPtrSet<mlir::Operation *, 16> perTensor;
};

} // namespace partition

#endif // PARTITION_LOWERING_FLATBUCKETS_H
