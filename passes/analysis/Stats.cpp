//===- Stats.cpp - print model statistics ---------------------------------===//

#include "passes/analysis/ModelStats.h"
#include "passes/Passes.h"

#include "llvm/Support/raw_ostream.h"

namespace partition {
#define GEN_PASS_DEF_STATSPASS
#include "passes/Passes.h.inc"
} // namespace partition

using namespace mlir;

namespace partition {
namespace {

struct StatsPass : impl::StatsPassBase<StatsPass> {
  void runOnOperation() override {
    for (auto function : getOperation().getOps<func::FuncOp>()) {
      if (!isModelFunction(function))
        continue;
      FailureOr<ModelStats> stats = computeModelStats(function);
      if (failed(stats))
        return signalPassFailure();
      llvm::outs() << "function: " << function.getSymName() << "\n"
                   << "parameters: " << stats->parameters << "\n"
                   << "tokens_per_step: " << stats->tokensPerStep << "\n"
                   << "flops_per_step: " << stats->flopsPerStep << "\n";
    }
    llvm::outs().flush();
    markAllAnalysesPreserved();
  }
};

} // namespace
} // namespace partition
