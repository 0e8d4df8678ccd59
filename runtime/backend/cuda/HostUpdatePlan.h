//===- HostUpdatePlan.h - which AdamW updates run on the CPU ----*- C++ -*-===//
//
// ZeRO-Offload's schedule on a GPU rank (docs/offload.md): where a
// program keeps AdamW's moments in a tier, the update of each slice runs on
// the CPU, on the moments in host memory, instead of staging them into the
// arena for the GPU's kernel and back. The compiler wrote every such update
// as
//
//   tier_read  M -> m      (tier -> arena staging; also V -> v)
//   wait
//   adamw(w, g, m, v, step, lr) -> (w, m, v)
//   tier_write m -> M      (and v -> V)
//   wait
//
// and this finds them: an in-place adamw whose two moments are each the
// arena side of a tier read before it and of a write to the same tier
// buffer after it. Nothing else touches those staging buffers (the
// compiler allocated them for this update alone), so:
//  - a host-tier operand is read and written by the CPU where it is: its
//    copies and their waits are not run (`replaced`);
//  - an NVMe-tier operand's read still fills its pinned block from the file
//    and its write still writes the block back, but the arena side is never
//    copied: the CPU updates the block in between.
// The parameter (ZeRO-3's shard, when it is staged from a tier too) is an
// operand like the moments; otherwise the backend moves it from and back to
// the arena. An update whose moments are in the arena stays the GPU's.
// Pure host logic, tested without a GPU (unittests/runtime/cuda).
//
//===----------------------------------------------------------------------===//

#ifndef PARTITION_RUNTIME_CUDA_HOSTUPDATEPLAN_H
#define PARTITION_RUNTIME_CUDA_HOSTUPDATEPLAN_H

#include "runtime/program/Program.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <set>
#include <vector>

namespace partition::runtime::cuda {

/// An operand of an update on the CPU that the program keeps in a tier:
/// its tier buffer and the copies the compiler staged it with.
struct TierOperand {
  uint32_t tierBuffer = 0;
  Tier tier = Tier::Host;
  /// The read before the update and the write-back after it.
  size_t read = 0, write = 0;
};

struct HostUpdate {
  /// The adamw instruction.
  size_t adamw = 0;
  /// The arena's operands (buffer indices): the gradient, the step, the
  /// learning rate, and the parameter unless it is in a tier.
  uint32_t gradient = 0, step = 0, lr = 0, param = 0;
  TierOperand moment1, moment2;
  /// ZeRO-3's parameter shard staged from a tier (then `param` is unused).
  std::optional<TierOperand> tierParam;
  /// The host-tier copies the update replaces, and their waits.
  std::vector<size_t> replaced;
};

namespace detail {

/// The tier copy pair around `adamw` for the arena buffer `staged`: the
/// latest read into it before, the first write from it to the same tier
/// buffer after; or none.
inline std::optional<TierOperand> stagedPair(const Program &program,
                                             const Function &function,
                                             size_t adamw, uint32_t staged) {
  auto copyOf = [&](const Instruction &instruction, bool write) {
    return instruction.tierCopy && instruction.tierCopy->write == write &&
           instruction.args[instruction.tierCopy->arenaArg()] == staged;
  };
  std::optional<TierOperand> pair;
  for (size_t i = adamw; i-- > 0;)
    if (copyOf(function.instructions[i], /*write=*/false)) {
      const Instruction &read = function.instructions[i];
      uint32_t tiered = read.args[read.tierCopy->tierArg()];
      pair = TierOperand{tiered, program.buffers[tiered].tier, i, 0};
      break;
    }
  if (!pair)
    return std::nullopt;
  for (size_t i = adamw + 1; i < function.instructions.size(); ++i) {
    const Instruction &write = function.instructions[i];
    if (copyOf(write, /*write=*/true) &&
        write.args[write.tierCopy->tierArg()] == pair->tierBuffer) {
      pair->write = i;
      return pair;
    }
  }
  return std::nullopt;
}

} // namespace detail

/// The updates of `function` that run on the CPU, in program order.
inline std::vector<HostUpdate> planHostUpdates(const Program &program,
                                               const Function &function) {
  std::vector<HostUpdate> updates;
  std::set<size_t> claimed;
  for (size_t k = 0; k < function.instructions.size(); ++k) {
    const Instruction &instruction = function.instructions[k];
    // ins(w, g, m, v, step, lr) outs(w, m, v): in place only.
    if (!instruction.isKernel() || instruction.kernel != KernelId::AdamW ||
        instruction.args.size() != 9)
      continue;
    const std::vector<uint32_t> &a = instruction.args;
    if (a[6] != a[0] || a[7] != a[2] || a[8] != a[3])
      continue;
    std::optional<TierOperand> m =
        detail::stagedPair(program, function, k, a[2]);
    std::optional<TierOperand> v =
        detail::stagedPair(program, function, k, a[3]);
    if (!m || !v)
      continue;
    HostUpdate update;
    update.adamw = k;
    update.param = a[0];
    update.gradient = a[1];
    update.step = a[4];
    update.lr = a[5];
    update.moment1 = *m;
    update.moment2 = *v;
    update.tierParam = detail::stagedPair(program, function, k, a[0]);
    std::vector<const TierOperand *> operands = {&update.moment1,
                                                 &update.moment2};
    if (update.tierParam)
      operands.push_back(&*update.tierParam);
    // A copy claimed twice would be a program this does not understand:
    // leave that update to the GPU.
    bool clash = false;
    for (const TierOperand *operand : operands)
      clash = clash || claimed.count(operand->read) ||
              claimed.count(operand->write);
    if (clash)
      continue;
    std::vector<size_t> hostCopies;
    for (const TierOperand *operand : operands) {
      claimed.insert({operand->read, operand->write});
      if (operand->tier == Tier::Host)
        hostCopies.insert(hostCopies.end(), {operand->read, operand->write});
    }
    update.replaced = hostCopies;
    for (size_t i = 0; i < function.instructions.size(); ++i) {
      const Instruction &wait = function.instructions[i];
      if (wait.waitFor && std::find(hostCopies.begin(), hostCopies.end(),
                                    *wait.waitFor) != hostCopies.end())
        update.replaced.push_back(i);
    }
    updates.push_back(std::move(update));
  }
  return updates;
}

} // namespace partition::runtime::cuda

#endif // PARTITION_RUNTIME_CUDA_HOSTUPDATEPLAN_H
