//===- StreamWriter.h - one stream of a .ptp program -----------*- C++ -*-===//
//
// Internal to the program writer: one stream (a pipeline stage's buffers
// and functions) written into a FlatBuffer. StreamWriter.cpp places the
// buffers (arena views, views of views, tiers) and walks each function;
// StreamInstructions.cpp writes each collective, transfer and tier copy;
// ProgramWriter.cpp assembles the streams into the program.
//
//===----------------------------------------------------------------------===//

#ifndef PARTITION_LOWERING_STREAMWRITER_H
#define PARTITION_LOWERING_STREAMWRITER_H

#include "dialects/Dist/DistOps.h"
#include "dialects/Rt/RtOps.h"
#include "runtime/program/ProgramFormat.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"

#include <map>
#include <string>
#include <vector>

namespace partition {

/// Writes one stream (a pipeline stage's buffers and functions) into `fbb`.
class StreamWriter {
public:
  /// `mesh` is the module's device mesh, or null for one device.
  StreamWriter(flatbuffers::FlatBufferBuilder &fbb, int64_t arenaBytes,
               dist::MeshOp mesh)
      : fbb(fbb), arenaBytes(arenaBytes), mesh(mesh) {}
  /// Adds `function`'s buffers and instructions to the stream.
  mlir::LogicalResult addFunction(mlir::func::FuncOp function);
  flatbuffers::Offset<ptp::Stream> finish() {
    return ptp::CreateStreamDirect(
        fbb, static_cast<uint64_t>(arenaBytes), &buffers, &functions,
        static_cast<uint64_t>(tierBytes[size_t(ptp::Tier::Host)]),
        static_cast<uint64_t>(tierBytes[size_t(ptp::Tier::Nvme)]));
  }
  bool hasNvmeTier() const { return tierBytes[size_t(ptp::Tier::Nvme)] > 0; }

private:
  /// The planned function's arguments: the arena, then one per tier
  /// (rt.tier), each of the same size in every function of the stream.
  mlir::LogicalResult addArguments(mlir::func::FuncOp function);
  mlir::LogicalResult addArenaView(mlir::memref::ViewOp view);
  mlir::LogicalResult addViewOfBuffer(mlir::Operation *op);
  mlir::LogicalResult addBuffer(mlir::Value value, int64_t offset,
                                ptp::Role role, llvm::StringRef name,
                                mlir::Operation *op,
                                dist::ShardingAttr sharding = {},
                                mlir::Attribute flatShard = {},
                                ptp::Tier tier = ptp::Tier::Arena);
  /// Appends a buffer of `type` at `offset` (addBuffer's checks) and
  /// returns its index; addBuffer also maps a value to it.
  mlir::FailureOr<uint32_t>
  appendBuffer(mlir::MemRefType type, int64_t offset, ptp::Role role,
               llvm::StringRef name, mlir::Operation *op,
               dist::ShardingAttr sharding = {},
               mlir::Attribute flatShard = {},
               ptp::Tier tier = ptp::Tier::Arena);
  /// Records that `view` views `source` (and so the buffer `source` views).
  void noteView(mlir::Value view, mlir::Value source) {
    mlir::Value root = viewRoot.lookup(source);
    root = root ? root : source;
    viewRoot[view] = root;
    viewsOf[root].push_back(view);
  }
  /// An rt.action_walk_begin .. rt.action_walk_end's ptp::ActionWalk
  /// (StreamWalk.cpp): `regionBegins` are the instruction indices where
  /// each region starts, `end` where the last one ends.
  mlir::FailureOr<flatbuffers::Offset<ptp::ActionWalk>>
  addActionWalk(rt::ActionWalkBeginOp begin,
                llvm::ArrayRef<uint32_t> regionBegins,
                llvm::ArrayRef<std::string> regionNames, uint32_t end);
  /// Per dimension, the indices into the mesh of the axes `sharding` splits
  /// it over.
  mlir::FailureOr<std::vector<std::vector<uint8_t>>>
  shardingAxes(dist::ShardingAttr sharding, mlir::MemRefType type,
               mlir::Operation *op);
  /// The buffer indices of `operands`, which must all be planned buffers.
  mlir::FailureOr<std::vector<uint32_t>> bufferArgs(mlir::Operation *op,
                                                    mlir::ValueRange operands);

  // The instructions of the ops that are not kernels
  // (StreamInstructions.cpp).
  mlir::FailureOr<flatbuffers::Offset<ptp::Instruction>>
  addAllReduce(rt::AllReduceOp allReduce);
  /// An rt.send or rt.recv: args [buffer].
  mlir::FailureOr<flatbuffers::Offset<ptp::Instruction>>
  addTransfer(mlir::Operation *op);
  /// An rt.all_gather or rt.reduce_scatter: args [input, output].
  mlir::FailureOr<flatbuffers::Offset<ptp::Instruction>>
  addBlockCollective(mlir::Operation *op);
  /// The indices into Program.mesh of `axes`, increasing; fails unless `op`
  /// runs on the module's mesh.
  mlir::FailureOr<std::vector<uint8_t>>
  collectiveAxes(mlir::Operation *op, mlir::FlatSymbolRefAttr meshName,
                 mlir::ArrayAttr axes);
  /// The bytes [begin, end) of a planned buffer of the arena.
  std::pair<int64_t, int64_t> arenaRange(mlir::Value buffer) const;
  /// An rt.tier_read or rt.tier_write: args [source, destination].
  mlir::FailureOr<flatbuffers::Offset<ptp::Instruction>>
  addTierCopy(mlir::Operation *op);

  flatbuffers::FlatBufferBuilder &fbb;
  std::vector<flatbuffers::Offset<ptp::Buffer>> buffers;
  std::vector<flatbuffers::Offset<ptp::Function>> functions;
  llvm::DenseMap<mlir::Value, uint32_t> bufferIndex;
  /// State buffers are shared by all functions: one entry per role and name.
  std::map<std::pair<std::string, std::string>, uint32_t> stateIndex;
  /// Byte offset of each buffer, for views of views.
  llvm::DenseMap<mlir::Value, int64_t> bufferOffset;
  /// The buffer (memref.view of the arena) each view views, and the views
  /// of each: a walk's slot copies each view of a slot's buffer.
  llvm::DenseMap<mlir::Value, mlir::Value> viewRoot;
  llvm::DenseMap<mlir::Value, llvm::SmallVector<mlir::Value>> viewsOf;
  /// The dist.local_sharding of each state buffer (null: replicated), so
  /// that every function sees it sharded alike.
  llvm::DenseMap<uint32_t, mlir::Attribute> stateSharding;
  /// The dist.flat_shard of each state buffer (null: not a flat shard).
  llvm::DenseMap<uint32_t, mlir::Attribute> stateFlatShard;
  /// The tier of each buffer outside the arena (views of a tier's buffers
  /// too).
  llvm::DenseMap<mlir::Value, ptp::Tier> bufferTier;
  /// The arena argument and the tier arguments of the current function.
  mlir::Value arena;
  llvm::DenseMap<mlir::Value, ptp::Tier> tierArguments;
  int64_t arenaBytes;
  /// The bytes of each tier (indexed by ptp::Tier; -1 until a function
  /// gives them).
  int64_t tierBytes[3] = {0, -1, -1};
  dist::MeshOp mesh;
};

} // namespace partition

#endif // PARTITION_LOWERING_STREAMWRITER_H
