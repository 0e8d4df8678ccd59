//===- Logits.cpp - a Run's --dump-logits ---------------------------------===//
//
// partition-run --dump-logits: logits_step on the first batch of the data,
// its logits gathered from every rank that holds a block of them (the last
// pipeline stage; each NTP replica) into the batch's row order on rank 0,
// written with the batch's ids as a NumPy .npz.
//
//===----------------------------------------------------------------------===//

#include "runtime/train/TrainerRun.h"

#include "runtime/data/SequenceLayout.h"

#include "runtime/train/Npz.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

namespace partition::runtime::detail {

std::vector<float> Run::gatherLogits(int64_t step) {
  // logits_step returns one buffer per micro-batch, named "mb<m>", on the
  // last pipeline stage (other stages have none; a program compiled before
  // micro-batches had one unnamed buffer, the whole batch). Micro-batch m
  // is rows [m*b, (m+1)*b) of each data-parallel rank's rows, so its
  // logical tensor holds, per dp rank r, rows r*(B/dp) + m*b + i.
  const size_t last = program.streams.size() - 1;
  const std::vector<BufferInfo> &held = program.streams[last].buffers;
  std::vector<size_t> parts; // indices into `held`, by micro-batch
  for (size_t i = 0; i < held.size(); ++i)
    if (held[i].role == Role::Logits)
      parts.push_back(i);
  for (size_t m = 0; m < parts.size(); ++m) {
    auto named = std::find_if(held.begin(), held.end(), [&](const BufferInfo &b) {
      return b.role == Role::Logits && b.name == "mb" + std::to_string(m);
    });
    if (named != held.end())
      parts[m] = size_t(named - held.begin());
    else if (parts.size() > 1 || !held[parts[m]].name.empty())
      throw ProgramError(options.program + ": its " +
                         std::to_string(parts.size()) +
                         " logits buffers are not named mb0..mb" +
                         std::to_string(parts.size() - 1) +
                         "; recompile the program with partition-compile "
                         "--logits");
  }
  auto badShape = [&](const std::string &why) {
    return ProgramError(options.program + ": the logits buffers " + why +
                        "; recompile the program with partition-compile "
                        "--logits");
  };
  if (parts.empty())
    throw badShape("are missing");
  const std::vector<int64_t> &shape = held[parts.front()].logicalShape();
  const int64_t microbatches = int64_t(parts.size());
  // NTP: this replica's program sees its own rows as the whole batch.
  const int64_t rows = replicaRun ? replicaRows.second : batch;
  if (shape.size() != 3 || shape[0] * microbatches != rows ||
      shape[1] != seq || shape[2] < vocab || shape[0] % dpSize != 0)
    throw badShape("are not " + std::to_string(microbatches) +
                   " micro-batches of [" + std::to_string(rows) + " / " +
                   std::to_string(microbatches) + ", " + std::to_string(seq) +
                   ", vocab >= " + std::to_string(vocab) + "] split over " +
                   std::to_string(dpSize) + " data-parallel ranks");
  for (size_t part : parts)
    if (held[part].logicalShape() != shape)
      throw badShape("differ in shape");
  const int64_t padded = shape[2], row = seq * padded;
  const int64_t perRank = shape[0] / dpSize; // rows of one dp rank
  // The rank that assembles the program's logits: the last stage's first
  // (rank 0 without stages), or each NTP replica's first.
  const bool root = program.stream == last &&
                    (replicaRun ? world.rank() == 0 : stageRoot);
  std::vector<float> logits;
  if (leader || root)
    logits.resize(size_t(rows * row));
  constexpr int kLogitsTag = 13;
  const std::string what = "logits to rank 0 for --dump-logits";
  if (program.stream == last) {
    for (int64_t m = 0; m < microbatches; ++m) {
      // Each rank's block (data-parallel rows, a vocab-parallel slice of
      // the vocabulary), gathered into the micro-batch's logical tensor.
      // The selected stream is the last one: `held` is this rank's.
      const BufferInfo &buffer = program.buffers[parts[size_t(m)]];
      std::vector<float> block(size_t(buffer.elements));
      backend->read(buffer, block.data());
      if (buffer.sharded())
        block = gatherLogical(buffer, block, step, "--dump-logits");
      if (logits.empty())
        continue;
      for (int64_t r = 0; r < dpSize; ++r)
        std::copy_n(block.begin() + r * perRank * row, perRank * row,
                    logits.begin() +
                        (r * microbatches * perRank + m * perRank) * row);
    }
  }
  // A padded vocabulary (tp) has its padding ids last: cut them (NTP
  // replicas of other degrees pad differently).
  if (!logits.empty() && padded > vocab) {
    for (int64_t r = 0; r < rows * seq; ++r)
      std::copy_n(logits.begin() + r * padded, vocab,
                  logits.begin() + r * vocab);
    logits.resize(size_t(rows * seq * vocab));
  }
  // Context parallelism's zigzag: back from the program's layout order.
  if (!logits.empty())
    logits = data::reorderSequences(logits, seq, vocab,
                                    program.sequenceChunks,
                                    /*toLayout=*/false);
  const size_t bytes = size_t(rows * seq * vocab) * sizeof(float);
  if (!replicaRun) {
    if (root && !leader) {
      world.sendEager(logits.data(), bytes, 0, kLogitsTag,
                      {what.c_str(), step});
      world.completeSends({what.c_str(), step});
    } else if (leader && !root) {
      world.recvBytes(logits.data(), bytes, stageRootRank(last), kLogitsTag,
                      {what.c_str(), step});
    }
    return logits;
  }
  // NTP: every replica's first rank hands its rows to rank 0 (replica 0's
  // first), which puts them at the replica's offset in the batch.
  if (root && !leader) {
    global.sendEager(logits.data(), bytes, 0, kLogitsTag,
                     {what.c_str(), step});
    global.completeSends({what.c_str(), step});
    return {};
  }
  if (!leader)
    return {};
  std::vector<float> all(size_t(batch * seq * vocab));
  int firstRank = 0;
  for (const ReplicaProgram &replica : replicaRun->loaded.replicas) {
    float *at = all.data() + replica.batchOffset * seq * vocab;
    size_t count = size_t(replica.batchRows * seq * vocab);
    if (firstRank == 0)
      std::copy_n(logits.begin(), count, at);
    else
      global.recvBytes(at, count * sizeof(float), firstRank, kLogitsTag,
                       {what.c_str(), step});
    firstRank += int(replica.tp);
  }
  return all;
}

void Run::dumpLogits(int64_t step) {
  // An unwritable file fails before the work, as --trace and --save do.
  if (leader) {
    std::FILE *probe = std::fopen(options.dumpLogits.c_str(), "wb");
    if (!probe)
      throw ProgramError("--dump-logits: cannot write '" + options.dumpLogits +
                         "': " + std::strerror(errno) +
                         "; check that its directory exists and is writable");
    std::fclose(probe);
  }
  data::BatchLoader loader(evalRange, batch, seq, kEvaluateAdvice);
  data::Batch first = loader.nextBatch();
  if (!quiet) {
    std::printf("partition-run: %s on %s, the logits of the first batch of "
                "%lld x %lld tokens of %s at step %lld (no update)\n",
                options.program.c_str(), describeWhere().c_str(),
                static_cast<long long>(batch), static_cast<long long>(seq),
                evalRange.describe().c_str(), static_cast<long long>(step));
    std::fflush(stdout);
  }
  feed(first);
  auto start = TraceRecorder::Clock::now();
  backend->run(functionIndex("logits_step"), step);
  if (tracing)
    tracing->add("logits_step", "function", start, step, {}, 0, /*tid=*/1);
  std::vector<float> logits = gatherLogits(step);
  if (!leader)
    return;
  try {
    writeNpz(options.dumpLogits,
             {{"input_ids", NpyArray::Type::I32, {batch, seq},
               first.inputs.data()},
              {"targets", NpyArray::Type::I32, {batch, seq},
               first.targets.data()},
              {"logits", NpyArray::Type::F32, {batch, seq, vocab},
               logits.data()}});
  } catch (const std::runtime_error &error) {
    throw ProgramError(std::string("--dump-logits: ") + error.what());
  }
  if (!quiet) {
    std::printf("logits: %lld x %lld x %lld (fp32), with input_ids and "
                "targets, in %s\n",
                static_cast<long long>(batch), static_cast<long long>(seq),
                static_cast<long long>(vocab), options.dumpLogits.c_str());
    std::fflush(stdout);
  }
}

} // namespace partition::runtime::detail
