//===- KernelArgsTesting.h - checkInstruction on one instruction -*- C++ -*-===//
//
// The loader's check of one kernel instruction over buffers given by shape,
// for the tests of a kernel row's checks (runtime/program/KernelArgs.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef PARTITION_UNITTESTS_RUNTIME_KERNELARGSTESTING_H
#define PARTITION_UNITTESTS_RUNTIME_KERNELARGSTESTING_H

#include "runtime/program/KernelArgs.h"

#include <string>
#include <vector>

namespace partition::runtime::testing {

inline BufferInfo buffer(DType dtype, std::vector<int64_t> shape) {
  BufferInfo info;
  info.dtype = dtype;
  info.shape = shape;
  info.elements = 1;
  for (int64_t d : shape)
    info.elements *= d;
  info.bytes = info.elements * 4;
  return info;
}

/// Checks one instruction of `kernel` over `buffers` (inputs, then outputs,
/// disjoint in the arena): "" when it passes, else the loader's message.
inline std::string check(KernelId kernel, std::vector<BufferInfo> buffers,
                         std::vector<int64_t> ints, std::vector<float> floats,
                         KernelArgs *args = nullptr) {
  Program program;
  uint64_t offset = 0;
  for (BufferInfo &b : buffers) {
    b.offset = offset;
    offset += (b.bytes + 63) / 64 * 64;
  }
  program.buffers = buffers;
  Instruction instruction;
  instruction.kernel = kernel;
  for (uint32_t i = 0; i < buffers.size(); ++i)
    instruction.args.push_back(i);
  instruction.ints = ints;
  instruction.floats = floats;
  try {
    KernelArgs checked = checkInstruction(program, instruction, "#0");
    if (args)
      *args = checked;
  } catch (const ProgramError &error) {
    return error.what();
  }
  return "";
}

} // namespace partition::runtime::testing

#endif // PARTITION_UNITTESTS_RUNTIME_KERNELARGSTESTING_H
