//===- CompiledMemory.cpp - a plan's memory from the compiler's plan ------===//

#include "tools/partition-plan/CompiledMemory.h"

#include "dialects/Dist/DistDialect.h"
#include "dialects/Rt/RtDialect.h"
#include "dialects/Rt/RtOps.h"
#include "dialects/Xfmr/XfmrDialect.h"
#include "model/ModelBuilder.h"
#include "lowering/Passes.h"
#include "passes/CompileFlow.h"
#include "passes/Passes.h"
#include "passes/frontend/StepEntries.h"

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
#include <thread>

using namespace mlir;

namespace partition::planner {

CompiledMemory::CompiledMemory(model::ModelConfig config, unsigned parallel)
    : config(std::move(config)),
      parallel(parallel ? parallel
                        : std::max(1u, std::thread::hardware_concurrency())) {
  // The compile flow registers the passes a recomputation budget names
  // (buildCompileFlow); the registry has no lock: filled here, on this
  // thread, the compiles on other threads only find them there.
  registerPartitionPasses();
  registerLoweringPasses();
}

CompiledMemory::~CompiledMemory() {
  // Prefetches still running hold `this` (and take the lock to finish).
  std::vector<std::shared_future<Result>> pending;
  {
    std::lock_guard<std::mutex> lock(mutex);
    for (auto &[id, result] : results)
      pending.push_back(result);
  }
  for (auto &result : pending)
    result.wait();
}

namespace {

/// The train step's micro-batch loop under `plan`, as partition-compile
/// builds it (passes/CompileFlow.cpp), or nullopt where it unrolls.
std::optional<pipeline::LoopLayout> loopOf(const Candidate &plan) {
  LoopShape shape;
  if (plan.pp > 1) {
    shape.stages = plan.pp;
    shape.chunks = plan.virtualStages;
    shape.schedule = plan.schedule;
  }
  // ZeRO-3 gathers the parameters in the first micro-batches, which then
  // differ from the loop's body.
  shape.minSettle = plan.zeroStage == 3 ? 1 : 0;
  return stepLoopLayout(plan.microbatches, shape, /*forwardOnly=*/false);
}

} // namespace

CompiledMemory::Key CompiledMemory::keyOf(const Candidate &plan) const {
  // The count compiled: one whose program is the step's but for its count
  // (and its token rows, added below), so that the arena is the one the
  // run will plan.
  // - A step that loops compiles the smallest count that loops alike: its
  //   compiled micro-batches and one more run (4 without a pipeline, 5
  //   with ZeRO-3, whose first micro-batch gathers).
  // - A pipeline that does not keeps several in flight: 1F1B and ZB-H1 at
  //   most pp per stage (v * pp chunks interleaved), GPipe all of them, so
  //   it is compiled with as many as can be in flight (and at least pp,
  //   which the pipeline pass requires).
  // - A step without a pipeline that does not loop (3 micro-batches at
  //   most) compiles as it is.
  int64_t compiledMicrobatches = plan.microbatches;
  if (plan.pp > 1 && plan.schedule != "gpipe")
    compiledMicrobatches = std::min<int64_t>(plan.microbatches,
                                             2 * plan.pp * plan.virtualStages);
  if (std::optional<pipeline::LoopLayout> layout = loopOf(plan))
    compiledMicrobatches = std::min<int64_t>(
        plan.microbatches, layout->compiled + layout->stride);
  Candidate key = plan;
  key.dp = std::min<int64_t>(plan.dp, 2); // dp > 1 adds buckets, not size
  key.microbatches = compiledMicrobatches;
  return {key.planJson() + " mb" + std::to_string(plan.microBatch) + " dp" +
              std::to_string(plan.dp),
          compiledMicrobatches};
}

std::shared_future<CompiledMemory::Result>
CompiledMemory::start(const Candidate &plan, const Key &key) {
  ++running;
  std::shared_future<Result> result =
      std::async(std::launch::async, [this, plan, key] {
        Result compiled = compile(plan, key);
        std::lock_guard<std::mutex> done(mutex);
        --running;
        return compiled;
      }).share();
  results.emplace(key.id, result);
  return result;
}

std::optional<double> CompiledMemory::bytes(const Candidate &plan) {
  Key key = keyOf(plan);
  std::unique_lock<std::mutex> lock(mutex);
  auto it = results.find(key.id);
  std::shared_future<Result> pending;
  if (it != results.end()) {
    pending = it->second;
  } else if (pastDeadline()) {
    ++skippedCount;
    error = "the compile budget (--memory-seconds) was spent";
    return std::nullopt;
  } else {
    // On a thread of its own, so that the wait below can give up at the
    // deadline; others asking meanwhile wait for the same result.
    pending = start(plan, key);
  }
  lock.unlock();
  if (deadline &&
      pending.wait_until(*deadline) != std::future_status::ready) {
    lock.lock();
    ++skippedCount;
    error = "the compile budget (--memory-seconds) was spent";
    return std::nullopt;
  }
  const Result &result = pending.get();
  if (result.functions.empty()) {
    error = result.error;
    return std::nullopt;
  }
  // The other micro-batches' token and target rows, in each function as
  // compiled (a pipeline stage holds its rank's rows, a step without one
  // the data-parallel batch's), which the arena grows by; the largest.
  double bytes = 0;
  for (auto [arena, rowsPerMicrobatch] : result.functions)
    bytes = std::max(bytes,
                     arena + rowsPerMicrobatch *
                                 double(plan.microbatches - key.microbatches));
  return bytes;
}

void CompiledMemory::prefetch(const Candidate &plan) {
  Key key = keyOf(plan);
  std::lock_guard<std::mutex> lock(mutex);
  // One thread stays the caller's.
  if (running + 1 >= parallel || results.count(key.id) || pastDeadline())
    return;
  start(plan, key);
}

bool CompiledMemory::abandoned() {
  std::lock_guard<std::mutex> lock(mutex);
  if (!pastDeadline())
    return false;
  for (auto &[id, result] : results)
    if (result.wait_for(std::chrono::seconds(0)) !=
        std::future_status::ready)
      return true;
  return false;
}

CompiledMemory::Result CompiledMemory::compile(const Candidate &plan,
                                               const Key &key) const {
  DialectRegistry registry;
  registry.insert<xfmr::XfmrDialect, rt::RtDialect, dist::DistDialect,
                  arith::ArithDialect, func::FuncDialect,
                  memref::MemRefDialect, tensor::TensorDialect>();
  // Compiles run side by side (prefetch): one thread each, not a pool each.
  MLIRContext context(registry, MLIRContext::Threading::DISABLED);
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

  Result result;
  // --dist-apply-plan reads the plan from a file.
  SmallString<128> path;
  int fd;
  if (llvm::sys::fs::createTemporaryFile("partition-plan", "json", fd,
                                         path)) {
    result.error = "cannot create a temporary plan file";
    return result;
  }
  {
    llvm::raw_fd_ostream os(fd, /*shouldClose=*/true);
    Candidate written = plan;
    written.microbatches = key.microbatches;
    os << written.planJson();
  }
  CompileFlowOptions options;
  options.plan = std::string(path);
  options.microbatches = key.microbatches;
  PassManager pm(&context);
  // The verifier between passes guards the compiler's own invariants,
  // which partition-compile and the tests check; here it was a tenth of
  // each compile, for an arena size.
  pm.enableVerifier(false);
  buildCompileFlow(pm, options);
  LogicalResult ran = pm.run(*module);
  ++count;
  if (failed(ran)) {
    result.error = diagnostics.empty() ? "the compile failed" : diagnostics;
  } else {
    module->walk([&](func::FuncOp function) {
      auto bytes = function->getAttrOfType<IntegerAttr>(
          rt::RtDialect::kArenaBytesAttrName);
      if (!bytes)
        return;
      // The step's token and target rows, views of the arena by now.
      double rows = 0;
      function.walk([&](memref::ViewOp view) {
        auto role =
            view->getAttrOfType<StringAttr>(rt::RtDialect::kRoleAttrName);
        if (role && (role.getValue() == "tokens" ||
                     role.getValue() == "targets")) {
          MemRefType type = view.getType();
          rows += double(type.getNumElements()) *
                  double(type.getElementTypeBitWidth() / 8);
        }
      });
      result.functions.push_back(
          {double(bytes.getInt()), rows / double(key.microbatches)});
    });
    if (result.functions.empty())
      result.error = "the compiled program has no arena";
  }
  llvm::sys::fs::remove(path);
  return result;
}

} // namespace partition::planner
