//===- partition-opt.cpp - run partition passes on model IR ---------------===//

#include "dialects/Dist/DistDialect.h"
#include "dialects/Rt/RtDialect.h"
#include "dialects/Xfmr/XfmrDialect.h"
#include "lowering/Passes.h"
#include "passes/Passes.h"
#include "passes/partition/ShardPasses.h"
#include "passes/CompileFlow.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/ADT/STLExtras.h"

#include <vector>

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  registry.insert<partition::xfmr::XfmrDialect, partition::rt::RtDialect,
                  partition::dist::DistDialect,
                  mlir::arith::ArithDialect, mlir::func::FuncDialect,
                  mlir::memref::MemRefDialect, mlir::tensor::TensorDialect>();
  partition::registerPartitionPasses();
  partition::registerShardPasses();
  partition::registerLoweringPasses();
  partition::registerCompileFlow();
  // Generic clean-ups (canonicalize, cse, ...) compose with our passes.
  mlir::registerTransformsPasses();
  // An error on the module (or a whole-model function) would otherwise be
  // followed by a dump of it ("see current operation: ..."), kilobytes of
  // IR for a real model: off unless asked for with
  // --mlir-print-op-on-diagnostic.
  std::vector<char *> args(argv, argv + argc);
  bool asked = llvm::any_of(args, [](char *arg) {
    return llvm::StringRef(arg).ltrim('-').starts_with(
        "mlir-print-op-on-diagnostic");
  });
  static char quiet[] = "--mlir-print-op-on-diagnostic=false";
  if (!asked)
    args.insert(args.begin() + 1, quiet);
  return mlir::asMainReturnCode(mlir::MlirOptMain(
      static_cast<int>(args.size()), args.data(),
      "partition optimizer: passes over transformer model IR\n", registry));
}
