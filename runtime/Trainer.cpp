//===- Trainer.cpp - the training loop of partition-run -------------------===//

#include "runtime/Trainer.h"

#include "runtime/Backend.h"
#include "runtime/Init.h"
#include "runtime/Program.h"
#include "runtime/checkpoint/Checkpoint.h"
#include "runtime/data/BatchLoader.h"
#include "runtime/data/DataError.h"
#include "runtime/data/SyntheticLanguage.h"

#include <nlohmann/json.hpp>

#include <sys/resource.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <memory>

namespace partition::runtime {

double scheduledLearningRate(const TrainOptions &options, int64_t step) {
  int64_t warmup = options.warmup >= 0 ? options.warmup : options.steps / 10;
  if (step < warmup)
    return options.lr * double(step + 1) / double(warmup);
  int64_t decaySteps = std::max<int64_t>(options.steps - warmup - 1, 1);
  double progress = std::min(1.0, double(step - warmup) / double(decaySteps));
  double cosine = 0.5 * (1.0 + std::cos(M_PI * progress));
  double minLr = options.lr * options.minLrRatio;
  return minLr + (options.lr - minLr) * cosine;
}

namespace {

namespace data = partition::runtime::data;
namespace ckpt = partition::runtime::checkpoint;

/// Tokens the built-in language generates for training and evaluation: a
/// fixed amount, so that runs of any length read the same data.
constexpr int64_t kSyntheticTrainTokens = 1 << 21;
constexpr int64_t kSyntheticEvalTokens = 1 << 16;

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
  return data::splitTrainEval(stream, options.evalFraction);
}

/// Opens the metrics file, one JSON object per line, or nothing.
std::unique_ptr<std::ofstream> openMetrics(const std::string &path) {
  if (path.empty())
    return nullptr;
  auto file = std::make_unique<std::ofstream>(path, std::ios::trunc);
  if (!*file)
    throw ProgramError(path + ": cannot write the metrics file");
  return file;
}

class Run {
public:
  explicit Run(const TrainOptions &options)
      : options(options), program(Program::load(options.program)),
        backend(createCpuBackend(program)),
        tokens(program.single(Role::Tokens)),
        targets(program.single(Role::Targets)),
        loss(program.single(Role::Loss)) {
    if (tokens.shape.size() != 2)
      throw ProgramError(options.program + ": the tokens buffer is not [B, T]");
    // A step without an optimizer outputs gradients and never changes the
    // parameters: training with it would print a flat loss curve.
    if (!program.withRole(Role::Gradient).empty() ||
        program.withRole(Role::LearningRate).empty())
      throw ProgramError(options.program +
                         ": the program has no optimizer (compiled with "
                         "--optimizer none, it outputs gradients); compile "
                         "it with --optimizer adamw to train");
    batch = tokens.shape[0];
    seq = tokens.shape[1];
    vocab = program.modelInt("vocab");
    layers = program.modelInt("layers");
    if (!program.function("eval_step") && options.evalEvery > 0 &&
        !options.quiet)
      std::fprintf(stderr, "partition-run: the program has no eval_step; "
                           "no evaluation\n");
  }

  void execute();

private:
  void initialise();
  void restore(const std::string &dir);
  void save(const std::string &dir, int64_t completed);
  void feed(const data::Batch &batch);
  float readLoss() {
    float value;
    backend->read(loss, &value);
    return value;
  }
  double evaluate();
  size_t functionIndex(const char *name) const {
    for (size_t i = 0; i < program.functions.size(); ++i)
      if (program.functions[i].name == name)
        return i;
    throw ProgramError(options.program + ": no function " + name);
  }

  const TrainOptions &options;
  Program program;
  std::unique_ptr<Backend> backend;
  const BufferInfo &tokens, &targets, &loss;
  int64_t batch = 0, seq = 0, vocab = 0, layers = 0;
  std::unique_ptr<data::BatchLoader> trainLoader;
  data::TokenRange evalRange;
  int64_t startStep = 0;
};

void Run::initialise() {
  for (size_t index : program.withRole(Role::Param)) {
    const BufferInfo &param = program.buffers[index];
    std::vector<float> values =
        initialParameter(param.name, param.shape, layers, options.seed);
    backend->write(param, values.data());
  }
  // Moments and the step start at zero: the backend zeroes its arena.
}

void Run::restore(const std::string &dir) {
  ckpt::Checkpoint checkpoint = ckpt::openCheckpoint(dir);
  auto readInto = [&](const BufferInfo &buffer, const std::string &name) {
    if (!checkpoint.tensors.contains(name))
      throw ckpt::CheckpointError(ckpt::checkpointFile(dir) +
                                  ": has no tensor '" + name +
                                  "' that this program needs; was it saved "
                                  "from another model?");
    std::vector<float> values(buffer.elements);
    checkpoint.tensors.read(name, ckpt::DType::F32, buffer.shape,
                            values.data(), buffer.bytes);
    backend->write(buffer, values.data());
  };
  for (size_t index : program.withRole(Role::Param))
    readInto(program.buffers[index], program.buffers[index].name);
  for (size_t index : program.withRole(Role::Moment1))
    readInto(program.buffers[index], ckpt::adamMName(program.buffers[index].name));
  for (size_t index : program.withRole(Role::Moment2))
    readInto(program.buffers[index], ckpt::adamVName(program.buffers[index].name));
  startStep = checkpoint.state.step;
  for (size_t index : program.withRole(Role::Step)) {
    int32_t step = static_cast<int32_t>(startStep);
    backend->write(program.buffers[index], &step);
  }
  const ckpt::Metadata &metadata = checkpoint.tensors.metadata();
  auto epoch = metadata.find("data_epoch");
  trainLoader->seek(checkpoint.state.dataPosition,
                    epoch == metadata.end() ? 0 : std::stoll(epoch->second));
  if (!options.quiet)
    std::printf("resumed from %s at step %lld\n", dir.c_str(),
                static_cast<long long>(startStep));
}

void Run::save(const std::string &dir, int64_t completed) {
  // Parameters and moments, each a whole logical tensor named after its
  // parameter, read to the host and written in one atomic file.
  std::vector<std::pair<const BufferInfo *, std::string>> entries;
  for (size_t index : program.withRole(Role::Param))
    entries.push_back({&program.buffers[index], program.buffers[index].name});
  for (size_t index : program.withRole(Role::Moment1))
    entries.push_back({&program.buffers[index],
                       ckpt::adamMName(program.buffers[index].name)});
  for (size_t index : program.withRole(Role::Moment2))
    entries.push_back({&program.buffers[index],
                       ckpt::adamVName(program.buffers[index].name)});
  std::vector<std::vector<float>> storage(entries.size());
  std::vector<ckpt::TensorRef> tensors;
  for (size_t i = 0; i < entries.size(); ++i) {
    const BufferInfo &buffer = *entries[i].first;
    storage[i].resize(buffer.elements);
    backend->read(buffer, storage[i].data());
    tensors.push_back({entries[i].second, ckpt::DType::F32, buffer.shape,
                       storage[i].data(), buffer.bytes});
  }
  ckpt::TrainingState state{completed, trainLoader->position(), options.seed};
  ckpt::Metadata extra{{"data_epoch", std::to_string(trainLoader->epoch())},
                       {"model", program.model.dump()}};
  ckpt::saveCheckpoint(dir, tensors, state, extra);
}

void Run::feed(const data::Batch &next) {
  backend->write(tokens, next.inputs.data());
  backend->write(targets, next.targets.data());
}

double Run::evaluate() {
  size_t eval = functionIndex("eval_step");
  data::BatchLoader loader(evalRange, batch, seq);
  double total = 0;
  for (int64_t i = 0; i < options.evalBatches; ++i) {
    feed(loader.nextBatch());
    backend->run(eval);
    total += readLoss();
  }
  return total / double(options.evalBatches);
}

void Run::execute() {
  data::Split split = loadData(options, vocab, batch * seq + 1);
  trainLoader = std::make_unique<data::BatchLoader>(split.train, batch, seq);
  evalRange = split.eval;
  bool canEvaluate = program.function("eval_step") && options.evalEvery > 0 &&
                     options.evalBatches > 0;
  if (canEvaluate)
    data::BatchLoader(evalRange, batch, seq); // Fails early if too small.

  if (options.resume.empty())
    initialise();
  else
    restore(options.resume);

  std::unique_ptr<std::ofstream> metrics = openMetrics(options.metricsOut);
  size_t step = functionIndex("train_step");
  const BufferInfo *lrBuffer = nullptr;
  if (!program.withRole(Role::LearningRate).empty())
    lrBuffer = &program.single(Role::LearningRate);

  if (!options.quiet)
    std::printf("partition-run: %s on %s, %lld steps of %lld x %lld tokens, "
                "%zu parameter tensors\n",
                options.program.c_str(), backend->name(),
                static_cast<long long>(options.steps),
                static_cast<long long>(batch), static_cast<long long>(seq),
                program.withRole(Role::Param).size());

  int64_t end = options.stopAfter > 0
                    ? std::min(options.steps, options.stopAfter)
                    : options.steps;
  for (int64_t s = startStep; s < end; ++s) {
    float lr = static_cast<float>(scheduledLearningRate(options, s));
    feed(trainLoader->nextBatch());
    if (lrBuffer)
      backend->write(*lrBuffer, &lr);
    auto start = std::chrono::steady_clock::now();
    backend->run(step);
    double ms = std::chrono::duration<double, std::milli>(
                    std::chrono::steady_clock::now() - start)
                    .count();
    float value = readLoss();
    if (!std::isfinite(value))
      throw ProgramError("the loss is " + std::to_string(value) +
                         " at step " + std::to_string(s + 1) +
                         "; lower --lr");
    double tokensPerSecond = double(batch * seq) / (ms / 1000.0);

    nlohmann::json record = {{"step", s + 1},
                             {"loss", value},
                             {"lr", lr},
                             {"step_ms", ms},
                             {"tokens_per_s", tokensPerSecond}};
    bool last = s + 1 == end;
    if (canEvaluate && ((s + 1) % options.evalEvery == 0 || last))
      record["eval_loss"] = evaluate();
    if (metrics)
      *metrics << record.dump() << "\n" << std::flush;
    if (!options.quiet) {
      std::printf("step %5lld/%lld | loss %.4f | lr %.2e | %8.1f ms | %9.0f "
                  "tok/s",
                  static_cast<long long>(s + 1),
                  static_cast<long long>(options.steps), value, lr, ms,
                  tokensPerSecond);
      if (record.contains("eval_loss"))
        std::printf(" | eval %.4f", record["eval_loss"].get<double>());
      std::printf("\n");
      std::fflush(stdout);
    }
    if (!options.save.empty() && options.saveEvery > 0 &&
        (s + 1) % options.saveEvery == 0 && !last)
      save(options.save, s + 1);
  }
  if (!options.save.empty())
    save(options.save, std::max(end, startStep));

  struct rusage usage;
  getrusage(RUSAGE_SELF, &usage);
  nlohmann::json summary = {
      {"summary", true},
      {"rank", 0},
      {"arena_bytes", program.arenaBytes},
      {"workspace_bytes", backend->workspaceBytes()},
      {"peak_rss_bytes", static_cast<int64_t>(usage.ru_maxrss) * 1024}};
  if (metrics)
    *metrics << summary.dump() << "\n";
  if (!options.quiet)
    std::printf("peak memory: arena %llu B, workspace %llu B, process RSS "
                "%lld B\n",
                static_cast<unsigned long long>(program.arenaBytes),
                static_cast<unsigned long long>(backend->workspaceBytes()),
                static_cast<long long>(usage.ru_maxrss) * 1024);
}

} // namespace

void train(const TrainOptions &options) { Run(options).execute(); }

} // namespace partition::runtime
