//===- KernelTable.h - ids, names and arities of runtime kernels -*- C++ -*-===//

#ifndef PARTITION_RUNTIME_KERNELTABLE_H
#define PARTITION_RUNTIME_KERNELTABLE_H

#include <cstdint>
#include <optional>
#include <string_view>

namespace partition::runtime {

enum class KernelId : uint16_t {
#define KERNEL(Id, Name, Inputs, Outputs, Ints, Floats, InPlace) Id,
#include "runtime/Kernels.def"
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
#include "runtime/Kernels.def"
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

} // namespace partition::runtime

#endif // PARTITION_RUNTIME_KERNELTABLE_H
