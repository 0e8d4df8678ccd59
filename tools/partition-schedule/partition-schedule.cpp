//===- partition-schedule.cpp - print, check and draw a pipeline schedule -===//
//
//   partition-schedule --stages 4 --microbatches 8 --schedule 1f1b \
//       [--virtual 2] [--layers N] [--svg FILE]
//
// Prints each stage's actions, proves that the streams finish (the checker
// of scheduling/ScheduleCheck.h), and prints the step time, the bubble
// fraction and the peak in-flight micro-batches under per-action costs;
// --svg draws the timeline. The flags are the plan's fields: --stages is
// mesh.pp, --microbatches pipeline.microbatches, --virtual
// pipeline.virtual_stages, and the messages name them so.
//
//===----------------------------------------------------------------------===//

#include "scheduling/Schedule.h"
#include "scheduling/ScheduleCheck.h"
#include "scheduling/ScheduleSvg.h"
#include "tools/common/CommandLine.h"

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/raw_ostream.h"

#include <cmath>
#include <cstdio>

using namespace partition::pipeline;
namespace cl = llvm::cl;

namespace {

constexpr const char *kTool = "partition-schedule";

cl::OptionCategory category("partition-schedule options");
cl::opt<int> stages("stages", cl::desc("Pipeline stages (mesh.pp)"),
                    cl::init(4), cl::cat(category));
cl::opt<int> microbatches("microbatches",
                          cl::desc("Micro-batches per step "
                                   "(pipeline.microbatches)"),
                          cl::init(8), cl::cat(category));
cl::opt<std::string> scheduleName_(
    "schedule",
    cl::desc("gpipe | 1f1b | interleaved-1f1b | zero-bubble "
             "(pipeline.schedule)"),
    cl::init("1f1b"), cl::cat(category));
cl::opt<int> virtualStages("virtual",
                           cl::desc("Chunks per stage, interleaved-1f1b only "
                                    "(pipeline.virtual_stages)"),
                           cl::init(1), cl::cat(category));
cl::opt<int> layers("layers",
                    cl::desc("Layers of the model, checked against "
                             "stages x virtual (default: not checked)"),
                    cl::init(0), cl::cat(category));
cl::opt<double> forwardCost("forward-cost", cl::desc("Time of one F"),
                            cl::init(1.0), cl::cat(category));
cl::opt<double> backwardCost("backward-cost",
                             cl::desc("Time of one B (input gradient)"),
                             cl::init(1.0), cl::cat(category));
cl::opt<double> weightCost("weight-cost",
                           cl::desc("Time of one W (weight gradient); 0 "
                                    "models a backward that is not split"),
                           cl::init(1.0), cl::cat(category));
cl::opt<double> latency("latency",
                        cl::desc("Time from a send to its receive"),
                        cl::init(0.0), cl::cat(category));
cl::opt<bool> rendezvous(
    "rendezvous",
    cl::desc("Sends wait for their receiver (a blocking MPI_Ssend) instead "
             "of returning at once"),
    cl::cat(category));
cl::opt<std::string> svg("svg", cl::desc("Draw the timeline into this file"),
                         cl::value_desc("file.svg"), cl::cat(category));

void checkCost(const cl::opt<double> &option) {
  if (std::isfinite(option) && option >= 0)
    return;
  char value[32];
  std::snprintf(value, sizeof value, "%g", option.getValue());
  partition::tools::usageError(kTool, "--" + option.ArgStr +
                                          " must be a finite number in [0, "
                                          "inf), got " + value);
}

using partition::tools::fail;

} // namespace

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  cl::HideUnrelatedOptions(category);
  partition::tools::parseCommandLine(
      argc, argv,
      "partition-schedule: prints each pipeline stage's actions (F forward, "
      "B input gradient, W weight gradient; micro-batch.chunk), checks that "
      "they finish, and prints the bubble.\n");

  std::optional<ScheduleKind> kind = parseScheduleKind(scheduleName_);
  if (!kind)
    partition::tools::usageError(kTool, "unknown schedule '" + scheduleName_ +
                                            "'; expected one of " +
                                            scheduleNames());
  for (const cl::opt<double> *cost :
       {&forwardCost, &backwardCost, &weightCost, &latency})
    checkCost(*cost);

  auto schedule = generateSchedule(
      {*kind, stages, microbatches, virtualStages, layers});
  if (!schedule)
    partition::tools::usageError(kTool, schedule.error());

  SimulationOptions options;
  options.cost = uniformCosts(forwardCost, backwardCost, weightCost);
  options.p2pLatency = latency;
  options.sendMode = rendezvous ? SendMode::Rendezvous : SendMode::Buffered;
  auto timeline = simulate(*schedule, options);
  if (!timeline)
    return fail(timeline.error());

  // The picture first: a file that cannot be written fails the command
  // before anything is printed.
  if (!svg.empty()) {
    std::error_code error;
    llvm::raw_fd_ostream file(svg, error, llvm::sys::fs::OF_Text);
    if (error)
      return fail("cannot write " + svg + ": " + error.message());
    file << scheduleSvg(*schedule, *timeline);
    file.close();
    if (file.has_error())
      return fail("cannot write " + svg + ": " + file.error().message());
  }

  llvm::raw_ostream &os = llvm::outs();
  const int p = schedule->stages(), v = schedule->chunks();
  os << "schedule " << scheduleName(*kind) << ": " << p << " stages, "
     << schedule->microbatches() << " micro-batches, " << v
     << (v == 1 ? " chunk" : " chunks") << " per stage\n";
  for (int s = 0; s < p; ++s) {
    os << "stage " << s << ":";
    for (const Action &a : schedule->actions[s])
      os << " " << formatAction(a, v);
    os << "\n";
  }
  auto number = [](double x) { return llvm::format("%g", x); };
  os << "costs: F " << number(forwardCost) << ", B " << number(backwardCost)
     << ", W " << number(weightCost) << ", latency " << number(latency)
     << "\n";
  os << "step time: " << number(timeline->makespan) << "\n";
  os << "bubble: " << llvm::format("%.4f", timeline->bubbleFraction())
     << " (idle per stage:";
  for (int s = 0; s < p; ++s)
    os << " " << llvm::format("%.4f", timeline->idleFraction(s));
  os << ")\n";
  os << "peak in-flight micro-batches per stage:";
  for (int peak : peakInFlight(*schedule))
    os << " " << peak;
  os << "\n";

  if (!svg.empty())
    os << "wrote " << svg << "\n";
  return 0;
}
