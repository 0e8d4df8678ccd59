//===- Schedule.h - pipeline schedules as per-stage action lists -*- C++ -*-===//
//
// A pipeline schedule is data: for each stage, the ordered list of what it
// computes, F(mb, chunk) / B(mb, chunk) / W(mb, chunk). B is the input
// gradient (what the previous stage waits for) and W the weight gradient
// (what nobody waits for), as the xfmr ops split the backward. Every
// schedule uses this one vocabulary: those that do not split the backward
// (gpipe, 1f1b, interleaved-1f1b) emit W right after its B, so a stage
// still sends its input gradient as soon as B is done.
//
// Chunks: with v virtual stages per stage the model is cut into p * v
// chunks; chunk c on stage s is model chunk c * p + s (Megatron's
// interleaving), so a forward leaves stage p - 1 for stage 0 between chunks.
//
// Plain C++ (no MLIR, no LLVM): the --dist-pipeline pass, the planner and
// the partition-schedule CLI share it.
//
//===----------------------------------------------------------------------===//

#ifndef PARTITION_SCHEDULING_SCHEDULE_H
#define PARTITION_SCHEDULING_SCHEDULE_H

#include "support/OrError.h"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace partition::pipeline {

enum class ScheduleKind { GPipe, OneFOneB, Interleaved1F1B, ZeroBubbleH1 };

/// The plan's spelling: "gpipe", "1f1b", "interleaved-1f1b", "zero-bubble".
std::string_view scheduleName(ScheduleKind kind);
std::optional<ScheduleKind> parseScheduleKind(std::string_view name);
/// "gpipe, 1f1b, interleaved-1f1b, zero-bubble", for messages.
std::string scheduleNames();

enum class ActionKind : std::uint8_t { Forward, BackwardInput, BackwardWeight };

struct Action {
  ActionKind kind;
  int microbatch;
  int chunk; // local chunk on its stage, 0 <= chunk < v
  bool operator==(const Action &other) const {
    return kind == other.kind && microbatch == other.microbatch &&
           chunk == other.chunk;
  }
  bool operator!=(const Action &other) const { return !(*this == other); }
};

/// "F", "B" or "W".
char actionLetter(ActionKind kind);
/// "F3" with one chunk per stage, "F3.1" (micro-batch 3, chunk 1) with more.
std::string formatAction(const Action &action, int chunks);

struct ScheduleConfig {
  ScheduleKind kind = ScheduleKind::OneFOneB;
  int stages = 1;       // mesh.pp
  int microbatches = 1; // pipeline.microbatches
  int chunks = 1;       // pipeline.virtual_stages
  /// Layers of the model when known (the pass knows them, the CLI may
  /// not): checked against stages * chunks. 0 = unknown, not checked.
  int layers = 0;
};

struct Schedule {
  ScheduleConfig config;
  /// actions[s]: what stage s runs, in order.
  std::vector<std::vector<Action>> actions;

  int stages() const { return config.stages; }
  int chunks() const { return config.chunks; }
  int microbatches() const { return config.microbatches; }
  /// The model chunk (0 .. p*v-1) that local chunk `chunk` of `stage` is.
  int modelChunk(int stage, int chunk) const {
    return chunk * config.stages + stage;
  }
};

/// Checks the combination of numbers; the message names the plan fields
/// and their values (issue 12, point 8).
std::optional<std::string> validateConfig(const ScheduleConfig &config);

/// Each stage's action list for `config`, or why the numbers do not allow
/// the schedule.
OrError<Schedule> generateSchedule(const ScheduleConfig &config);

} // namespace partition::pipeline

#endif // PARTITION_SCHEDULING_SCHEDULE_H
