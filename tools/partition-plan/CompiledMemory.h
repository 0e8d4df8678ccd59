//===- CompiledMemory.h - a plan's memory from the compiler's plan -*- C++ -*-===//
//
// The memory per rank of a plan that compiles, as partition-compile's
// memory plan lays it out (the arena: parameters, AdamW state, gradients,
// activations and temporaries at their offsets), not as a formula: the
// model is rebuilt at the plan's micro-batch size, the compile flow
// (passes/CompileFlow.h) runs in-process, and the arena size is read off the
// planned function (`rt.arena_bytes`). Two micro-batches stand for any
// number above one (the unrolled step holds one micro-batch's activations
// at a time; only the token buffers grow, added by hand), which keeps
// compiles short. Compiles the search will ask for next run on threads of
// their own while it waits for one (prefetch): on N hardware threads up to
// N at once.
//
//===----------------------------------------------------------------------===//

#ifndef PARTITION_TOOLS_PARTITION_PLAN_COMPILEDMEMORY_H
#define PARTITION_TOOLS_PARTITION_PLAN_COMPILEDMEMORY_H

#include "model/ModelConfig.h"
#include "planner/CostModel.h"

#include <atomic>
#include <chrono>
#include <future>
#include <map>
#include <mutex>
#include <optional>
#include <string>

namespace partition::planner {

class CompiledMemory {
public:
  /// `parallel`: how many compiles may run at once (the caller's one and
  /// prefetches); 0 takes the machine's hardware threads.
  explicit CompiledMemory(model::ModelConfig config, unsigned parallel = 0);
  ~CompiledMemory();
  /// Arena bytes per rank, or nullopt when the compile fails (`error` says
  /// why). Memoized on what changes the per-rank program; a compile that
  /// prefetch() started is waited for, not repeated.
  std::optional<double> bytes(const Candidate &plan);
  /// Starts compiling `plan` on a thread of its own when a thread is free
  /// and its result is not known or coming: the search calls this for the
  /// plans it will ask about next, so that their compiles overlap (the
  /// results, and so the search, are the same as without it).
  void prefetch(const Candidate &plan);
  const std::string &lastError() const { return error; }
  int compiles() const { return count; }
  /// No compile starts after `deadline` (--memory-seconds), and none is
  /// waited for past it: bytes() then answers nullopt for a plan whose
  /// compile is not done, and the search keeps its closed-form memory.
  /// Compiles still running are left to their threads (abandoned()).
  void setDeadline(std::chrono::steady_clock::time_point deadline) {
    this->deadline = deadline;
  }
  /// Plans asked about after the deadline, not compiled.
  int skipped() const { return skippedCount; }
  /// Whether compiles still run past the deadline: their threads use this
  /// object, which must then outlive them (the tool ends the process
  /// without destroying it, std::quick_exit).
  bool abandoned();

private:
  struct Result {
    /// Per function of the program: its arena, and the bytes of its token
    /// and target rows per micro-batch (what another micro-batch adds).
    /// Empty where the compile failed (`error` says why).
    std::vector<std::pair<double, double>> functions;
    std::string error;
  };
  /// What is compiled for `plan`: its cache key and micro-batch count.
  struct Key {
    std::string id;
    int64_t microbatches;
  };
  Key keyOf(const Candidate &plan) const;
  /// Starts compiling `plan` on a thread of its own (`mutex` held).
  std::shared_future<Result> start(const Candidate &plan, const Key &key);
  /// Compiles `plan` at `key.microbatches` in a context of its own
  /// (thread-safe).
  Result compile(const Candidate &plan, const Key &key) const;

  model::ModelConfig config;
  unsigned parallel;
  std::mutex mutex;
  std::map<std::string, std::shared_future<Result>> results;
  unsigned running = 0;
  std::string error;
  mutable std::atomic<int> count{0};
  std::optional<std::chrono::steady_clock::time_point> deadline;
  int skippedCount = 0;

  bool pastDeadline() const {
    return deadline && std::chrono::steady_clock::now() > *deadline;
  }
};

} // namespace partition::planner

#endif
