//===- CompiledMemory.cpp - a plan's memory from the compiler's plan ------===//

#include "tools/partition-plan/CompiledMemory.h"

#include "dialects/Dist/DistDialect.h"
#include "dialects/Rt/RtDialect.h"
#include "dialects/Rt/RtOps.h"
#include "dialects/Xfmr/XfmrDialect.h"
#include "model/ModelBuilder.h"
#include "passes/CompileFlow.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>

using namespace mlir;

namespace partition::planner {

std::optional<double> CompiledMemory::bytes(const Candidate &plan) {
  // Without a pipeline, micro-batches run one after another: two show
  // what a third adds (its tokens), so larger counts are extrapolated.
  // A pipeline keeps several in flight: 1F1B and ZB-H1 at most pp per
  // stage (v * pp chunks interleaved), GPipe all of them, so it is
  // compiled with as many as can be in flight (and at least pp, which the
  // pipeline pass requires).
  int64_t compiledMicrobatches = std::min<int64_t>(plan.microbatches, 2);
  if (plan.pp > 1)
    compiledMicrobatches =
        plan.schedule == "gpipe"
            ? plan.microbatches
            : std::min<int64_t>(plan.microbatches,
                                2 * plan.pp * plan.virtualStages);
  Candidate key = plan;
  key.dp = std::min<int64_t>(plan.dp, 2); // dp > 1 adds buckets, not size
  key.microbatches = compiledMicrobatches;
  std::string id = key.planJson() + " mb" + std::to_string(plan.microBatch) +
                   " dp" + std::to_string(plan.dp);
  if (auto it = cache.find(id); it != cache.end()) {
    if (!it->second)
      return std::nullopt;
    return *it->second + 8.0 * double(plan.microbatches -
                                      compiledMicrobatches) *
                             double(plan.microBatch) * double(config.seqLen) /
                             double(plan.cp);
  }

  DialectRegistry registry;
  registry.insert<xfmr::XfmrDialect, rt::RtDialect, dist::DistDialect,
                  arith::ArithDialect, func::FuncDialect,
                  memref::MemRefDialect, tensor::TensorDialect>();
  MLIRContext context(registry);
  context.loadAllAvailableDialects();
  std::string diagnostics;
  ScopedDiagnosticHandler handler(&context, [&](Diagnostic &d) {
    if (diagnostics.empty())
      diagnostics = d.str();
    return success();
  });

  model::ModelConfig shape = config;
  // The model's batch is the data-parallel batch of one micro-batch.
  shape.batch = plan.microBatch * plan.dp;
  OwningOpRef<ModuleOp> module = model::buildForwardModule(context, shape);

  // --dist-apply-plan reads the plan from a file.
  SmallString<128> path;
  int fd;
  std::optional<double> result;
  if (llvm::sys::fs::createTemporaryFile("partition-plan", "json", fd,
                                         path)) {
    error = "cannot create a temporary plan file";
    cache[id] = std::nullopt;
    return std::nullopt;
  }
  {
    llvm::raw_fd_ostream os(fd, /*shouldClose=*/true);
    Candidate written = plan;
    written.microbatches = compiledMicrobatches;
    os << written.planJson();
  }
  CompileFlowOptions options;
  options.plan = std::string(path);
  options.microbatches = compiledMicrobatches;
  PassManager pm(&context);
  buildCompileFlow(pm, options);
  ++count;
  if (failed(pm.run(*module))) {
    error = diagnostics.empty() ? "the compile failed" : diagnostics;
  } else {
    int64_t arena = 0;
    module->walk([&](func::FuncOp function) {
      if (auto bytes = function->getAttrOfType<IntegerAttr>(
              rt::RtDialect::kArenaBytesAttrName))
        arena = std::max(arena, bytes.getInt());
    });
    if (arena > 0)
      result = double(arena);
    else
      error = "the compiled program has no arena";
  }
  llvm::sys::fs::remove(path);
  cache[id] = result;
  if (!result)
    return std::nullopt;
  // The other micro-batches' token buffers (a cp-th of each sequence).
  return *result + 8.0 * double(plan.microbatches - compiledMicrobatches) *
                       double(plan.microBatch) * double(config.seqLen) /
                       double(plan.cp);
}

} // namespace partition::planner
