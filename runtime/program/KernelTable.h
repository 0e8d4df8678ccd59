//===- KernelTable.h - ids, names and arities of runtime kernels -*- C++ -*-===//

#ifndef PARTITION_RUNTIME_KERNELTABLE_H
#define PARTITION_RUNTIME_KERNELTABLE_H

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace partition::runtime {

enum class KernelId : uint16_t {
#define KERNEL(Id, Name, Inputs, Outputs, Ints, Floats, InPlace) Id,
#include "runtime/program/Kernels.def"
  NumKernels
};

struct KernelInfo {
  KernelId id;
  std::string_view name;
  int inputs, outputs, ints, floats;
  /// An output may be exactly one of the inputs.
  bool inPlace;
};

inline constexpr KernelInfo kKernels[] = {
#define KERNEL(Id, Name, Inputs, Outputs, Ints, Floats, InPlace)               \
  {KernelId::Id, Name, Inputs, Outputs, Ints, Floats, InPlace != 0},
#include "runtime/program/Kernels.def"
};

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
