//===- DistOps.h - ops of the distribution dialect --------------*- C++ -*-===//

#ifndef PARTITION_DIALECTS_DIST_DISTOPS_H
#define PARTITION_DIALECTS_DIST_DISTOPS_H

#include "dialects/Dist/DistDialect.h"

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#define GET_OP_CLASSES
#include "dialects/Dist/DistOps.h.inc"

namespace partition::dist {

/// The axes of a mesh, in order, with their sizes.
struct MeshShape {
  llvm::SmallVector<llvm::StringRef> names;
  llvm::SmallVector<int64_t> sizes;

  /// The index of axis `name`, or -1.
  int64_t find(llvm::StringRef name) const;
  /// The number of devices.
  int64_t numDevices() const;
};

/// The shape of the mesh `mesh` names, looked up from `from` (through
/// `tables` when given). Emits an error with `emitError` (when given) if
/// the symbol is not a dist.mesh.
mlir::FailureOr<MeshShape>
lookupMeshShape(mlir::Operation *from, mlir::FlatSymbolRefAttr mesh,
                mlir::SymbolTableCollection *tables = nullptr,
                llvm::function_ref<mlir::InFlightDiagnostic()> emitError = {});

/// Checks `sharding` against a value of type `type` used by `user`: the mesh
/// resolves, there is one axis list per dimension, every axis is a mesh axis
/// and every sharded dimension is divisible by the product of its axes'
/// sizes. Axes used twice are rejected by the attribute itself.
mlir::LogicalResult
verifyShardingFor(ShardingAttr sharding, mlir::RankedTensorType type,
                  mlir::Operation *user,
                  llvm::function_ref<mlir::InFlightDiagnostic()> emitError,
                  mlir::SymbolTableCollection *tables = nullptr);

/// The per-device shape of a tensor of shape `globalShape` with `sharding`
/// on a mesh of shape `mesh`: every sharded dimension divided by the product
/// of its axes' sizes. Fails if an axis is unknown, the ranks differ or a
/// dimension is not divisible.
mlir::FailureOr<llvm::SmallVector<int64_t>>
getLocalShape(ShardingAttr sharding, llvm::ArrayRef<int64_t> globalShape,
              const MeshShape &mesh);

/// The same, looking the mesh up from `user`.
mlir::FailureOr<llvm::SmallVector<int64_t>>
getLocalShape(ShardingAttr sharding, llvm::ArrayRef<int64_t> globalShape,
              mlir::Operation *user);

/// The columns one tensor of `elements` takes in a flat bucket of `rows`
/// rows (dist.flat_pack): ceil(elements / rows).
int64_t flatChunk(int64_t elements, int64_t rows);

/// A dist.flat_shard attribute, read: one rank's flat shard of a tensor.
struct FlatShard {
  /// The sharding of the flattened, padded tensor (one dimension).
  ShardingAttr flat;
  /// The tensor's shape before flattening.
  llvm::SmallVector<int64_t> shape;
  /// The sharding of the logical tensor `shape` is a device block of, or
  /// null when `shape` is the logical tensor's.
  ShardingAttr blockOf;
};

/// Reads a dist.flat_shard dictionary; fails (with `emitError`, when given)
/// if it is not one.
mlir::FailureOr<FlatShard>
readFlatShard(mlir::Attribute attr,
              llvm::function_ref<mlir::InFlightDiagnostic()> emitError = {});

/// Builds the dist.flat_shard dictionary.
mlir::DictionaryAttr buildFlatShard(ShardingAttr flat,
                                    llvm::ArrayRef<int64_t> shape,
                                    ShardingAttr blockOf);

} // namespace partition::dist

#endif // PARTITION_DIALECTS_DIST_DISTOPS_H
