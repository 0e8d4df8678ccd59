//===- RunLoop.cpp - a Run's steps: start-up, training, the summary -------===//
//
// Run::execute (TrainerRun.h) and the named steps it takes: start-up
// (data, then initialising, resuming or --init-from), the step loop (one
// training step, its loss agreed across stages and replicas, evaluation,
// metrics, stopping together, periodic checkpoints), the final checkpoint
// and the summary (every rank's peak memory, --metrics-out's last record).
// Trainer.cpp creates the Run; RunState.cpp initialises and checkpoints
// its state; RunMemory.cpp gathers and prints the ranks' peak memory;
// Logits.cpp dumps the logits (--dump-logits).
//
//===----------------------------------------------------------------------===//

#include "runtime/train/TrainerRun.h"

#include "runtime/backend/cpu/Bf16Gemm.h"
#include "runtime/backend/cpu/BlasCore.h"
#include "runtime/checkpoint/Checkpoint.h"
#include "runtime/data/DataError.h"
#include "runtime/data/SyntheticLanguage.h"
#include "runtime/train/Interrupt.h"
#include "runtime/train/MetricsFile.h"

#include <nlohmann/json.hpp>

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <limits>

namespace partition::runtime::detail {

namespace {

namespace ckpt = partition::runtime::checkpoint;

/// CPU time of this process (all its threads) so far, in ms: a step's
/// share measures its work on a machine shared with other processes, where
/// its wall time measures the load.
double processCpuMilliseconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return 1e3 * double(t.tv_sec) + 1e-6 * double(t.tv_nsec);
}

/// Whether the program computes in bf16 (then its first line and summary
/// say which engine runs the bf16 GEMMs).
bool hasBf16Buffers(const Program &program) {
  return std::any_of(program.buffers.begin(), program.buffers.end(),
                     [](const BufferInfo &b) { return b.dtype == DType::BF16; });
}

/// What to change when the held-out split is too small for one batch.
const char *const kEvalAdvice =
    "use more data, a smaller batch or sequence length, a larger "
    "--eval-fraction, or --eval-every 0 to evaluate nothing";

/// Tokens the built-in language generates for training and evaluation: a
/// fixed amount, so that runs of any length read the same data.
constexpr int64_t kSyntheticTrainTokens = 1 << 21;
constexpr int64_t kSyntheticEvalTokens = 1 << 16;

/// The training and held-out tokens; with --evaluate and a file, all of it
/// is held out (the file is the evaluation set).
data::Split loadData(const TrainOptions &options, int64_t vocab,
                     int64_t windowTokens) {
  if (!options.data.empty() && !options.text.empty())
    throw data::DataError("give --data or --text, not both");
  if (options.data.empty() && options.text.empty()) {
    data::SyntheticLanguage language(vocab);
    int64_t train = std::max(kSyntheticTrainTokens, 4 * windowTokens);
    int64_t eval = std::max(kSyntheticEvalTokens, 2 * windowTokens);
    return data::makeSyntheticSplit(language, train, eval);
  }
  auto stream = std::make_shared<data::TokenStream>(
      options.text.empty()
          ? data::readTokenFile(options.data,
                                data::parseFormat(options.dataFormat))
          : data::readTextFile(options.text));
  data::validateVocab(*stream, vocab);
  if (options.inspects())
    return {data::TokenRange(stream, 0, 0), data::TokenRange(stream)};
  return data::splitTrainEval(stream, options.evalFraction);
}

} // namespace

/// What execute()'s steps share: set by startUp and openOutputs, advanced
/// by the step loop, reported by finish.
struct Run::Session {
  /// One past the last step to run (--steps, or --stop-after).
  int64_t end = 0;
  bool canEvaluate = false;
  /// The functions of a step: train_step and, with NTP replicas, the
  /// optimizer's train_step_update (else train_step again).
  size_t step = 0, update = 0;
  const BufferInfo *lrBuffer = nullptr;
  std::unique_ptr<MetricsFile> metrics;
  /// The steps done so far.
  int64_t completed = 0;
  /// The agreed stop flag (agreeToStop) and, on rank 0, why its metrics
  /// file failed.
  int stop = 0;
  std::string metricsFailure;
};

TrainResult Run::execute() {
  Session session;
  if (!startUp(session))
    return {};
  if (options.inspects())
    return evaluateOnly(session);
  openOutputs(session);
  session.completed = startStep;
  for (int64_t s = startStep; s < session.end; ++s)
    if (!trainStep(session, s))
      break;
  return finish(session);
}

bool Run::startUp(Session &session) {
  // A warm-up beyond the steps never reaches --lr. Warned, not refused:
  // running the first part of a longer schedule this way is a workflow
  // (test/e2e/resume.test), although --stop-after says it better.
  if (leader && options.warmup > options.steps)
    std::fprintf(stderr,
                 "partition-run: warning: --warmup %lld is more than --steps "
                 "%lld: the learning rate never reaches --lr in this run (to "
                 "run the first part of a longer schedule, give its --steps "
                 "and --stop-after)\n",
                 static_cast<long long>(options.warmup),
                 static_cast<long long>(options.steps));
  // An unusable --save directory fails now, not after the training.
  if (leader && !options.save.empty()) {
    ckpt::checkSaveDirectory(options.save);
    checkSaveReplaces();
  }
  data::Split split = loadData(options, vocab, batch * seq + 1);
  evalRange = split.eval;
  if (options.inspects()) {
    data::BatchLoader loader(evalRange, batch, seq, kEvaluateAdvice);
    evalBatches = options.evalBatchesGiven ? options.evalBatches
                                           : loader.batchesPerEpoch();
    if (options.evaluate)
      warnIfEvalWraps(loader, evalBatches);
  } else {
    trainLoader = std::make_unique<data::BatchLoader>(
        split.train, batch, seq,
        "use more data, a smaller batch or sequence length, or a smaller "
        "--eval-fraction");
    evalBatches = options.evalBatches;
    session.canEvaluate = program.function("eval_step") &&
                          options.evalEvery > 0 && options.evalBatches > 0;
    if (session.canEvaluate) // Fails early.
      warnIfEvalWraps(data::BatchLoader(evalRange, batch, seq, kEvalAdvice),
                      evalBatches);
  }

  if (!options.resume.empty())
    restore(options.resume);
  else if (!options.initFrom.empty())
    initialiseFrom(options.initFrom);
  else
    initialise();
  checkReplicas(!options.resume.empty()     ? "--resume"
                : !options.initFrom.empty() ? "--init-from"
                                            : "initialisation");

  session.end = options.stopAfter > 0
                    ? std::min(options.steps, options.stopAfter)
                    : options.steps;
  if (options.resume.empty() || startStep < session.end || options.inspects())
    return true;
  // A finished job started again (a scheduler retrying a script): there is
  // nothing to do, and saving or truncating --metrics-out would only lose
  // what the earlier run wrote.
  bool byStopAfter = options.stopAfter > 0 && options.stopAfter < options.steps;
  std::fflush(stdout);
  if (leader)
    std::fprintf(stderr,
                 "partition-run: nothing to train: the checkpoint in %s is "
                 "at step %lld and %s is %lld; raise %s to train further\n",
                 options.resume.c_str(), static_cast<long long>(startStep),
                 byStopAfter ? "--stop-after" : "--steps",
                 static_cast<long long>(session.end),
                 byStopAfter ? "--stop-after" : "--steps");
  return false;
}

std::string Run::describeWhere() const {
  std::string where = backendDescription;
  if (global.size() > 1 || !program.mesh.empty())
    where += " x " + std::to_string(global.size()) +
             (global.size() == 1 ? " rank (" : " ranks (") +
             (replicaRun ? replicaRun->loaded.describeMesh()
                         : program.describeMesh()) +
             ")";
  return where;
}

void Run::openOutputs(Session &session) {
  if (leader && !options.metricsOut.empty())
    session.metrics = std::make_unique<MetricsFile>(options.metricsOut);
  if (!options.trace.empty()) {
    // A window the run never reaches would write an empty trace.
    if (options.traceLast != 0 && options.traceLast <= startStep)
      throw ProgramError(
          "--trace-steps ends at step " + std::to_string(options.traceLast) +
          ", before this run's first step " + std::to_string(startStep + 1) +
          " (it resumes from step " + std::to_string(startStep) +
          "); give a window within the steps it runs");
    startTrace();
  }
  session.step = functionIndex("train_step");
  // NTP: the step stops before the optimizer, which runs once the
  // gradients are summed across the replicas.
  session.update =
      replicaSum ? functionIndex("train_step_update") : session.step;
  if (!program.withRole(Role::LearningRate).empty())
    session.lrBuffer = &program.single(Role::LearningRate);

  std::string where = describeWhere();
  // On CPU ranks, the GEMM kernels that run and why (BlasCore.h): a
  // misjudged CPU costs several times the step time.
  std::string kernels;
  if (std::string(backend->name()) == "cpu") {
    kernels = "; " + cpu::blasCoreReport().describe();
    if (hasBf16Buffers(program))
      kernels += "; bf16 GEMMs: " + cpu::bf16GemmChoice().describe;
  }
  if (!quiet)
    std::printf("partition-run: %s on %s, %lld steps of %lld x %lld tokens, "
                "%zu parameter tensors%s\n",
                options.program.c_str(), where.c_str(),
                static_cast<long long>(options.steps),
                static_cast<long long>(batch), static_cast<long long>(seq),
                program.withRoleInStreams(Role::Param).size() - tiedCopies(),
                kernels.c_str());
  // The offload: where rank 0's optimizer state lives.
  if (std::string tiers = backend->describeTiers(); !quiet && !tiers.empty())
    std::printf("partition-run: offload: %s%s\n", tiers.c_str(),
                global.size() > 1 ? " (rank 0; every rank has its own)" : "");
}

bool Run::trainStep(Session &session, int64_t s) {
  traceStep(s + 1);
  float lr = static_cast<float>(scheduledLearningRate(options, s));
  feed(trainLoader->nextBatch());
  if (session.lrBuffer)
    backend->write(*session.lrBuffer, &lr);
  auto start = std::chrono::steady_clock::now();
  double cpuStart = processCpuMilliseconds();
  // The routing counts of this step's run only (not the last evaluation's).
  Backend::RoutingCounts earlier;
  backend->takeRoutingCounts(earlier);
  backend->run(session.step, s + 1);
  if (replicaSum) {
    auto summing = TraceRecorder::Clock::now();
    replicaSum->sum(*backend, s + 1);
    if (tracing)
      tracing->add("replica gradient sum", "collective", summing, s + 1,
                 std::to_string(replicaSum->groupsOfRank()) + " of " +
                     std::to_string(replicaSum->groups()) + " groups");
    backend->run(session.update, s + 1);
  }
  if (tracing)
    tracing->add("train_step", "function", start, s + 1, {}, 0, /*tid=*/1);
  float value = stepLoss(session, s);
  double ms = std::chrono::duration<double, std::milli>(
                  std::chrono::steady_clock::now() - start)
                  .count();
  if (!std::isfinite(value))
    throw ProgramError("the loss is " + std::to_string(value) + " at step " +
                       std::to_string(s + 1) + "; lower --lr");
  bool last = s + 1 == session.end;
  reportStep(session, s, lr, value, ms, processCpuMilliseconds() - cpuStart,
             last);
  session.completed = s + 1;
  if (program.streams.size() == 1)
    session.stop = agreeToStop(session.metricsFailure.empty()
                                   ? pendingInterrupt()
                                   : kStopForMetrics,
                               session.completed);
  if (session.stop)
    return false;
  // Every rank saves: sharded buffers are gathered from their holders.
  // Rank 0 writes; the others wait for it at the next collective.
  if (!options.save.empty() && options.saveEvery > 0 &&
      (s + 1) % options.saveEvery == 0 && !last)
    save(options.save, s + 1);
  return true;
}

float Run::stepLoss(Session &session, int64_t s) {
  // With pipeline stages the step ends when the last stage's loss
  // arrives: the time includes the pipeline's drain. The same world
  // collective agrees on stopping (agreeToStop without a pipeline), so
  // that the only waits of a rank on another stage are its transfers and
  // this one, each named after the stage it waits for.
  if (program.streams.size() == 1)
    return readLoss(s + 1);
  // Max over ranks: the stop flag, the loss (the others give -inf), and
  // whether it is NaN (which a max would not carry).
  float agreed[3] = {float(session.metricsFailure.empty() ? pendingInterrupt()
                                                          : kStopForMetrics),
                     -std::numeric_limits<float>::infinity(), 0.0f};
  if (loss) {
    backend->read(*loss, &agreed[1]);
    if (std::isnan(agreed[1]))
      agreed[1] = -std::numeric_limits<float>::infinity(), agreed[2] = 1;
  }
  world.allReduce(agreed, 3, comm::ReduceOp::Max,
                  {"loss from the last stage", s + 1, lossPeer.c_str()});
  session.stop = int(agreed[0]);
  return agreed[2] > 0 ? std::numeric_limits<float>::quiet_NaN() : agreed[1];
}

void Run::reportStep(Session &session, int64_t s, float lr, float value,
                     double ms, double cpuMs, bool last) {
  double tokensPerSecond = double(batch * seq) / (ms / 1000.0);
  nlohmann::json record = {{"step", s + 1},
                           {"loss", value},
                           {"lr", lr},
                           {"step_ms", ms},
                           {"step_cpu_ms", cpuMs},
                           {"tokens_per_s", tokensPerSecond}};
  nlohmann::json routing = routingRecord(s + 1);
  if (!routing.is_null())
    record.update(routing);
  if (session.canEvaluate && ((s + 1) % options.evalEvery == 0 || last)) {
    double evalLoss = evaluate(s + 1);
    if (evalStop) {
      // Interrupted: no mean of part of the batches.
      record["eval_interrupted"] = true;
      session.stop = std::max(session.stop, evalStop);
    } else {
      record["eval_loss"] = evalLoss;
    }
  }
  if (session.metrics && session.metricsFailure.empty()) {
    try {
      session.metrics->writeLine(record.dump());
    } catch (const MetricsError &error) {
      session.metricsFailure = error.what();
    }
  }
  if (quiet)
    return;
  std::printf("step %5lld/%lld | loss %.4f | lr %.2e | %8.1f ms | %9.0f "
              "tok/s",
              static_cast<long long>(s + 1),
              static_cast<long long>(options.steps), value, lr, ms,
              tokensPerSecond);
  if (record.contains("eval_loss"))
    std::printf(" | eval %.4f", record["eval_loss"].get<double>());
  if (!routing.is_null()) {
    std::printf(" | experts %.0f-%.0f tok, %.1f%% dropped",
                routing["moe_expert_tokens"]["min"].get<double>(),
                routing["moe_expert_tokens"]["max"].get<double>(),
                100.0 * routing["moe_dropped_fraction"].get<double>());
    if (routing.contains("moe_aux_loss"))
      std::printf(", aux %.4f", routing["moe_aux_loss"].get<double>());
  }
  std::printf("\n");
  std::fflush(stdout);
}

// Every rank adds what its routing kernels saw; ranks that route the same
// tokens (tensor-parallel ones, a recomputed forward) count them more than
// once, uniformly, so the counts are scaled to the step's own choices:
// tokens x top-k x MoE layers.
nlohmann::json Run::routingRecord(int64_t step) {
  if (experts <= 0 || moeLayers <= 0)
    return nullptr;
  Backend::RoutingCounts counts;
  if (!backend->takeRoutingCounts(counts))
    return nullptr;
  std::vector<float> sums(size_t(experts) + 5, 0.0f);
  sums[0] = float(counts.choices);
  sums[1] = float(counts.dropped);
  sums[2] = float(counts.auxLoss);
  sums[3] = float(counts.auxGroups);
  sums[4] = float(counts.exchangedBytes);
  for (size_t e = 0; e < counts.kept.size() && e < size_t(experts); ++e)
    sums[e + 5] = float(counts.kept[e]);
  world.allReduce(sums.data(), sums.size(), comm::ReduceOp::Sum,
                  {"expert routing counts", step});
  double choices = double(batch * seq * topK * moeLayers);
  if (sums[0] <= 0 || choices <= 0)
    return nullptr;
  double copies = sums[0] / choices;
  double least = 1e300, most = 0, total = 0;
  for (int64_t e = 0; e < experts; ++e) {
    double perLayer = sums[size_t(e) + 5] / copies / double(moeLayers);
    least = std::min(least, perLayer);
    most = std::max(most, perLayer);
    total += perLayer;
  }
  nlohmann::json record = {
      {"moe_dropped_fraction", sums[1] / sums[0]},
      {"moe_expert_tokens",
       {{"min", least}, {"max", most}, {"mean", total / double(experts)}}}};
  // Every MoE layer computes its router losses over the whole batch once
  // per copy, so the weighted mean is one layer's: times the layers, the
  // part of the step's loss that is not the cross-entropy.
  if (sums[3] > 0)
    record["moe_aux_loss"] = double(sums[2]) / double(sums[3]) *
                             double(moeLayers);
  // What expert parallelism's all-to-alls sent per rank in the step, on
  // average (the filled rows only where the compiler paired their counts;
  // the CPU backend's measure).
  if (sums[4] > 0)
    record["moe_all_to_all_bytes"] = double(sums[4]) / double(world.size());
  return record;
}

void Run::warnIfEvalWraps(const data::BatchLoader &loader,
                          int64_t batches) const {
  // Each evaluation restarts the held-out loader: more batches than it
  // holds average some of them twice, a mean over fewer distinct tokens
  // than --eval-batches says. Said once, at start-up.
  int64_t distinct = loader.batchesPerEpoch();
  if (!leader || batches <= distinct)
    return;
  std::fflush(stdout);
  std::fprintf(stderr,
               "partition-run: warning: the held-out set %s holds %lld "
               "batch%s of %lld x %lld tokens but --eval-batches is %lld: "
               "each evaluation wraps around and counts %s more than once; "
               "give --eval-batches %lld, a larger --eval-fraction or more "
               "data\n",
               loader.tokens().describe().c_str(),
               static_cast<long long>(distinct), distinct == 1 ? "" : "es",
               static_cast<long long>(batch), static_cast<long long>(seq),
               static_cast<long long>(batches),
               distinct == 1 ? "it" : "some of them",
               static_cast<long long>(distinct));
  std::fflush(stderr);
}

double Run::evaluate(int64_t step) {
  size_t eval = functionIndex("eval_step");
  data::BatchLoader loader(evalRange, batch, seq, kEvalAdvice);
  double total = 0;
  evaluated = true;
  for (int64_t i = 0; i < evalBatches; ++i) {
    feed(loader.nextBatch());
    auto start = TraceRecorder::Clock::now();
    backend->run(eval, step);
    if (tracing)
      tracing->add("eval_step", "function", start, step, {}, 0, /*tid=*/1);
    total += readLoss(step);
    // An interrupt is acted on after the batch in progress, not after all
    // of them (2^20 batches took 640 s): every rank agrees, one float.
    if (i + 1 < evalBatches)
      if (int stop = agreeToStop(pendingInterrupt(), step)) {
        evalStop = stop;
        return std::numeric_limits<double>::quiet_NaN();
      }
  }
  return total / double(evalBatches);
}

TrainResult Run::evaluateOnly(Session &session) {
  if (leader && !options.metricsOut.empty())
    session.metrics = std::make_unique<MetricsFile>(options.metricsOut);
  if (!options.trace.empty())
    startTrace();
  const std::string source = evalRange.describe();
  if (!options.dumpLogits.empty())
    dumpLogits(startStep);
  if (!options.evaluate) {
    session.completed = startStep;
    if (trace)
      finishTrace();
    writeSummary(session);
    return {};
  }
  if (!quiet) {
    std::printf("partition-run: %s on %s, evaluating %lld batch%s of %lld "
                "x %lld tokens of %s at step %lld (no update)\n",
                options.program.c_str(), describeWhere().c_str(),
                static_cast<long long>(evalBatches),
                evalBatches == 1 ? "" : "es",
                static_cast<long long>(batch), static_cast<long long>(seq),
                source.c_str(), static_cast<long long>(startStep));
    std::fflush(stdout);
  }
  double mean = evaluate(startStep);
  session.completed = startStep;
  if (evalStop) {
    session.stop = evalStop;
    if (trace)
      finishTrace();
    writeSummary(session);
    if (leader) {
      std::fflush(stdout);
      std::fprintf(stderr,
                   "partition-run: interrupted by %s: the evaluation stopped "
                   "before its last batch; no loss reported\n",
                   interruptName(evalStop));
      std::fflush(stderr);
    }
    if (global.size() > 1)
      global.barrier({"interrupted", startStep});
    return {evalStop, false};
  }
  double perplexity = std::exp(mean);
  nlohmann::json record = {{"evaluate", true},
                           {"step", startStep},
                           {"eval_loss", mean},
                           {"perplexity", perplexity},
                           {"eval_batches", evalBatches},
                           {"eval_tokens", evalBatches * batch * seq}};
  if (session.metrics)
    session.metrics->writeLine(record.dump());
  if (!quiet) {
    std::printf("eval loss %.6f | perplexity %.4f | %lld tokens\n", mean,
                perplexity,
                static_cast<long long>(evalBatches * batch * seq));
    std::fflush(stdout);
  }
  if (trace)
    finishTrace();
  writeSummary(session);
  return {};
}

int Run::agreeToStop(int local, int64_t step) {
  if (global.size() == 1)
    return local;
  float flag = float(local);
  global.allReduce(&flag, 1, comm::ReduceOp::Max, {"stop flag", step});
  return int(flag);
}

TrainResult Run::finish(Session &session) {
  int64_t completed = session.completed;
  int stop = session.stop;
  if (!options.save.empty())
    save(options.save, completed);
  if (trace)
    finishTrace();
  std::string saved = options.save.empty()
                          ? std::string("no checkpoint (no --save)")
                          : "the checkpoint of step " +
                                std::to_string(completed) + " is in " +
                                options.save;
  if (stop == kStopForMetrics) {
    // Only rank 0 knows the reason; the others end quietly, non-zero.
    if (leader)
      throw MetricsError(session.metricsFailure + "; stopped after step " +
                         std::to_string(completed) + ", " + saved);
    return {0, true};
  }
  writeSummary(session);
  if (stop && leader) {
    std::fflush(stdout);
    std::fprintf(stderr,
                 "partition-run: interrupted by %s: stopped after step %lld "
                 "of %lld, %s%s%s%s\n",
                 interruptName(stop), static_cast<long long>(completed),
                 static_cast<long long>(options.steps), saved.c_str(),
                 session.metrics ? ", metrics in " : "",
                 session.metrics ? options.metricsOut.c_str() : "",
                 options.save.empty()
                     ? ""
                     : ("; continue with --resume " + options.save).c_str());
    std::fflush(stderr);
  }
  // mpirun ends the job at the first non-zero exit: no rank exits 128 + N
  // before rank 0 has written its summary and its line.
  if (stop && global.size() > 1)
    global.barrier({"interrupted", completed});
  return {stop, false};
}

void Run::writeSummary(Session &session) {
  struct rusage usage;
  getrusage(RUSAGE_SELF, &usage);
  MemoryPeaks memory;
  memory.rss = static_cast<int64_t>(usage.ru_maxrss) * 1024;
  memory.device = static_cast<int64_t>(backend->deviceBytes());
  memory.ranks = gatherPeaks(memory.rss, memory.device);
  // Pipeline stages and replicas have arenas of their own sizes: each
  // rank's, and the part of it its instructions really address.
  std::vector<int64_t> arenas;
  if (program.streams.size() > 1 || replicaRun) {
    arenas = gatherBytes(int64_t(program.arenaBytes), "arena bytes");
    memory.used = gatherBytes(arenaUsed(), "arena used");
  }
  nlohmann::json ranks = nlohmann::json::array();
  for (size_t r = 0; r < memory.ranks.size(); ++r) {
    nlohmann::json entry = {{"rank", r},
                            {"peak_rss_bytes", memory.ranks[r].first}};
    if (!arenas.empty()) {
      entry["arena_bytes"] = arenas[r];
      entry["arena_used_bytes"] = memory.used[r];
    }
    if (memory.device > 0)
      entry["device_bytes"] = memory.ranks[r].second;
    ranks.push_back(entry);
  }
  nlohmann::json summary = {{"summary", true},
                            {"rank", 0},
                            {"world_size", global.size()},
                            {"backend", backend->name()},
                            {"arena_bytes", program.arenaBytes},
                            {"workspace_bytes", backend->workspaceBytes()},
                            {"peak_rss_bytes", memory.rss},
                            {"ranks", ranks}};
  if (memory.device > 0)
    summary["device_bytes"] = memory.device;
  if (std::string(backend->name()) == "cpu") {
    const cpu::BlasCoreReport &blas = cpu::blasCoreReport();
    summary["blas_core"] = blas.core;
    summary["blas_core_source"] = cpu::blasCoreSourceName(blas.source);
    if (blas.source == cpu::BlasCoreSource::Corrected)
      summary["blas_core_library"] = blas.libraryCore;
    if (!blas.cpuBest.empty())
      summary["blas_core_cpu_best"] = blas.cpuBest;
    if (hasBf16Buffers(program))
      summary["bf16_gemm"] = cpu::bf16GemmChoice().name;
  }
  if (session.stop) {
    summary["interrupted"] = interruptName(session.stop);
    summary["steps_done"] = session.completed;
  }
  if (session.metrics) {
    session.metrics->writeLine(summary.dump());
    session.metrics->close();
  }
  if (!quiet)
    printPeakMemory(memory);
}

} // namespace partition::runtime::detail
