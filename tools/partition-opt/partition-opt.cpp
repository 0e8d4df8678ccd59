//===- partition-opt.cpp - run partition passes on model IR ---------------===//

#include "dialects/Dist/DistDialect.h"
#include "dialects/Rt/RtDialect.h"
#include "dialects/Xfmr/XfmrDialect.h"
#include "lowering/Passes.h"
#include "passes/Passes.h"
#include "passes/partition/ShardPipeline.h"
#include "passes/Pipeline.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  registry.insert<partition::xfmr::XfmrDialect, partition::rt::RtDialect,
                  partition::dist::DistDialect,
                  mlir::arith::ArithDialect, mlir::func::FuncDialect,
                  mlir::memref::MemRefDialect, mlir::tensor::TensorDialect>();
  partition::registerPartitionPasses();
  partition::registerShardPipelines();
  partition::registerLoweringPasses();
  partition::registerCompilePipeline();
  // Generic clean-ups (canonicalize, cse, ...) compose with our passes.
  mlir::registerTransformsPasses();
  return mlir::asMainReturnCode(mlir::MlirOptMain(
      argc, argv, "partition optimizer: passes over transformer model IR\n",
      registry));
}
