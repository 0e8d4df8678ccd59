//===- partition-run.cpp - train with a compiled .ptp program -------------===//
//
//   partition-run model.ptp --steps 200 --lr 1e-3 --metrics-out m.jsonl
//   mpirun -n 2 partition-run dp2.ptp ...     (or: partition-run --nproc 2 ...)
//
// Hand-parsed options: the runtime links no LLVM, so that it can be carried
// to machines that have none.
//
//===----------------------------------------------------------------------===//

#include "runtime/Program.h"
#include "runtime/Trainer.h"
#include "tools/partition-run/Launch.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
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
  --data FILE          uint16 tokens: an llm.c shard (header of 256 int32,
                       magic 20240520) or a raw nanoGPT .bin
  --data-format F      auto | llmc | raw (default auto)
  --text FILE          train on a text file, one token per byte
                       (default data: a built-in synthetic language whose
                       entropy rate, the loss floor, is known)
  --eval-every N       held-out loss every N steps, 0 = never (default 10)
  --eval-batches N     batches per evaluation (default 2)
  --eval-fraction X    held-out share of --data / --text (default 0.1)
  --metrics-out FILE   one JSON object per step (step, loss, lr, step_ms,
                       tokens_per_s, eval_loss), then a summary
  --save DIR           write a checkpoint at the end (and every
                       --save-every N steps)
  --resume DIR         continue from a checkpoint
  --stop-after N       stop after step N (saving with --save), keeping the
                       learning-rate schedule of --steps, to resume later
  --backend B          auto (default): CUDA when this build has the CUDA
                       backend and a GPU is visible, else the CPU; cpu;
                       cuda: the CUDA backend or an error naming why not
                       (no usable device, or a build without CUDA). With
                       CUDA each rank uses device (node-local rank % GPUs)
                       and NCCL for the program's collectives
  --quiet              no progress lines

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
  writes --metrics-out and --save; every rank reads --resume. An error on
  one rank, or a lost rank, ends every rank with a non-zero exit code.
)";

[[noreturn]] void usageError(const std::string &message) {
  std::fprintf(stderr, "partition-run: error: %s\n(run partition-run --help)\n",
               message.c_str());
  std::exit(2);
}

int64_t parseInt(const std::string &flag, const std::string &text) {
  char *end = nullptr;
  long long value = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0')
    usageError(flag + " expects an integer, got '" + text + "'");
  return value;
}

double parseDouble(const std::string &flag, const std::string &text) {
  char *end = nullptr;
  double value = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0')
    usageError(flag + " expects a number, got '" + text + "'");
  return value;
}

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
  auto integer = [](int64_t &field, const char *flag) -> Setter {
    return [&field, flag](const std::string &v) { field = parseInt(flag, v); };
  };
  auto number = [](double &field, const char *flag) -> Setter {
    return [&field, flag](const std::string &v) {
      field = parseDouble(flag, v);
    };
  };
  auto text = [](std::string &field) -> Setter {
    return [&field](const std::string &v) { field = v; };
  };
  std::map<std::string, Setter> withValue = {
      {"--steps", integer(options.steps, "--steps")},
      {"--lr", number(options.lr, "--lr")},
      {"--warmup", integer(options.warmup, "--warmup")},
      {"--min-lr-ratio", number(options.minLrRatio, "--min-lr-ratio")},
      {"--seed",
       [&](const std::string &v) {
         options.seed = static_cast<uint64_t>(parseInt("--seed", v));
       }},
      {"--data", text(options.data)},
      {"--data-format", text(options.dataFormat)},
      {"--backend", text(options.backend)},
      {"--text", text(options.text)},
      {"--eval-every", integer(options.evalEvery, "--eval-every")},
      {"--eval-batches", integer(options.evalBatches, "--eval-batches")},
      {"--eval-fraction", number(options.evalFraction, "--eval-fraction")},
      {"--metrics-out", text(options.metricsOut)},
      {"--save", text(options.save)},
      {"--save-every", integer(options.saveEvery, "--save-every")},
      {"--resume", text(options.resume)},
      {"--stop-after", integer(options.stopAfter, "--stop-after")},
      {"--nproc", integer(line.nproc, "--nproc")},
      {"--comm-timeout",
       number(options.commTimeoutSeconds, "--comm-timeout")},
  };
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
    std::string value;
    bool inlineValue = false;
    if (size_t eq = arg.find('='); arg.rfind("--", 0) == 0 && eq != std::string::npos) {
      value = arg.substr(eq + 1);
      arg = arg.substr(0, eq);
      inlineValue = true;
    }
    auto setter = withValue.find(arg);
    if (setter != withValue.end()) {
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
  if (options.steps < 1)
    usageError("--steps must be at least 1");
  if (!(options.lr > 0))
    usageError("--lr must be positive");
  if (options.evalEvery < 0 || options.evalBatches < 0 || options.saveEvery < 0 ||
      options.stopAfter < 0)
    usageError("--eval-every, --eval-batches, --save-every and --stop-after "
               "cannot be negative");
  if (options.backend != "auto" && options.backend != "cpu" &&
      options.backend != "cuda")
    usageError("--backend must be auto, cpu or cuda, got '" +
               options.backend + "'");
  if (!(options.evalFraction > 0 && options.evalFraction < 1))
    usageError("--eval-fraction must be in (0, 1)");
  if (!(options.commTimeoutSeconds > 0))
    usageError("--comm-timeout must be positive");
  if (line.nprocGiven && (line.nproc < 1 || line.nproc > (1 << 20)))
    usageError("--nproc must be between 1 and 1048576");
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
    rt::train(placed, program, *world);
  } catch (const std::exception &error) {
    if (world->size() == 1)
      return fail(error.what());
    // The other ranks would wait for this one at its next collective.
    fail("rank " + std::to_string(world->rank()) + ": " + error.what());
    partition::run::abortJob(1);
  }
  return 0;
}
