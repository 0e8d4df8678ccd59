//===- DataParallel.cpp - --dist-data-parallel: split the batch over dp ---===//
//
// The SPMD partitioner (passes/Spmd.h) with the batch split over dp and the
// weights whole: DDP.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"
#include "passes/Spmd.h"

#include "dialects/Dist/DistDialect.h"

namespace partition {
#define GEN_PASS_DEF_DATAPARALLELPASS
#include "passes/Passes.h.inc"
} // namespace partition

namespace partition {
namespace {

struct DataParallelPass : impl::DataParallelPassBase<DataParallelPass> {
  using DataParallelPassBase::DataParallelPassBase;

  void runOnOperation() override {
    SpmdOptions options;
    options.dataParallel = true;
    options.tensorParallel = false;
    options.bucketBytes = bucketBytes;
    if (mlir::failed(partitionSteps(getOperation(), options)))
      signalPassFailure();
  }
};

} // namespace
} // namespace partition
