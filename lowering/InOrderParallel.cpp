//===- InOrderParallel.cpp - one task per function, reported in order -----===//

#include "lowering/InOrderParallel.h"

#include "mlir/IR/Diagnostics.h"
#include "llvm/Support/ThreadPool.h"

#include <algorithm>
#include <atomic>
#include <limits>
#include <mutex>
#include <vector>

using namespace mlir;

namespace partition {

namespace {
/// The task this thread runs, for the handler (none outside a task: such
/// diagnostics go on to the handlers registered before).
constexpr size_t kNoTask = std::numeric_limits<size_t>::max();
thread_local size_t currentTask = kNoTask;
} // namespace

LogicalResult
failableParallelForEachInOrder(MLIRContext *context, size_t count,
                               function_ref<LogicalResult(size_t)> task) {
  std::vector<std::vector<Diagnostic>> captured(count);
  std::vector<char> failedTask(count, 0);
  std::mutex mutex;
  DiagnosticEngine &engine = context->getDiagEngine();
  DiagnosticEngine::HandlerID handler =
      engine.registerHandler([&](Diagnostic &diagnostic) -> LogicalResult {
        if (currentTask == kNoTask)
          return failure();
        std::lock_guard<std::mutex> lock(mutex);
        captured[currentTask].push_back(std::move(diagnostic));
        return success();
      });
  // On threads every task runs: which ones a failure would skip depends on
  // their timing. (mlir::failableParallelForEach cannot be used: its own
  // ParallelDiagnosticHandler would take the diagnostics first.) A task
  // that runs this again inside itself gets its inner tasks' diagnostics
  // back at their end, on its own thread, as its own.
  auto run = [&](size_t index) {
    size_t outer = currentTask;
    currentTask = index;
    failedTask[index] = failed(task(index));
    currentTask = outer;
  };
  if (!context->isMultithreadingEnabled() || count <= 1) {
    // One thread: a loop, which stops at the first failure.
    for (size_t index = 0; index < count; ++index) {
      run(index);
      if (failedTask[index])
        break;
    }
  } else {
    std::atomic<size_t> next(0);
    llvm::ThreadPoolInterface &pool = context->getThreadPool();
    llvm::ThreadPoolTaskGroup tasks(pool);
    size_t workers = std::min<size_t>(count, pool.getMaxConcurrency());
    for (size_t worker = 0; worker < workers; ++worker)
      tasks.async([&] {
        for (size_t index; (index = next++) < count;)
          run(index);
      });
    // A caller on one of the pool's threads takes part in the tasks.
    tasks.wait();
  }
  engine.eraseHandler(handler);
  for (size_t index = 0; index < count; ++index) {
    for (Diagnostic &diagnostic : captured[index])
      engine.emit(std::move(diagnostic));
    if (failedTask[index])
      return failure();
  }
  return success();
}

} // namespace partition
