//===- Profile.h - PARTITION_PROFILE for every backend ----------*- C++ -*-===//
//
// PARTITION_PROFILE=1 makes a backend time every instruction (the CPU
// backend by wall clock, the CUDA backend by events on the instruction's
// stream) and print, when it is destroyed, per function: the time per run
// by kernel name (calls, ms, share, FLOP rate of the matmuls, bytes per
// second of the operands), then the costliest instructions grouped by kernel
// and shape. PARTITION_PROFILE_SKIP=K leaves out each function's first K runs
// (warm-up). Unset, a backend's run loop is its plain one.
//
//===----------------------------------------------------------------------===//

#ifndef PARTITION_RUNTIME_PROFILE_H
#define PARTITION_RUNTIME_PROFILE_H

#include "runtime/program/KernelArgs.h"

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace partition::runtime {

struct ProfileSettings {
  bool enabled = false;
  int64_t skip = 0;
  static ProfileSettings fromEnvironment();
};

/// What the profile needs to know of one instruction.
struct InstructionCost {
  /// The kernel's name (".bf16" appended for bf16 storage), or the
  /// collective's kind.
  std::string kernel;
  std::string shape;
  /// Matmul FLOPs (2·M·N·K; attention's as its kernels compute them: the
  /// causal half of T×T, the backward at twice the forward), 0 for the
  /// other kernels.
  double flops = 0;
  /// Bytes of all operands, read or written once each.
  double bytes = 0;
  /// How many times a step runs the instruction (the micro-batch loop's
  /// count inside it, else 1).
  int64_t executions = 1;
};

InstructionCost describeKernel(const KernelArgs &args);
/// A collective or transfer instruction: its kind and the bytes of its
/// buffers; a wait: "wait".
InstructionCost describeCollective(const Program &program,
                                   const Instruction &instruction);

/// Prints the two tables of one function to `out`: `costs[i]` took
/// `seconds[i]` over `runs` profiled runs. FLOP rates in TFLOP/s when
/// `tera` (GPUs), else GFLOP/s.
void printProfileTables(std::FILE *out,
                        const std::vector<InstructionCost> &costs,
                        const std::vector<double> &seconds, double runs,
                        bool tera);

} // namespace partition::runtime

#endif // PARTITION_RUNTIME_PROFILE_H
