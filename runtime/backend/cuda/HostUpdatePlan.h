//===- HostUpdatePlan.h - which AdamW updates run on the CPU ----*- C++ -*-===//
//
// ZeRO-Offload's schedule on a GPU rank (docs/offload.md): where a
// program keeps AdamW's moments in the host tier, the update of each slice
// runs on the CPU, on the moments where they are (pinned host memory),
// instead of staging them into the arena for the GPU's kernel and back.
// The compiler wrote every such update as
//
//   tier_read  M -> m      (host tier -> arena staging; also V -> v)
//   wait
//   adamw(w, g, m, v, step, lr) -> (w, m, v)
//   tier_write m -> M      (and v -> V)
//   wait
//
// and this finds them: an in-place adamw whose two moments are each the
// arena side of a host-tier read before it and of a host-tier write of the
// same tier buffer after it. Those copies and their waits are then not
// run (nothing else touches the staging buffers: the compiler allocated
// them for this update alone), and the backend moves the gradient (and
// the parameter slice, unless it too is in the host tier: ZeRO-3's
// parameter offload) to the CPU and the parameter back instead. An update
// whose moments are in the NVMe tier, or in the arena, stays the GPU's.
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

struct HostUpdate {
  /// The adamw instruction.
  size_t adamw = 0;
  /// Its operands (buffer indices): the parameter and gradient in the
  /// arena (the parameter in the host tier when paramInTier), the moments
  /// in the host tier, the step and learning rate in the arena.
  uint32_t param = 0, gradient = 0, moment1 = 0, moment2 = 0, step = 0, lr = 0;
  bool paramInTier = false;
  /// The tier copies the update replaces, and their waits.
  std::vector<size_t> replaced;
};

namespace detail {

/// The host-tier copy pair around `adamw` for the arena buffer `staged`:
/// the latest read into it before, the first write of the same tier
/// buffer from it after; the tier buffer and both instructions, or none.
struct StagedPair {
  uint32_t tierBuffer = 0;
  size_t read = 0, write = 0;
};

inline std::optional<StagedPair> stagedPair(const Program &program,
                                            const Function &function,
                                            size_t adamw, uint32_t staged) {
  auto hostCopy = [&](const Instruction &instruction, bool write) {
    if (!instruction.tierCopy || instruction.tierCopy->write != write)
      return false;
    const TierCopy &copy = *instruction.tierCopy;
    return instruction.args[copy.arenaArg()] == staged &&
           program.buffers[instruction.args[copy.tierArg()]].tier == Tier::Host;
  };
  std::optional<StagedPair> pair;
  for (size_t i = adamw; i-- > 0;)
    if (hostCopy(function.instructions[i], /*write=*/false)) {
      const Instruction &read = function.instructions[i];
      pair = StagedPair{read.args[read.tierCopy->tierArg()], i, 0};
      break;
    }
  if (!pair)
    return std::nullopt;
  for (size_t i = adamw + 1; i < function.instructions.size(); ++i) {
    const Instruction &write = function.instructions[i];
    if (hostCopy(write, /*write=*/true) &&
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
  std::set<size_t> replaced;
  for (size_t k = 0; k < function.instructions.size(); ++k) {
    const Instruction &instruction = function.instructions[k];
    // ins(w, g, m, v, step, lr) outs(w, m, v): in place only.
    if (!instruction.isKernel() || instruction.kernel != KernelId::AdamW ||
        instruction.args.size() != 9)
      continue;
    const std::vector<uint32_t> &a = instruction.args;
    if (a[6] != a[0] || a[7] != a[2] || a[8] != a[3])
      continue;
    std::optional<detail::StagedPair> m =
        detail::stagedPair(program, function, k, a[2]);
    std::optional<detail::StagedPair> v =
        detail::stagedPair(program, function, k, a[3]);
    if (!m || !v)
      continue;
    HostUpdate update;
    update.adamw = k;
    update.param = a[0];
    update.gradient = a[1];
    update.moment1 = m->tierBuffer;
    update.moment2 = v->tierBuffer;
    update.step = a[4];
    update.lr = a[5];
    update.replaced = {m->read, m->write, v->read, v->write};
    // ZeRO-3's parameter shard in the host tier too: updated where it is.
    if (std::optional<detail::StagedPair> w =
            detail::stagedPair(program, function, k, a[0])) {
      update.paramInTier = true;
      update.param = w->tierBuffer;
      update.replaced.push_back(w->read);
      update.replaced.push_back(w->write);
    }
    // A copy claimed twice would be a program this does not understand:
    // leave that update to the GPU.
    bool clash = false;
    for (size_t copy : update.replaced)
      clash = clash || replaced.count(copy);
    if (clash)
      continue;
    std::vector<size_t> copies = update.replaced;
    for (size_t i = 0; i < function.instructions.size(); ++i) {
      const Instruction &wait = function.instructions[i];
      if (wait.waitFor && std::find(copies.begin(), copies.end(),
                                    *wait.waitFor) != copies.end())
        update.replaced.push_back(i);
    }
    replaced.insert(update.replaced.begin(), update.replaced.end());
    updates.push_back(std::move(update));
  }
  return updates;
}

} // namespace partition::runtime::cuda

#endif // PARTITION_RUNTIME_CUDA_HOSTUPDATEPLAN_H
