//===- StreamPlan.h - which launch waits for which collective ---*- C++ -*-===//
//
// The CUDA backend runs kernels in program order on one compute stream and
// each collective on its communicator's stream. Ordering is decided once
// per function, by walking it in order, from the BYTE RANGES each
// instruction touches in the arena (not buffer ids: the memory planner
// gives a dead buffer's bytes to a later one):
//  - a collective starts after everything enqueued before it on the compute
//    stream (an event recorded when it is reached), and after every earlier
//    collective on another stream still in flight: collectives of different
//    communicators never run at once (NCCL may deadlock when two
//    communicators' kernels wait for each other on a GPU that cannot run
//    both), while each still overlaps the compute stream;
//  - a kernel first makes the compute stream wait for the completion of
//    every in-flight collective whose ranges overlap its own; once waited
//    for, a collective is no longer in flight for the compute stream;
//  - a collective also waits for an in-flight transfer marked
//    ordersCollectives whose ranges overlap its own (the offload's CPU
//    update: its gradient's bytes may be an all-gather's output next);
//  - a wait instruction (of a collective the program started early) makes
//    the compute stream wait for that collective's completion there, if no
//    overlapping kernel has already; the byte ranges alone would wait no
//    earlier, since the program's checks keep every instruction between a
//    start and its wait off the collective's bytes;
//  - at the end of the function the compute stream waits for the rest,
//    except the collectives of waits marked `carried` (the function's
//    trailing waits: a ZeRO-1/2 step's last all-gathers of updated
//    parameters). Those stay in flight into the function's next run, which
//    starts with them in flight: its first kernel on their bytes waits for
//    them (the previous run's event: nothing has recorded it again yet), a
//    collective on another stream waits for them as for any other, and a
//    restart of the same collective, on the same stream, replaces them.
// Pure host logic, tested without a GPU (unittests/runtime/cuda).
//
//===----------------------------------------------------------------------===//

#ifndef PARTITION_RUNTIME_CUDA_STREAMPLAN_H
#define PARTITION_RUNTIME_CUDA_STREAMPLAN_H

#include <cstddef>
#include <cstdint>
#include <vector>

namespace partition::runtime::cuda {

/// Bytes [begin, end) of the arena (staging memory is numbered past the
/// arena's end, so it takes part like any buffer).
struct ByteRange {
  uint64_t begin = 0, end = 0;
  bool overlaps(const ByteRange &other) const {
    return begin < other.end && other.begin < end;
  }
};

inline bool overlapsAny(const std::vector<ByteRange> &a,
                        const std::vector<ByteRange> &b) {
  for (const ByteRange &x : a)
    for (const ByteRange &y : b)
      if (x.overlaps(y))
        return true;
  return false;
}

struct PlannedInstruction {
  bool collective = false;
  /// Collectives: the communication stream (any id; equal ids are one
  /// stream, which orders its own work).
  int stream = 0;
  /// Every byte the instruction reads or writes.
  std::vector<ByteRange> ranges;
  /// Collectives: what the compute stream touches for it before it starts
  /// (packing a reduce-scatter's blocks into staging).
  std::vector<ByteRange> computeRanges;
  /// A pipeline send or receive (on its pair of stages' communicator): it
  /// neither waits for other communicators' collectives nor makes them wait
  /// for it. A send completes only once its receiver gets there, which may
  /// need this rank's later receives (1F1B): serialising it with them
  /// would deadlock the pipeline. Its byte ranges still order the kernels.
  bool transfer = false;
  /// A transfer whose bytes a later collective must not touch before it is
  /// done (the offload's AdamW on the CPU reads a gradient whose bytes the
  /// memory plan may give to an all-gather's output): collectives and
  /// transfers whose ranges overlap it wait for it, as kernels do.
  bool ordersCollectives = false;
  /// A wait instruction (not a collective): the index of the started
  /// collective it completes; kNoWait otherwise.
  static constexpr size_t kNoWait = ~size_t(0);
  size_t waitFor = kNoWait;
  /// A wait whose collective stays in flight into the function's next run
  /// instead (Backend.h, carriedWaits).
  bool carried = false;
};

struct StreamPlan {
  static constexpr size_t kNoEvent = ~size_t(0);
  /// Per instruction: completion events (collective ordinals) the compute
  /// stream waits for before the instruction.
  std::vector<std::vector<size_t>> computeWaits;
  /// Per collective instruction: completion events its stream waits for.
  std::vector<std::vector<size_t>> streamWaits;
  /// Per instruction: its completion event (collectives), else kNoEvent.
  std::vector<size_t> event;
  /// Events the compute stream waits for at the end of the function.
  std::vector<size_t> finalWaits;
  /// Events of the carried waits' collectives, still in flight at the end
  /// of the function; its next run's computeWaits and streamWaits include
  /// them where needed.
  std::vector<size_t> carriedEvents;
  size_t events = 0;
};

inline StreamPlan planStreams(const std::vector<PlannedInstruction> &code) {
  StreamPlan plan;
  plan.computeWaits.resize(code.size());
  plan.streamWaits.resize(code.size());
  plan.event.assign(code.size(), StreamPlan::kNoEvent);
  struct InFlight {
    size_t event;
    const PlannedInstruction *instruction;
  };
  for (size_t i = 0; i < code.size(); ++i)
    if (code[i].collective)
      plan.event[i] = plan.events++;
  // The collectives of carried waits; their previous run's are in flight
  // as this run starts.
  std::vector<bool> carried(code.size(), false);
  std::vector<InFlight> inFlight;
  for (const PlannedInstruction &instruction : code)
    if (instruction.carried && instruction.waitFor < code.size()) {
      carried[instruction.waitFor] = true;
      inFlight.push_back(
          {plan.event[instruction.waitFor], &code[instruction.waitFor]});
    }
  auto computeWaitsFor = [&](const std::vector<ByteRange> &ranges,
                             std::vector<size_t> &waits) {
    for (size_t j = 0; j < inFlight.size();) {
      if (overlapsAny(inFlight[j].instruction->ranges, ranges)) {
        waits.push_back(inFlight[j].event);
        inFlight.erase(inFlight.begin() + j);
      } else {
        ++j;
      }
    }
  };
  for (size_t i = 0; i < code.size(); ++i) {
    const PlannedInstruction &instruction = code[i];
    if (!instruction.collective) {
      computeWaitsFor(instruction.ranges, plan.computeWaits[i]);
      if (instruction.waitFor < i && !instruction.carried)
        for (size_t j = 0; j < inFlight.size(); ++j)
          if (inFlight[j].instruction == &code[instruction.waitFor]) {
            plan.computeWaits[i].push_back(inFlight[j].event);
            inFlight.erase(inFlight.begin() + j);
            break;
          }
      continue;
    }
    computeWaitsFor(instruction.computeRanges, plan.computeWaits[i]);
    // Its previous run, carried: its stream orders the two.
    for (size_t j = 0; j < inFlight.size(); ++j)
      if (inFlight[j].instruction == &instruction) {
        inFlight.erase(inFlight.begin() + j);
        break;
      }
    for (const InFlight &other : inFlight) {
      if (other.instruction->stream == instruction.stream)
        continue;
      bool serialised = !instruction.transfer && !other.instruction->transfer;
      bool ordered = other.instruction->ordersCollectives &&
                     overlapsAny(other.instruction->ranges, instruction.ranges);
      if (serialised || ordered)
        plan.streamWaits[i].push_back(other.event);
    }
    inFlight.push_back({plan.event[i], &instruction});
  }
  for (const InFlight &remaining : inFlight)
    (carried[remaining.instruction - code.data()] ? plan.carriedEvents
                                                  : plan.finalWaits)
        .push_back(remaining.event);
  return plan;
}

} // namespace partition::runtime::cuda

#endif // PARTITION_RUNTIME_CUDA_STREAMPLAN_H
