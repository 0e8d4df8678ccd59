//===- CarriedWaits.cpp - collectives still in flight across runs ---------===//
//
// A ZeRO-1/2 step ends by all-gathering the updated parameters, started one
// after each shard's AdamW, and its last instructions are their waits: the
// step returned only once every parameter had arrived. Nothing reads them
// until the next step's forward does, so the waits at the end of a
// function are carried into its next run instead: each is done right before
// the first instruction that touches its collective's bytes (its source,
// which the next run's first kernels may reuse, or the parameter), and the
// gathers run on the communication thread under whatever comes first.
//
// The order of the collectives is unchanged (the thread runs them as
// started, the same on every rank), and no instruction touches a carried
// collective's bytes before its wait, so results are bit-identical. Anything
// else that might read or write those bytes completes them first: a run of
// another function (the evaluation step), Backend::read and Backend::write
// of an overlapping buffer (checkpoints; the loss and the tokens do not
// overlap), and the backend's destruction. Which waits: carriedWaits
// (Backend.h), shared with the CUDA backend (its stream plan).
//
//===----------------------------------------------------------------------===//

#include "runtime/backend/cpu/CpuBackendImpl.h"

namespace partition::runtime::cpubackend {

void CpuBackend::carryTrailingWaits(const Program &program,
                                    CompiledFunction &function,
                                    const Function &source) {
  const std::vector<Instruction> &instructions = source.instructions;
  // The arena bytes an instruction's buffers occupy.
  auto rangesOf = [&](const Instruction &instruction) {
    std::vector<std::pair<uint64_t, uint64_t>> ranges;
    for (uint32_t arg : instruction.args) {
      const BufferInfo &buffer = program.buffers[arg];
      if (buffer.tier == Tier::Arena)
        ranges.push_back({buffer.offset, buffer.offset + buffer.bytes});
    }
    return ranges;
  };
  for (size_t w : carriedWaits(source)) {
    const Instruction &wait = instructions[w];
    CarriedWait carried;
    carried.ranges = rangesOf(instructions[*wait.waitFor]);
    carried.firstTouch = *wait.waitFor; // it touches its own buffers
    for (size_t i = 0; i < *wait.waitFor; ++i) {
      bool touches = false;
      for (auto [begin, end] : rangesOf(instructions[i]))
        touches = touches || carried.overlaps(begin, end);
      if (touches) {
        carried.firstTouch = i;
        break;
      }
    }
    carried.index = w;
    carried.wait = std::move(function.calls[w]);
    // The wait itself: nothing now; runRange does it before the instruction
    // it precedes, next run (a no-op the first run: nothing was started).
    function.calls[w] = [] {};
    if (function.carriedBefore.empty()) {
      function.carriedBefore.resize(function.calls.size());
      function.carriedOut.resize(function.calls.size());
    }
    function.carriedOut[w] = true;
    function.carriedBefore[carried.firstTouch].push_back(
        static_cast<uint32_t>(function.carried.size()));
    function.carried.push_back(std::move(carried));
  }
}

void CpuBackend::runCarriedBefore(CompiledFunction &function, size_t i,
                                  bool record) {
  using Clock = TraceRecorder::Clock;
  bool timed = (profile.enabled && record) || trace;
  for (uint32_t k : function.carriedBefore[i]) {
    CarriedWait &carried = function.carried[k];
    Clock::time_point start = timed ? Clock::now() : Clock::time_point();
    carried.wait();
    if (timed)
      recordTime(function, carried.index, start, record);
  }
}

void CpuBackend::completeCarried(uint64_t begin, uint64_t end) {
  for (CompiledFunction &function : functions)
    for (CarriedWait &carried : function.carried)
      if (carried.overlaps(begin, end))
        carried.wait();
}

} // namespace partition::runtime::cpubackend
