//===- PipelineReport.cpp - bubble, per-stage figures, the picture --------===//

#include "passes/pipeline/PipelineReport.h"

#include "dialects/Xfmr/XfmrOps.h"
#include "passes/frontend/StepEntries.h"
#include "passes/pipeline/PipelineInfo.h"
#include "scheduling/ScheduleCheck.h"
#include "scheduling/ScheduleSvg.h"
#include "passes/pipeline/StageAnalysis.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/Support/Format.h"

#include <algorithm>

using namespace mlir;

namespace partition::pipeline {
namespace {

struct Simulated {
  PipelineInfo info;
  Schedule schedule;
  Timeline timeline;
};

FailureOr<Simulated> simulateModule(ModuleOp module) {
  std::optional<PipelineInfo> info = readPipelineInfo(module);
  if (!info)
    return module.emitError()
           << "the module is not cut into pipeline stages (no valid "
           << kPipelineInfoAttrName << "); plan mesh.pp > 1";
  OrError<Schedule> schedule = info->generate();
  if (!schedule)
    return module.emitError() << schedule.error();
  // Costs in units of the mean forward of a chunk (FLOPs and bytes are
  // large numbers; the picture draws one unit as a fixed width). The
  // bubble fraction does not depend on the unit.
  double unit = 0;
  for (double forward : info->forward)
    unit += forward / info->forward.size();
  if (!(unit > 0))
    unit = 1;
  SimulationOptions options;
  const PipelineInfo &record = *info;
  options.cost = [&record, unit](int stage, const Action &action) {
    return record.cost(stage, action) / unit;
  };
  OrError<Timeline> timeline = simulate(*schedule, options);
  if (!timeline)
    return module.emitError() << timeline.error();
  return Simulated{*info, *schedule, *timeline};
}

} // namespace

LogicalResult printPipelineReport(ModuleOp module, llvm::raw_ostream &os) {
  FailureOr<Simulated> simulated = simulateModule(module);
  if (failed(simulated))
    return failure();
  const PipelineInfo &info = simulated->info;
  const Schedule &schedule = simulated->schedule;
  double equal = 0;
  SimulationOptions unit;
  if (OrError<Timeline> timeline = simulate(schedule, unit))
    equal = timeline->bubbleFraction();
  os << "pipeline: " << info.schedule << ", " << info.stages << " stages";
  if (info.virtualStages > 1)
    os << " x " << info.virtualStages << " chunks";
  os << ", " << info.microbatches << " micro-batches: bubble "
     << llvm::format("%.1f", 100 * simulated->timeline.bubbleFraction())
     << "% of the step (simulated with the stages' costs; "
     << llvm::format("%.1f", 100 * equal) << "% with equal costs)\n";

  std::vector<int> inFlight = peakInFlight(schedule);
  // Layers of each model chunk.
  std::vector<int> firstLayer(info.chunks() + 1, 0);
  for (int c = 0; c < info.chunks(); ++c)
    firstLayer[c + 1] = firstLayer[c] + info.chunkLayers[c];
  for (int s = 0; s < info.stages; ++s) {
    func::FuncOp step;
    for (auto function : module.getOps<func::FuncOp>())
      if (function->hasAttr(xfmr::XfmrDialect::kTrainStepAttrName))
        if (auto stage = function->getAttrOfType<IntegerAttr>(
                kPipelineStageAttrName);
            stage && stage.getInt() == s)
          step = function;
    os << "stage " << s << ": layers ";
    for (int c = 0; c < info.virtualStages; ++c) {
      int chunk = c * info.stages + s;
      if (c)
        os << ", ";
      int first = firstLayer[chunk], last = firstLayer[chunk + 1] - 1;
      os << first;
      if (last != first)
        os << "-" << last;
    }
    int64_t flops = 0, paramBytes = 0;
    llvm::SmallVector<std::string> tied;
    if (step) {
      step.walk([&](xfmr::MatmulFlopsOpInterface op) {
        flops += op.getMatmulFlops().value_or(0);
      });
      // A step that compiles some of its micro-batches (a loop, a walk)
      // runs every one of them.
      if (std::optional<pipeline::LoopLayout> loop = recordedLoop(step);
          loop && loop->compiled > 0)
        flops = flops / loop->compiled * loop->microbatches;
      for (BlockArgument arg : step.getArguments())
        if (auto name = step.getArgAttrOfType<StringAttr>(
                arg.getArgNumber(), xfmr::XfmrDialect::kParamAttrName)) {
          paramBytes += valueBytes(arg);
          if (llvm::is_contained(info.tied, name.str()))
            tied.push_back(name.str());
        }
    }
    int64_t perMicrobatch = 0;
    for (int c = 0; c < info.virtualStages; ++c)
      perMicrobatch = std::max(
          perMicrobatch, info.activationBytes[c * info.stages + s]);
    int held = s < static_cast<int>(inFlight.size()) ? inFlight[s] : 0;
    os << ", " << flops << " FLOPs per step, parameters " << paramBytes
       << " bytes, activations " << perMicrobatch * held
       << " bytes at peak (" << held << " micro-batch"
       << (info.virtualStages > 1 ? " chunk" : "")
       << (held == 1 ? "" : info.virtualStages > 1 ? "s" : "es")
       << " in flight)";
    for (const std::string &name : tied)
      os << "; holds a copy of the tied " << name
         << " (held twice, updated identically)";
    os << "\n";
  }
  return success();
}

FailureOr<std::string> pipelineScheduleSvg(ModuleOp module) {
  FailureOr<Simulated> simulated = simulateModule(module);
  if (failed(simulated))
    return failure();
  return scheduleSvg(simulated->schedule, simulated->timeline);
}

} // namespace partition::pipeline
