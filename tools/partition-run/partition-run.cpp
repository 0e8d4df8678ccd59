//===- partition-run.cpp - train with a compiled .ptp program -------------===//
//
//   partition-run model.ptp --steps 200 --lr 1e-3 --metrics-out m.jsonl
//   mpirun -n 2 partition-run dp2.ptp ...     (or: partition-run --nproc 2 ...)
//
// Hand-parsed options: the runtime links no LLVM, so that it can be carried
// to machines that have none.
//
//===----------------------------------------------------------------------===//

#include "runtime/backend/cpu/BlasCore.h"
#include "runtime/train/Interrupt.h"
#include "runtime/program/Program.h"
#include "runtime/train/Trainer.h"
#include "runtime/data/TokenData.h"
#include "tools/partition-run/Launch.h"

#include <cctype>
#include <cerrno>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

using partition::runtime::TrainOptions;

namespace {

const char *kUsage = R"(usage: partition-run PROGRAM.ptp [options]

Trains the model of a program compiled by partition-compile.

  --steps N            optimizer steps (default 20)
  --lr X               peak learning rate (default 1e-3)
  --warmup N           linear warm-up steps (default: 10% of the steps),
                       then cosine decay
  --min-lr-ratio X     final learning rate / peak (default 0.1)
  --seed S             parameter initialisation seed (default 1337)
  --data FILE          token ids: an llm.c shard (header of 256 int32;
                       uint16 ids under magic 20240520, uint32 under
                       20240801, llm.c's Llama 3 shards), a raw nanoGPT
                       uint16 .bin, raw uint32, or a .npy array of uint16,
                       uint32 or int32; every id is checked against the
                       vocabulary
  --data-format F      auto | llmc | raw | raw32 | npy (default auto: an
                       llm.c or .npy header, else raw uint16; raw32 is
                       never guessed)
  --text FILE          train on a text file, one token per byte
                       (default data: a built-in synthetic language whose
                       entropy rate, the loss floor, is known)
  --eval-every N       held-out loss every N steps, 0 = never (default 10)
  --eval-batches N     batches per evaluation (default 2; with --evaluate,
                       every whole batch of the data)
  --eval-fraction X    held-out share of --data / --text (default 0.1)
  --metrics-out FILE   one JSON object per step (step, loss, lr, step_ms,
                       tokens_per_s, eval_loss), then a summary
  --trace FILE         write a Chrome / Perfetto trace of what ran (JSON,
                       open it in ui.perfetto.dev): one track per rank, a
                       span per instruction (kernel, or collective / send /
                       recv with its label and bytes; a recv's span covers
                       its wait); rank 0 gathers every rank's spans
  --trace-steps A:B    trace steps A to B only (1-based, inclusive; A: from
                       A to the end), each with its evaluation: a long
                       run's trace without every step's spans in memory
  --save DIR           write a checkpoint at the end (and every
                       --save-every N steps)
  --resume DIR         continue from a checkpoint
  --init-from DIR      start from a checkpoint's weights (partition-import
                       writes one) with a fresh optimizer, step 0 and the
                       data from its start: fine-tuning
  --evaluate           update nothing: print the mean loss and perplexity
                       of --eval-batches batches from the start of --data
                       or --text (all of it is evaluation data; without
                       either, the built-in language's held-out stream),
                       at the state of --init-from, --resume or --seed;
                       --metrics-out gets one record with eval_loss and
                       perplexity
  --dump-logits F.npz  update nothing: write the first batch of --data /
                       --text (as --evaluate reads it) to F.npz with numpy's
                       layout: input_ids and targets (int32, batch x seq)
                       and logits (fp32, batch x seq x vocab, gathered from
                       every rank in logical order); needs a program
                       compiled with partition-compile --logits. With
                       --evaluate, both
  --stop-after N       stop after step N (saving with --save), keeping the
                       learning-rate schedule of --steps, to resume later
  --offload-path DIR   a program compiled with "offload": {"optimizer":
                       "nvme"}: put each rank's offload file in DIR instead
                       of the plan's offload.path (files of dead runs there
                       are removed first)
  --backend B          auto (default): CUDA when this build has the CUDA
                       backend and a GPU is visible, else the CPU; cpu;
                       cuda: the CUDA backend or an error naming why not
                       (no usable device, or a build without CUDA). With
                       CUDA each rank uses device (node-local rank % GPUs)
                       and NCCL for the program's collectives
  --force              let --save replace a checkpoint of another kind (a
                       weights-only import not given as --init-from, or a
                       file that is not a checkpoint)
  --quiet              no progress lines

SIGINT or SIGTERM (Ctrl-C, a scheduler's preemption) ends the run after its
current step: the checkpoint is saved (with --save), the metrics summary
written, one line says so, and the exit code is 130 / 143; a second signal
exits at once. Exit codes: 0 done (also when a --resume checkpoint has
already reached --steps: one line says so), 1 a bad input file or a failed
run, 2 a bad command line (one line naming the option and its range).

Many ranks (a program compiled with --plan for a mesh of N devices):
  --nproc N            launch the N ranks on this machine: re-runs this
                       command as mpirun -n N partition-run ... (mpirun
                       from $PARTITION_MPIRUN or PATH; --oversubscribe
                       when N exceeds the cores; OMP_NUM_THREADS = cores/N
                       unless set) and exits with mpirun's status
  --comm-timeout S     abort the job when a collective waits more than S
                       seconds for a peer (default 300)
  Or start it with a launcher: mpirun -n N partition-run PROGRAM.ptp ...,
  srun -n N --mpi=pmix partition-run PROGRAM.ptp ... Rank 0 alone prints,
  writes --metrics-out and --save; every rank reads --resume and
  --init-from. An error on one rank, or a lost rank, ends every rank with a
  non-zero exit code.
)";

/// A usage error: one line, exit code 2 (bad files and failed runs exit 1),
/// the convention of every partition tool.
[[noreturn]] void usageError(const std::string &message) {
  std::fprintf(stderr, "partition-run: error: %s (see partition-run --help)\n",
               message.c_str());
  std::exit(2);
}

/// Step counts (--steps, --warmup, --eval-every, --save-every,
/// --stop-after): the program counts steps in an int32 (AdamW's bias
/// correction), so a larger one could never run.
constexpr int64_t kMaxSteps = std::numeric_limits<int32_t>::max();

/// strto* accept leading blanks and, for unsigned, a minus sign that wraps
/// around: neither is a number on a command line.
bool startsLikeANumber(const std::string &text, bool allowSign) {
  if (text.empty() || std::isspace(static_cast<unsigned char>(text[0])))
    return false;
  return allowSign || text[0] != '-';
}

int64_t parseInt(const std::string &flag, const std::string &text,
                 int64_t min, int64_t max) {
  std::string range =
      "[" + std::to_string(min) + ", " + std::to_string(max) + "]";
  char *end = nullptr;
  errno = 0;
  long long value = std::strtoll(text.c_str(), &end, 10);
  if (!startsLikeANumber(text, true) || *end != '\0')
    usageError(flag + " expects an integer in " + range + ", got '" + text +
               "'");
  if (errno == ERANGE || value < min || value > max)
    usageError(flag + " must be an integer in " + range + ", got " + text);
  return value;
}

uint64_t parseUnsigned(const std::string &flag, const std::string &text) {
  std::string range =
      "[0, " + std::to_string(std::numeric_limits<uint64_t>::max()) + "]";
  char *end = nullptr;
  errno = 0;
  unsigned long long value = std::strtoull(text.c_str(), &end, 10);
  if (!startsLikeANumber(text, false) || *end != '\0')
    usageError(flag + " expects an integer in " + range + ", got '" + text +
               "'");
  if (errno == ERANGE)
    usageError(flag + " must be an integer in " + range + ", got " + text);
  return value;
}

/// A finite number in the interval `range` describes (low and high, each
/// open or closed); inf, nan and overflowing values are refused.
struct Interval {
  double low, high;
  bool lowOpen, highOpen;
  std::string text;
  /// Used as fp32: also checked after conversion to float (finite, and not
  /// zero unless zero was given).
  bool fp32 = false;
};

double parseDouble(const std::string &flag, const std::string &text,
                   const Interval &range) {
  char *end = nullptr;
  errno = 0;
  double value = std::strtod(text.c_str(), &end);
  if (!startsLikeANumber(text, true) || *end != '\0')
    usageError(flag + " expects a number in " + range.text + ", got '" + text +
               "'");
  bool inside = std::isfinite(value) && errno != ERANGE &&
                (range.lowOpen ? value > range.low : value >= range.low) &&
                (range.highOpen ? value < range.high : value <= range.high);
  // A value used in fp32 must survive the conversion: 1e40 becomes inf,
  // 1e-50 zero.
  if (inside && range.fp32)
    inside = std::isfinite(static_cast<float>(value)) &&
             (value == 0 || static_cast<float>(value) != 0);
  if (!inside)
    usageError(flag + " must be a finite number in " + range.text + ", got " +
               text);
  return value;
}

const double kInfinity = std::numeric_limits<double>::infinity();

struct CommandLine {
  TrainOptions options;
  /// --nproc; 0: not given.
  int64_t nproc = 0;
  bool nprocGiven = false;
  /// The arguments without --nproc, for the relaunched ranks.
  std::vector<std::string> forwarded;
};

CommandLine parse(int argc, char **argv) {
  CommandLine line;
  TrainOptions &options = line.options;
  using Setter = std::function<void(const std::string &)>;
  auto integer = [](int64_t &field, const char *flag, int64_t min,
                    int64_t max) -> Setter {
    return [&field, flag, min, max](const std::string &v) {
      field = parseInt(flag, v, min, max);
    };
  };
  auto number = [](double &field, const char *flag,
                   Interval range) -> Setter {
    return [&field, flag, range](const std::string &v) {
      field = parseDouble(flag, v, range);
    };
  };
  auto text = [](std::string &field) -> Setter {
    return [&field](const std::string &v) { field = v; };
  };
  std::map<std::string, Setter> withValue = {
      {"--steps", integer(options.steps, "--steps", 1, kMaxSteps)},
      // The step computes in fp32: the largest float bounds the rate, the
      // smallest positive one (1.4e-45) is checked after conversion.
      {"--lr", number(options.lr, "--lr",
                      {0, std::numeric_limits<float>::max(), true, false,
                       "(0, 3.4e38] (it is used in fp32)", /*fp32=*/true})},
      {"--warmup", integer(options.warmup, "--warmup", 0, kMaxSteps)},
      {"--min-lr-ratio", number(options.minLrRatio, "--min-lr-ratio",
                                {0, 1, false, false, "[0, 1]"})},
      {"--seed",
       [&](const std::string &v) { options.seed = parseUnsigned("--seed", v); }},
      {"--data", text(options.data)},
      {"--data-format", text(options.dataFormat)},
      {"--backend", text(options.backend)},
      {"--text", text(options.text)},
      {"--eval-every", integer(options.evalEvery, "--eval-every", 0, kMaxSteps)},
      {"--eval-batches",
       [&](const std::string &v) {
         options.evalBatches = parseInt("--eval-batches", v, 0, 1 << 20);
         options.evalBatchesGiven = true;
       }},
      {"--eval-fraction", number(options.evalFraction, "--eval-fraction",
                                 {0, 1, true, true, "(0, 1)"})},
      {"--metrics-out", text(options.metricsOut)},
      {"--save", text(options.save)},
      {"--trace", text(options.trace)},
      {"--trace-steps",
       [&](const std::string &v) {
         // FIRST:LAST, or FIRST: to the end.
         size_t colon = v.find(':');
         if (colon == std::string::npos)
           usageError("--trace-steps expects FIRST:LAST (or FIRST: for "
                      "every step from FIRST on), got '" + v + "'");
         options.traceFirst = parseInt("--trace-steps' first step",
                                       v.substr(0, colon), 1, kMaxSteps);
         std::string last = v.substr(colon + 1);
         options.traceLast =
             last.empty() ? 0
                          : parseInt("--trace-steps' last step", last,
                                     options.traceFirst, kMaxSteps);
       }},
      {"--save-every", integer(options.saveEvery, "--save-every", 0, kMaxSteps)},
      {"--resume", text(options.resume)},
      {"--init-from", text(options.initFrom)},
      {"--dump-logits", text(options.dumpLogits)},
      {"--offload-path", text(options.offloadPath)},
      {"--stop-after", integer(options.stopAfter, "--stop-after", 0, kMaxSteps)},
      {"--nproc", integer(line.nproc, "--nproc", 1, 1 << 20)},
      // Seconds; a week bounds what a deadline can hold without overflow.
      {"--comm-timeout", number(options.commTimeoutSeconds, "--comm-timeout",
                                {0, 604800, true, false, "(0, 604800]"})},
  };
  std::set<std::string> given; // the options with a value on the line
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      std::fputs(kUsage, stdout);
      std::exit(0);
    }
    if (arg == "--quiet") {
      options.quiet = true;
      line.forwarded.push_back(argv[i]);
      continue;
    }
    if (arg == "--force") {
      options.force = true;
      line.forwarded.push_back(argv[i]);
      continue;
    }
    if (arg == "--evaluate") {
      options.evaluate = true;
      line.forwarded.push_back(argv[i]);
      continue;
    }
    std::string value;
    bool inlineValue = false;
    if (size_t eq = arg.find('='); arg.rfind("--", 0) == 0 && eq != std::string::npos) {
      value = arg.substr(eq + 1);
      arg = arg.substr(0, eq);
      inlineValue = true;
    }
    auto setter = withValue.find(arg);
    if (setter != withValue.end()) {
      given.insert(arg);
      int first = i;
      if (!inlineValue) {
        if (i + 1 >= argc)
          usageError(arg + " expects a value");
        value = argv[++i];
      }
      setter->second(value);
      if (arg == "--nproc")
        line.nprocGiven = true;
      else
        line.forwarded.insert(line.forwarded.end(), argv + first,
                              argv + i + 1);
      continue;
    }
    if (arg.rfind("-", 0) == 0)
      usageError("unknown option " + arg);
    if (!options.program.empty())
      usageError("more than one program given ('" + options.program +
                 "' and '" + arg + "')");
    options.program = arg;
    line.forwarded.push_back(arg);
  }
  if (options.program.empty())
    usageError("no program given");
  // Ranges that depend on another option.
  if (options.evaluate && options.evalBatchesGiven &&
      options.evalBatches == 0)
    usageError("--evaluate with --eval-batches 0 evaluates nothing; give "
               "--eval-batches in [1, 1048576], or leave it out to evaluate "
               "every whole batch of the data");
  const char *inspecting = options.evaluate ? "--evaluate" : "--dump-logits";
  if (options.inspects() && !options.save.empty())
    usageError(std::string(inspecting) +
               " updates nothing, so --save would write the weights it "
               "started from; leave out --save");
  // The options of training alone would do nothing: refused, as inert
  // plan fields are, rather than silently ignored.
  if (options.inspects())
    for (const char *training :
         {"--steps", "--stop-after", "--lr", "--warmup", "--min-lr-ratio",
          "--save-every", "--eval-every", "--trace-steps"})
      if (given.count(training))
        usageError(std::string(inspecting) + " trains no steps; leave out " +
                   training);
  if (options.evalEvery > 0 && options.evalBatches == 0 && !options.evaluate)
    usageError("--eval-batches 0 evaluates nothing every " +
               std::to_string(options.evalEvery) +
               " steps; give --eval-batches in [1, 1048576], or --eval-every "
               "0 to turn evaluation off");
  if (options.backend != "auto" && options.backend != "cpu" &&
      options.backend != "cuda")
    usageError("--backend must be auto, cpu or cuda, got '" +
               options.backend + "'");
  try {
    (void)partition::runtime::data::parseFormat(options.dataFormat);
  } catch (const std::exception &error) {
    usageError(std::string("--data-format: ") + error.what());
  }
  if (given.count("--trace-steps") && options.trace.empty())
    usageError("--trace-steps chooses the steps of a trace; give --trace "
               "FILE too");
  if (!options.inspects() && options.traceFirst > options.steps)
    usageError("--trace-steps starts at step " +
               std::to_string(options.traceFirst) + ", after the last of " +
               "--steps " + std::to_string(options.steps) +
               "; give a window within the run");
  if (options.saveEvery > 0 && options.save.empty())
    usageError("--save-every " + std::to_string(options.saveEvery) +
               " saves nothing without --save DIR; give --save DIR, or "
               "leave out --save-every");
  if (!options.data.empty() && !options.text.empty())
    usageError("give --data or --text, not both");
  if (!options.resume.empty() && !options.initFrom.empty())
    usageError("give --resume (continue a run) or --init-from (start from "
               "its weights), not both");
  if (line.nproc > 0 && partition::run::launchedByLauncher())
    usageError("--nproc launches the ranks itself; under mpirun or srun "
               "leave it out");
  return line;
}

int fail(const std::string &message) {
  std::fprintf(stderr, "partition-run: error: %s\n", message.c_str());
  return 1;
}

} // namespace

int main(int argc, char **argv) {
  namespace rt = partition::runtime;
  // First: may restart this process with better OpenBLAS kernels (before
  // MPI, threads or any output; each rank under mpirun restarts in place).
  rt::cpu::ensureBestBlasCore(argv);
  CommandLine line = parse(argc, argv);
  const TrainOptions &options = line.options;

  // The program says how many ranks it needs: check before launching them.
  rt::Program program;
  try {
    program = rt::Program::load(options.program);
    if (line.nproc > 0)
      rt::checkWorldSize(program, options.program, int(line.nproc));
  } catch (const std::exception &error) {
    return fail(error.what());
  }
  if (line.nproc > 1)
    return fail(partition::run::relaunchUnderMpirun(int(line.nproc),
                                                    line.forwarded));

  std::unique_ptr<rt::comm::Communicator> world;
  try {
    world = partition::run::openWorld(partition::run::launchedByLauncher(),
                                      options.commTimeoutSeconds, &argc,
                                      &argv);
  } catch (const std::exception &error) {
    return fail(error.what());
  }
  // After MPI_Init, so that these handlers are the ones in place: the first
  // SIGINT / SIGTERM stops the run after its current step, on every rank.
  rt::installInterruptHandlers();
  // A write past a file-size limit (ulimit -f) then fails with EFBIG, as a
  // full disk fails with ENOSPC: one line naming the file, not a signal
  // that kills the rank with a core dump.
  std::signal(SIGXFSZ, SIG_IGN);
  try {
    rt::checkWorldSize(program, options.program, world->size());
  } catch (const std::exception &error) {
    // Every rank reaches the same verdict and says so; the barrier keeps
    // mpirun from killing a rank (at the first non-zero exit) before it has.
    fail(error.what());
    std::fflush(stderr);
    world->barrier({"world size check"});
    return 1;
  }
  try {
    TrainOptions placed = options;
    partition::run::NodeRanks node = partition::run::nodeRanks(*world);
    placed.nodeRank = node.rank;
    placed.nodeRanks = node.size;
    rt::TrainResult result = rt::train(placed, program, *world);
    if (result.failedOnLeader)
      return 1;
    // As a shell reports a process its signal ended: 130, 143.
    if (result.interruptedBy)
      return 128 + result.interruptedBy;
  } catch (const std::exception &error) {
    if (world->size() == 1)
      return fail(error.what());
    // The other ranks would wait for this one at its next collective.
    fail("rank " + std::to_string(world->rank()) + ": " + error.what());
    partition::run::abortJob(1);
  }
  return 0;
}
