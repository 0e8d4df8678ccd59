//===- StepLowering.h - --lower-to-rt's per-function state ------*- C++ -*-===//
//
// What the files of --lower-to-rt share (an internal header): the lowering
// of one training-step function (LowerToRt.cpp: signature, kernels, state
// updated in place; LowerCollectives.cpp: collectives and transfers) and
// the small helpers both use.
//
//===----------------------------------------------------------------------===//

#ifndef PARTITION_LOWERING_STEPLOWERING_H
#define PARTITION_LOWERING_STEPLOWERING_H

#include "lowering/FlatBuckets.h"

#include "dialects/Dist/DistOps.h"
#include "dialects/Rt/RtOps.h"
#include "dialects/Xfmr/XfmrOps.h"
#include "runtime/program/KernelTable.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/ADT/StringMap.h"

#include <optional>
#include <string>

namespace partition::rtlowering {

using namespace mlir;
using runtime::KernelId;
using xfmr::AddOp;
using xfmr::EmbeddingGradOp;

/// Emits an rt.kernel. The lowering names kernels only by id and takes the
/// name from the table (runtime/program/Kernels.def), so a typo cannot compile.
inline rt::KernelOp createKernel(mlir::OpBuilder &builder, mlir::Location loc,
                                 runtime::KernelId kernel,
                                 mlir::ValueRange inputs,
                                 mlir::ValueRange outputs,
                                 llvm::ArrayRef<int64_t> ints = {},
                                 llvm::ArrayRef<float> floats = {}) {
  std::string_view name = runtime::kernelName(kernel);
  return rt::KernelOp::create(builder, loc,
                              llvm::StringRef(name.data(), name.size()),
                              inputs, outputs, ints, floats);
}

inline bool isStaticTensor(mlir::Type type) {
  auto tensor = mlir::dyn_cast<mlir::RankedTensorType>(type);
  return tensor && tensor.hasStaticShape();
}

inline mlir::MemRefType bufferType(mlir::Type tensorType) {
  auto tensor = mlir::cast<mlir::RankedTensorType>(tensorType);
  return mlir::MemRefType::get(tensor.getShape(), tensor.getElementType());
}

/// Lowers one training-step function in place of itself.
class StepLowering {
public:
  /// `gatherShardsPerTensor`: --lower-to-rt's gather-shards-per-tensor.
  StepLowering(func::FuncOp step, bool gatherShardsPerTensor)
      : step(step), gatherShardsPerTensor(gatherShardsPerTensor) {}

  /// Makes the lowered function beside the step (its signature). It
  /// inserts into the module: one step at a time.
  LogicalResult prepare();
  /// Lowers the step's ops into it. It touches only the two functions:
  /// several steps may be lowered at once.
  LogicalResult lowerBody();
  /// With `replace`, replaces the step by its lowering; else drops the
  /// lowering (it failed, or another step's did). One step at a time.
  void finish(bool replace);

private:
  LogicalResult buildSignature();
  LogicalResult lowerOp(OpBuilder &builder, Operation *op, unsigned position);
  LogicalResult lowerAllReduce(OpBuilder &builder, dist::AllReduceOp op);
  LogicalResult lowerBlockCollective(OpBuilder &builder, Operation *op,
                                     unsigned position);
  LogicalResult lowerAllSlice(OpBuilder &builder, dist::AllSliceOp op,
                              unsigned position);
  /// Mixture-of-experts buffers exchanged by all_to_all: finds the counts
  /// of filled rows of each one's input and output cells among the step's
  /// values (moving the counts' own all_to_all before it when it comes
  /// later), so that the lowered rt.all_to_all moves only those rows.
  void pairCountedExchanges(Block &body);
  /// dist.send / dist.recv: rt.send of the value's buffer, rt.recv into a
  /// fresh one.
  LogicalResult lowerTransfer(OpBuilder &builder, Operation *op,
                              unsigned position);
  /// Adds one `axis_index` argument per distinct axes list of the
  /// dist.axis_index and dist.all_slice ops of the step.
  void addAxisIndexArguments(SmallVectorImpl<Type> &argTypes,
                             SmallVectorImpl<DictionaryAttr> &argAttrs);
  /// The buffer `result` is written to: the state buffer it updates when
  /// that buffer's old value is dead, else a fresh allocation.
  Value destinationFor(OpBuilder &builder, Value result, unsigned position,
                       bool inPlace);

  func::FuncOp step;
  func::FuncOp lowered;
  /// The position of each op of the step's body.
  DenseMap<Operation *, unsigned> positions;
  IRMapping buffers;
  /// Return operand index -> argument of `lowered` that receives it.
  SmallVector<Value> resultTargets;
  /// Tensor value returned by the old function -> its target buffer.
  DenseMap<Value, Value> tiedTargets;
  /// Last position at which each old argument is read.
  DenseMap<Value, unsigned> lastUse;
  /// Old argument tied to each target buffer (for the liveness check).
  DenseMap<Value, Value> targetToOldArg;
  /// Tied embeddings: an xfmr.add of an embedding gradient (used only
  /// there) and another gradient becomes one embedding_grad_add that
  /// scatters onto the other gradient, saving the zeroed table and the sum
  /// of two [V, C] tensors. Maps each such add to its embedding_grad.
  DenseMap<Operation *, EmbeddingGradOp> fusedAdds;
  llvm::SmallPtrSet<Operation *, 2> fusedEmbeddingGrads;
  /// Axes joined by "," -> index of the step's argument holding this rank's
  /// index in that group, then (once the body exists) the argument itself.
  llvm::StringMap<unsigned> axisIndexArgs;
  /// dist.all_to_all -> (its input's counts, its output's counts).
  DenseMap<Operation *, std::pair<Value, Value>> countedExchanges;
  /// ZeRO's flat buckets, planned before the ops are lowered.
  std::optional<FlatBucketLowering> flatBuckets;
  bool gatherShardsPerTensor;

  void findTiedEmbeddingSums(Block &body);
  LogicalResult lowerTiedEmbeddingSum(OpBuilder &builder, AddOp add,
                                      EmbeddingGradOp scatter,
                                      unsigned position);
};

/// `tp`, `dp,tp`: how an axis-index buffer is named (rt.name), in the
/// listed order, since the first listed axis is the major one.
std::string joinAxes(ArrayAttr axes);

} // namespace partition::rtlowering

#endif // PARTITION_LOWERING_STEPLOWERING_H
