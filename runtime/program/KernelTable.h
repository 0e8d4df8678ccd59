//===- KernelTable.h - the runtime's kernels and their facts ----*- C++ -*-===//
//
// The rows of Kernels.def as constexpr data: a kernel's id, name, arity and
// the classes the layers above it switch on (storage type, shape check,
// profile cost, memory role), so no layer lists kernels by hand.
//
//===----------------------------------------------------------------------===//

#ifndef PARTITION_RUNTIME_KERNELTABLE_H
#define PARTITION_RUNTIME_KERNELTABLE_H

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <optional>
#include <string_view>

namespace partition::runtime {

enum class KernelId : uint16_t {
#define KERNEL(Id, Name, Inputs, Outputs, Ints, Floats, InPlace, Storage,      \
               Shape, Cost, Role)                                              \
  Id,
#include "runtime/program/Kernels.def"
  NumKernels
};

/// The float type a kernel computes in.
enum class KernelStorage : uint8_t {
  FirstFloat, ///< that of its first float buffer
  F32,        ///< f32 throughout, whatever the model's precision
  Input1,     ///< that of input 1 (input 0 is an f32 loss gradient)
};

/// The check of a kernel's buffers, which also derives the dimensions its
/// bodies use (KernelArgs). Kernels of one family share a check.
enum class KernelShape : uint8_t {
  Embedding,
  PositionEmbedding,
  Norm,
  NormGrad,
  Linear,
  LinearGradInput,
  LinearGradWeight,
  Elementwise,
  Attention,
  CrossEntropy,
  AdamW,
  Fill,
  Cast,
  AddI32,
  FlatBucket,
  SliceBlock,
  VocabParallelEmbedding,
  VocabParallelStatistic,
  VocabParallelLoss,
  SequencePositions,
  AttentionPositions,
  PositionEmbeddingAt,
  AttentionBlock, ///< the ring attention kernels
  MoeRoute,       ///< routing and the auxiliary loss's gradient inputs
  MoeDispatch,    ///< dispatch and combine, and their gradients
  ExpertLinear,   ///< the experts' grouped GEMMs
  MoeAuxLoss,
  MoeBias, ///< the expert load and the routing-bias update
  AdamWBlock,
};

/// How the profiler counts a kernel's FLOPs and labels its shape.
enum class KernelCost : uint8_t {
  Gemm,          ///< 2 M K N
  GroupedGemm,   ///< 2 M K N over every row of the expert buffers (the
                 ///< capacity: an upper bound of the routed rows)
  Attention,     ///< 4 B H T^2 D, halved when causal, less with a window
  AttentionGrad, ///< twice the forward
  CrossEntropy,  ///< no FLOPs counted; labelled by rows and vocabulary
  Other,         ///< no FLOPs counted; labelled by its dimensions
};

/// What a kernel's outputs are to the memory report.
enum class KernelRole : uint8_t {
  Forward,                  ///< activations
  ForwardIfActivationInput, ///< activations when it reads one (a residual)
  ParameterGradients,       ///< every output is a parameter gradient
  ParameterGradientsAfterFirst, ///< all but the input gradient (norms)
  Cast,  ///< to f32 a parameter's gradient, else as ForwardIfActivationInput
  Other, ///< activation gradients, optimizer state, copies of buckets
};

struct KernelInfo {
  KernelId id;
  std::string_view name;
  int inputs, outputs, ints, floats;
  /// An output may be exactly one of the inputs.
  bool inPlace;
  KernelStorage storage;
  KernelShape shape;
  KernelCost cost;
  KernelRole role;
};

inline constexpr KernelInfo kKernels[] = {
#define KERNEL(Id, Name, Inputs, Outputs, Ints, Floats, InPlace, Storage,      \
               Shape, Cost, Role)                                              \
  {KernelId::Id,         Name,                 Inputs,                         \
   Outputs,              Ints,                 Floats,                         \
   InPlace != 0,         KernelStorage::Storage, KernelShape::Shape,           \
   KernelCost::Cost,     KernelRole::Role},
#include "runtime/program/Kernels.def"
};

// Rows are in id order (a row's position is its id in .ptp files).
static_assert([] {
  for (size_t i = 0; i < std::size(kKernels); ++i)
    if (static_cast<size_t>(kKernels[i].id) != i)
      return false;
  return true;
}());

inline constexpr int kNumKernels = static_cast<int>(KernelId::NumKernels);

inline const KernelInfo *lookupKernel(std::string_view name) {
  for (const KernelInfo &info : kKernels)
    if (info.name == name)
      return &info;
  return nullptr;
}

inline const KernelInfo *lookupKernel(uint32_t id) {
  return id < static_cast<uint32_t>(kNumKernels) ? &kKernels[id] : nullptr;
}

/// The row of a kernel the code names by id (never NumKernels).
inline constexpr const KernelInfo &kernelInfo(KernelId id) {
  return kKernels[static_cast<size_t>(id)];
}

/// The name in .ptp files and `rt.kernel` ops: code that emits a kernel
/// names it by id and takes its name from here, so a typo cannot compile.
inline constexpr std::string_view kernelName(KernelId id) {
  return kernelInfo(id).name;
}

} // namespace partition::runtime

#endif // PARTITION_RUNTIME_KERNELTABLE_H
