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
// compiles short.
//
//===----------------------------------------------------------------------===//

#ifndef PARTITION_TOOLS_PARTITION_PLAN_COMPILEDMEMORY_H
#define PARTITION_TOOLS_PARTITION_PLAN_COMPILEDMEMORY_H

#include "model/ModelConfig.h"
#include "planner/CostModel.h"

#include <map>
#include <optional>
#include <string>

namespace partition::planner {

class CompiledMemory {
public:
  explicit CompiledMemory(model::ModelConfig config) : config(config) {}
  /// Arena bytes per rank, or nullopt when the compile fails (`error` says
  /// why). Memoized on what changes the per-rank program.
  std::optional<double> bytes(const Candidate &plan);
  const std::string &lastError() const { return error; }
  int compiles() const { return count; }

private:
  model::ModelConfig config;
  std::map<std::string, std::optional<double>> cache;
  std::string error;
  int count = 0;
};

} // namespace partition::planner

#endif
