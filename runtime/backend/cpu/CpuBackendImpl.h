//===- CpuBackendImpl.h - the CPU backend's class, private ------*- C++ -*-===//
//
// What the two files of the CPU backend share: the CpuBackend class, whose
// executor (construction, run, profile, collectives and transfers) is in
// CpuBackend.cpp and whose per-kernel dispatch is in CpuDispatch.cpp, and
// the helpers both use. Included by those files only.
//
//===----------------------------------------------------------------------===//

#ifndef PARTITION_RUNTIME_BACKEND_CPU_CPUBACKENDIMPL_H
#define PARTITION_RUNTIME_BACKEND_CPU_CPUBACKENDIMPL_H

#include "runtime/backend/Backend.h"

#include "runtime/program/KernelArgs.h"
#include "runtime/backend/Profile.h"
#include "runtime/backend/Trace.h"
#include "runtime/comm/MeshCommunicators.h"
#include "runtime/backend/cpu/Bf16Gemm.h"
#include "runtime/backend/cpu/CommunicationThread.h"
#include "runtime/backend/cpu/CpuTiers.h"
#include "runtime/backend/cpu/Kernels.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <stdexcept>
#include <unordered_map>

namespace partition::runtime::cpubackend {

namespace cpu = partition::runtime::cpu;

struct AlignedFree {
  void operator()(void *p) const { std::free(p); }
};

/// Kernels that move bf16 bits themselves instead of computing on fp32
/// copies.
inline bool movesBits(KernelId kernel) {
  return kernel == KernelId::Cast || kernel == KernelId::Copy ||
         kernel == KernelId::FlatPack || kernel == KernelId::FlatUnpack;
}

/// Distinct bf16 buffers of an instruction, by arena offset: an in-place
/// output shares its input's copy.
inline std::vector<const BufferInfo *>
stagedBuffers(const KernelArgs &args) {
  std::vector<const BufferInfo *> staged;
  if (movesBits(args.kernel))
    return staged;
  for (const BufferInfo *buffer : args.buffers)
    if (buffer->dtype == DType::BF16 &&
        std::none_of(staged.begin(), staged.end(), [&](const BufferInfo *b) {
          return b->offset == buffer->offset;
        }))
      staged.push_back(buffer);
  return staged;
}

inline size_t stagedElements(const KernelArgs &args) {
  size_t elements = 0;
  for (const BufferInfo *buffer : stagedBuffers(args))
    elements += size_t(buffer->elements);
  return elements;
}

class CpuBackend final : public Backend {
public:
  CpuBackend(const Program &program,
             const comm::MeshCommunicators *communicators,
             const OffloadOptions &offload);
  ~CpuBackend() override;

  const char *name() const override { return "cpu"; }
  void write(const BufferInfo &buffer, const void *source) override {
    if (buffer.tier != Tier::Arena)
      return tiers->write(buffer, source);
    completeCarried(buffer.offset, buffer.offset + buffer.bytes);
    std::memcpy(arena.get() + buffer.offset, source, buffer.bytes);
  }
  void read(const BufferInfo &buffer, void *destination) override {
    if (buffer.tier != Tier::Arena)
      return tiers->read(buffer, destination);
    completeCarried(buffer.offset, buffer.offset + buffer.bytes);
    std::memcpy(destination, arena.get() + buffer.offset, buffer.bytes);
  }
  std::string describeTiers() const override {
    return tiers ? tiers->describe() : std::string();
  }
  using Backend::run;
  void run(size_t index, int64_t step) override;
  bool takeRoutingCounts(RoutingCounts &counts) override {
    counts = routing;
    routing = RoutingCounts{};
    return true;
  }
  uint64_t workspaceBytes() const override {
    return workspace.size +
           (staging.size() + startedStaging.size() + bf16Staging.size() +
            collectiveCopyElements) *
               sizeof(float) +
           (bf16Gemms ? bf16Gemms->scratchpadBytes() : 0);
  }

private:
  /// One instruction, bound to its buffers and sizes. Kernels with bf16
  /// operands run the fp32 kernel on fp32 copies (bf16 storage, fp32
  /// arithmetic: the copies of the inputs are exact, the results are
  /// rounded once, to nearest even, as a GPU kernel that loads bf16 and
  /// computes in fp32 stores them).
  std::function<void()> compile(const KernelArgs &args,
                                const Instruction &instruction);
  /// A linear layer's GEMM straight on its bf16 buffers (Bf16Gemm.h), when
  /// this process runs them with oneDNN and every operand is bf16; else
  /// empty (the kernel then runs widened).
  std::function<void()> compileBf16Gemm(const KernelArgs &args);
  /// GELU, its gradient, add and the loss straight on their bf16 buffers
  /// (Kernels.h's *BFloat16 kernels), when those are bf16; else empty.
  std::function<void()> compileBf16Native(const KernelArgs &args);
  /// The fp32 kernel of `args` on the buffers at `pointers`.
  std::function<void()> compileKernel(const KernelArgs &args,
                                      const Instruction &instruction,
                                      const std::vector<uint8_t *> &pointers);
  /// One collective, bound to its buffers and its group's communicator;
  /// bf16 buffers are reduced or moved as fp32 copies. A started one
  /// (instruction #index of function #function) goes to the communication
  /// thread, on its group's started-collective communicator, when the
  /// communicators have one (MeshCommunicators::addStartedGroups); else it
  /// runs at once, and its wait does nothing.
  std::function<void()> compileCollective(const Program &program,
                                          const Instruction &instruction,
                                          const std::string &where,
                                          size_t function, size_t index);
  /// The collective on fp32 copies of bf16 buffers at `addresses`.
  std::function<void()>
  compileBF16Collective(const Program &program, const Instruction &instruction,
                        comm::Communicator &group,
                        std::vector<float *> addresses,
                        std::vector<float> *pack);
  /// The collective on fp32 data at `addresses` (one per argument),
  /// packing buckets and blocks in `pack`.
  std::function<void()>
  compileF32Collective(const Program &program, const Instruction &instruction,
                       comm::Communicator &group,
                       const std::vector<float *> &addresses,
                       std::vector<float> *pack);
  /// An all-gather or reduce-scatter along `dim`, through `group`.
  /// A RingShift: this rank's input to the next rank of the group, the
  /// previous one's into the output (any element type: bytes).
  /// An all_to_all: the input's blocks along split_dim to the group's
  /// ranks, the received ones along concat_dim.
  std::function<void()> compileAllToAll(const Program &program,
                                        const Instruction &instruction,
                                        comm::Communicator &group, float *in,
                                        float *out, std::vector<float> *pack);
  /// An all_to_all with counts (rows_dim): only the filled rows move.
  std::function<void()> compileCountedAllToAll(const Program &program,
                                               const Instruction &instruction,
                                               comm::Communicator &group,
                                               float *in, float *out,
                                               std::vector<float> *pack);
  std::function<void()> compileRingShift(const Program &program,
                                         const Instruction &instruction,
                                         comm::Communicator &group);
  std::function<void()> compileBlockCollective(const Program &program,
                                               const Instruction &instruction,
                                               comm::Communicator &group,
                                               float *in, float *out,
                                               std::vector<float> *pack);
  /// The wait (in function #function) for the started collective at
  /// instruction #`waitFor`: blocks until the communication thread has run
  /// it, and under --trace records its span on the rank's communication
  /// track.
  std::function<void()> compileWait(size_t function, uint32_t waitFor);

  /// Writes this rank's index in each AxisIndex buffer's group: constant
  /// for the run, so once, before any step.
  void writeAxisIndices(const Program &program);

  std::unique_ptr<uint8_t[], AlignedFree> arena;
  /// The offload's tiers (null without): after the arena, so that their
  /// I/O engine, which drains its requests into the arena, goes first.
  std::unique_ptr<CpuTiers> tiers;
  /// Under --trace, when each tier copy (CpuTiers' index) was started: its
  /// span on the rank's tier track runs from there to its wait's return.
  std::vector<TraceRecorder::Clock::time_point> tierStarted;
  /// Attention scratch, sized for the largest attention of the program.
  struct Workspace {
    std::unique_ptr<uint8_t[], AlignedFree> data;
    size_t size = 0;
  } workspace;
  /// Per function: its compiled instructions and their names for errors.
  /// A wait at the end of a function, for a collective still in flight
  /// when the function returns: done before the next run's first
  /// instruction on its bytes instead (CarriedWaits.cpp).
  struct CarriedWait {
    /// The wait's call (a no-op once its ticket is spent) and its index.
    std::function<void()> wait;
    size_t index = 0;
    /// The instruction of the function before which it is done.
    size_t firstTouch = 0;
    /// The arena bytes of the collective's buffers: [begin, end).
    std::vector<std::pair<uint64_t, uint64_t>> ranges;
    bool overlaps(uint64_t begin, uint64_t end) const {
      for (auto [first, last] : ranges)
        if (begin < last && first < end)
          return true;
      return false;
    }
  };
  struct CompiledFunction {
    std::string name;
    std::vector<std::function<void()>> calls;
    /// The program's function: its micro-batch loop, walked by run().
    Function source;
    /// The loop's slices: where each run's rows go, and their bytes.
    std::vector<std::pair<uint8_t *, size_t>> slices;
    /// A walk's rows copies, per region: where micro-batch 0's rows of the
    /// input are, where they go, and their bytes.
    struct RowsCopy {
      const uint8_t *input;
      uint8_t *rows;
      size_t bytes;
    };
    std::vector<std::vector<RowsCopy>> actionRows;
    std::vector<std::string> names;
    /// PARTITION_PROFILE only: per instruction, its cost and the seconds
    /// spent in it over the profiled runs.
    std::vector<InstructionCost> costs;
    std::vector<double> seconds;
    int64_t runs = 0, profiledRuns = 0;
    /// Per instruction, the span --trace records for it (times unset).
    std::vector<TraceSpan> spans;
    /// The pair communicators its eager sends went through: run() waits
    /// for their delivery at its end.
    std::vector<comm::Communicator *> sendGroups;
    /// Per instruction: the communication thread's ticket of a started
    /// collective in this run, or -1 (not started, or run synchronously).
    std::vector<int64_t> tickets;
    /// The waits carried into the next run (CarriedWaits.cpp), and per
    /// instruction those done right before it (empty when none is).
    std::vector<CarriedWait> carried;
    std::vector<std::vector<uint32_t>> carriedBefore;
    /// Per instruction, whether it is a carried wait's place (a no-op, not
    /// traced there: its span is the carried wait's, next run).
    std::vector<bool> carriedOut;
  };
  /// Carries `function`'s trailing waits of started collectives into its
  /// next run: each runs before the first instruction touching its
  /// collective's bytes (PARTITION_CARRIED_WAITS=0: not carried).
  void carryTrailingWaits(const Program &program, CompiledFunction &function,
                          const Function &source);
  /// Instruction `index` of `function` ran from `start` to now: its profile
  /// seconds (when `record`) and its trace span.
  void recordTime(CompiledFunction &function, size_t index,
                  TraceRecorder::Clock::time_point start, bool record);
  /// The carried waits due before instruction `i` of `function`, timed as
  /// the waits they are (profile, trace).
  void runCarriedBefore(CompiledFunction &function, size_t i, bool record);
  /// Completes the carried collectives whose buffers overlap arena bytes
  /// [begin, end) (all of them by default), of every function.
  void completeCarried(uint64_t begin = 0, uint64_t end = UINT64_MAX);
  /// A send (eager: the communicator copies the buffer) or a receive (waits
  /// for the data, under the communicator's timeout).
  std::function<void()> compileTransfer(const Program &program,
                                        const Instruction &instruction,
                                        const std::string &where,
                                        CompiledFunction &function);
  /// Instructions [begin, end) of `function`, traced or profiled when
  /// asked.
  void runRange(CompiledFunction &function, size_t begin, size_t end,
                bool record);
  /// The micro-batch loop's run `run`: its rows into the slices.
  static void readRows(const CompiledFunction &function, int64_t run);
  /// A walk's action `index`: its micro-batch's rows into its region's.
  static void copyActionRows(const CompiledFunction &function, size_t index);
  void printProfile(const CompiledFunction &function) const;

  std::vector<CompiledFunction> functions;
  /// PARTITION_PROFILE (runtime/backend/Profile.h): wall clock around every
  /// call (a GEMM's time includes waking OpenBLAS's threads).
  ProfileSettings profile = ProfileSettings::fromEnvironment();
  const comm::MeshCommunicators *communicators;
  /// A bucket of several buffers is packed here and reduced in one call (one
  /// message per bucket, as PyTorch DDP's flat bucket buffers), and blocks
  /// along a dimension other than the first are packed here for an
  /// all-gather or reduce-scatter; sized for the largest such use.
  std::vector<float> staging;
  /// Started collectives: the thread that runs them (created with the
  /// first), and their own packing buffer (the thread runs one at a time,
  /// while the main thread may pack another collective in `staging`).
  std::unique_ptr<CommunicationThread> communication;
  std::vector<float> startedStaging;
  /// fp32 copies of one kernel instruction's bf16 operands, sized for the
  /// instruction with the most (instructions run one at a time).
  std::vector<float> bf16Staging;
  /// The linear layers' bf16 GEMMs, when oneDNN runs them.
  std::unique_ptr<cpu::Bf16Gemms> bf16Gemms;
  /// Kernels that read their bf16 buffers directly (GEMMs, native ones):
  /// compiled before the staging is sized (they need none), by instruction.
  std::unordered_map<const Instruction *, std::function<void()>> bf16Direct;
  /// What the moe_route kernels decided since takeRoutingCounts.
  RoutingCounts routing;
  /// fp32 copies of each bf16 collective's buffers.
  std::vector<std::unique_ptr<float[]>> collectiveCopies;
  size_t collectiveCopyElements = 0;
  /// The step run() was given, for the collectives' error messages.
  int64_t currentStep = -1;
  /// The function run() ran last: its carried waits are pending.
  size_t lastRun = SIZE_MAX;
};

/// At whole I/O blocks, so that the offload's staging buffers (at whole
/// blocks of the arena) can be read and written with O_DIRECT.
inline uint8_t *allocateAligned(size_t bytes) {
  constexpr size_t kAlignment = 4096;
  size_t rounded = (bytes + kAlignment - 1) / kAlignment * kAlignment;
  void *memory =
      std::aligned_alloc(kAlignment, rounded == 0 ? kAlignment : rounded);
  if (!memory)
    throw ProgramError("cannot allocate " + std::to_string(bytes) +
                       " bytes of host memory for the arena");
  return static_cast<uint8_t *>(memory);
}

} // namespace partition::runtime::cpubackend

#endif // PARTITION_RUNTIME_BACKEND_CPU_CPUBACKENDIMPL_H
