//===- Backend.h - where a program's arena lives and runs -------*- C++ -*-===//

#ifndef PARTITION_RUNTIME_BACKEND_H
#define PARTITION_RUNTIME_BACKEND_H

#include "runtime/program/ActionWalk.h"
#include "runtime/program/Program.h"
#include "runtime/comm/Communicator.h"

#include <chrono>
#include <memory>
#include <string>
#include <vector>

namespace partition::runtime {

namespace comm {
class MeshCommunicators;
} // namespace comm
class TraceRecorder;
struct TraceSpan;

/// Executes one program on one device. The arena and all buffers belong to
/// the backend; the host moves data in and out through read / write.
class Backend {
public:
  virtual ~Backend();
  virtual const char *name() const = 0;
  /// Copies `buffer`'s contents from host memory.
  virtual void write(const BufferInfo &buffer, const void *source) = 0;
  /// Copies `buffer`'s contents to host memory.
  virtual void read(const BufferInfo &buffer, void *destination) = 0;
  /// Runs every instruction of function `index` of the program once;
  /// `step` (the 1-based training step, or -1) names the step in the
  /// messages of a collective that fails or times out.
  virtual void run(size_t index, int64_t step) = 0;
  void run(size_t index) { run(index, -1); }
  /// Bytes the backend holds beyond the arena (kernel workspaces).
  virtual uint64_t workspaceBytes() const = 0;
  /// Where the program's tiers live (the offload: "nvme tier: N bytes per
  /// rank in FILE (uring, O_DIRECT)"), or "" without tiers.
  virtual std::string describeTiers() const { return ""; }
  /// Device memory the backend holds (arena and workspaces); 0 on the CPU.
  virtual uint64_t deviceBytes() const { return 0; }
  /// Records a span per instruction run from now on into `trace` (null:
  /// stop); the trace must outlive the runs.
  virtual void setTrace(TraceRecorder *trace) { this->trace = trace; }

  /// Mixture of experts: what the routing kernels (moe_route) decided since
  /// the last call, summed over every layer, group and run (a recomputed
  /// forward counts again), and reset; false when this backend does not
  /// observe its routing (CUDA: the counts stay on the device).
  struct RoutingCounts {
    /// Per expert: the choices it kept (within its capacity).
    std::vector<double> kept;
    /// Every top-k choice, and those dropped past a capacity.
    double choices = 0, dropped = 0;
    /// The moe_aux_loss kernels' values (a mean over their groups each)
    /// times their groups, and those groups: over the world, auxLoss /
    /// auxGroups is the mean of one MoE layer's router losses, whatever
    /// the split of the batch or the copies of tensor-parallel ranks.
    double auxLoss = 0, auxGroups = 0;
    /// Bytes this rank's all-to-alls sent to other ranks (the CPU
    /// backend's; the filled rows where counts say which).
    double exchangedBytes = 0;
  };
  virtual bool takeRoutingCounts(RoutingCounts &counts) { return false; }

protected:
  TraceRecorder *trace = nullptr;
};

/// "WHERE (send 'LABEL')" or "WHERE (recv 'LABEL')": how errors name a
/// transfer instruction.
/// Runs a function's instructions in the order the program says:
/// `runRange(begin, end)` for [0, size) without a micro-batch loop or an
/// action walk; with a loop, the instructions before it, the loop's `count`
/// times (calling `nextRun(run)` before each run after the first, to read
/// that run's rows into the slices), then those after it; with a walk, the
/// instructions before its regions, each action's range (calling
/// `beforeAction(a)` first, to copy its micro-batch's rows), then those
/// after the regions.
template <typename RunRange, typename NextRun, typename BeforeAction>
void walkFunction(const Function &function, RunRange &&runRange,
                  NextRun &&nextRun, BeforeAction &&beforeAction) {
  size_t size = function.instructions.size();
  if (function.walk) {
    const ActionWalk &walk = *function.walk;
    runRange(size_t(0), walk.regions.front().begin);
    for (size_t a = 0; a < walk.actions.size(); ++a) {
      beforeAction(a);
      auto [begin, end] =
          walk.ranges[walk.actions[a].region][walk.actions[a].slot];
      runRange(begin, end);
    }
    runRange(walk.regions.back().end, walk.written);
    return;
  }
  if (!function.loop) {
    runRange(size_t(0), size);
    return;
  }
  const MicrobatchLoop &loop = *function.loop;
  runRange(size_t(0), loop.begin);
  for (int64_t run = 0; run < loop.count; ++run) {
    if (run > 0)
      nextRun(run);
    runRange(loop.begin, loop.end);
  }
  runRange(loop.end, size);
}

/// --trace under the micro-batch loop or walk: the name of the `index`-th
/// range walkFunction runs (0: the instructions before the loop,
/// micro-batch 0's where the loop starts at micro-batch 1, or a pipeline
/// stage's warm-up; then each run; last: micro-batch k-1's or the
/// cool-down, and the update; a walk's actions by their region and
/// micro-batch), which the backends record on the step functions' track.
inline std::string microbatchSpanName(const Function &function,
                                      int64_t index) {
  if (function.walk) {
    const ActionWalk &walk = *function.walk;
    if (index == 0)
      return "before the actions";
    if (index > static_cast<int64_t>(walk.actions.size()))
      return "after the actions (the update)";
    const WalkAction &action = walk.actions[index - 1];
    return walk.regions[action.region].name + ", micro-batch " +
           std::to_string(action.microbatch);
  }
  const MicrobatchLoop &loop = *function.loop;
  if (loop.stride == 1) {
    if (index == 0 && loop.first == 0)
      return "before the micro-batches";
    const int64_t microbatch = index - 1 + loop.first;
    return "micro-batch " + std::to_string(microbatch) +
           (index == loop.count + 1 ? " and the update" : "");
  }
  // A pipeline stage's loop: its runs are periods of its schedule.
  if (index == 0)
    return "warm-up";
  if (index == loop.count + 1)
    return "cool-down and the update";
  return "period " + std::to_string(index);
}

/// --trace under the micro-batch loop or walk: records the `index`-th
/// range walkFunction ran, from `start` to now, as a span on the step
/// functions' track (tid 1) named by microbatchSpanName.
void traceMicrobatchSpan(TraceRecorder &trace, const Function &function,
                         int64_t index,
                         std::chrono::steady_clock::time_point start,
                         int64_t step);

/// walkFunction, with a span per range under the micro-batch loop or walk
/// when `trace` is set (--trace keeps each micro-batch apart).
template <typename RunRange, typename NextRun, typename BeforeAction>
void walkFunctionTraced(const Function &function, TraceRecorder *trace,
                        int64_t step, RunRange &&runRange, NextRun &&nextRun,
                        BeforeAction &&beforeAction) {
  int64_t index = 0;
  walkFunction(
      function,
      [&](size_t begin, size_t end) {
        auto start = std::chrono::steady_clock::now();
        runRange(begin, end);
        if (trace && (function.loop || function.walk))
          traceMicrobatchSpan(*trace, function, index, start, step);
        ++index;
      },
      nextRun, beforeAction);
}

/// The waits a backend carries into the function's next run instead of
/// doing them where they are (docs/performance.md, "Waits carried into the
/// next step"): the function's trailing waits of collectives (a ZeRO-1/2
/// step's last all-gathers of updated parameters), from the last one up,
/// none inside the micro-batch loop's body, which runs again. None when
/// PARTITION_CARRIED_WAITS=0 (to compare: the results are the same); any
/// value but 0 or 1 throws.
std::vector<size_t> carriedWaits(const Function &function);

std::string transferName(const Instruction &instruction,
                         const std::string &where);

/// The MPI / NCCL tag of pipeline transfers (each pair of stages has a
/// communicator of its own, MeshCommunicators::transferGroup).
inline constexpr int kTransferTag = 11;

/// Where a transfer instruction goes: the communicator of its pair of
/// stages, the peer's rank in it, and how messages name this rank's stage
/// and the peer ("(stage 1, from stage 0 = rank 0)").
struct TransferRoute {
  comm::Communicator *group = nullptr;
  int peer = 0;
  std::string peerText;
};

/// Throws ProgramError naming the instruction when there are no
/// communicators or none for its pair of stages.
TransferRoute transferRoute(const Program &program,
                            const Instruction &instruction,
                            const comm::MeshCommunicators *communicators,
                            const std::string &where);

/// The --trace span of an instruction (times unset): a kernel by its
/// name; a collective, send or receive by its kind and label, with the
/// bytes of its buffers; a wait by the instruction it waits for (of
/// `function`).
TraceSpan traceSpanOf(const Program &program, const Function &function,
                      const Instruction &instruction);

/// "WHERE (tier_read 'LABEL')": how errors name a tier copy instruction.
std::string tierCopyName(const Instruction &instruction,
                         const std::string &where);

/// "WHERE (KIND 'LABEL')": how errors name a collective instruction.
std::string collectiveName(const Instruction &instruction,
                           const std::string &where);

/// The communicator of the group a collective instruction runs over; throws
/// ProgramError naming the instruction when there are no communicators (a
/// program with collectives run outside partition-run) or none for its axes.
comm::Communicator &collectiveGroup(const Program &program,
                                    const Instruction &instruction,
                                    const comm::MeshCommunicators *communicators,
                                    const std::string &where);

/// The communicator's reduction for a program's.
comm::ReduceOp reduceOpOf(ReduceKind reduce);

/// This rank's index in the group of the axes `buffer` (an AxisIndex
/// buffer) names, the first listed axis major, as in dist.axis_index: what
/// every backend writes into the buffer before the first step. Throws
/// ProgramError when the program needs a mesh position and `communicators`
/// is null.
int32_t axisIndexValue(const Program &program, const BufferInfo &buffer,
                       const comm::MeshCommunicators *communicators);

/// Where a backend keeps the tiers of an offload program (docs/offload.md).
struct OffloadOptions {
  /// The NVMe tier's directory (partition-run --offload-path); empty: the
  /// program's (the plan's offload.path).
  std::string path;
  /// Names this rank's file (partition-offload-PID-TAG.bin): "rank3".
  std::string tag;
};

/// The CPU backend: OpenBLAS and OpenMP kernels on a host arena, collectives
/// through `communicators` (the groups of the program's mesh; required when
/// the program has collectives, and must outlive the backend), tiers as
/// `offload` says. Checks every instruction first; throws ProgramError.
std::unique_ptr<Backend>
createCpuBackend(const Program &program,
                 const comm::MeshCommunicators *communicators = nullptr,
                 const OffloadOptions &offload = {});

/// The CUDA backend (runtime/backend/cuda/CudaBackend.h, built with CUDA only):
/// the arena on `device`, collectives through NCCL communicators, tiers as
/// `offload` says (pinned host memory, the NVMe tier's file).
std::unique_ptr<Backend>
createCudaBackend(const Program &program,
                  const comm::MeshCommunicators *communicators, int device,
                  const OffloadOptions &offload = {});

} // namespace partition::runtime

#endif // PARTITION_RUNTIME_BACKEND_H
