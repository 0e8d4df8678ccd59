//===- TestPrograms.cpp - models compiled in-process for e2e tests --------===//

#include "unittests/e2e/TestPrograms.h"

#include "dialects/Rt/RtDialect.h"
#include "dialects/Xfmr/XfmrDialect.h"
#include "lowering/Passes.h"
#include "lowering/ProgramWriter.h"
#include "model/ModelBuilder.h"
#include "passes/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/raw_ostream.h"

namespace partition::e2e {

std::string compileProgram(const model::ModelConfig &config,
                           int64_t microbatches, const std::string &optimizer) {
  mlir::DialectRegistry registry;
  registry.insert<xfmr::XfmrDialect, rt::RtDialect, mlir::arith::ArithDialect,
                  mlir::func::FuncDialect, mlir::memref::MemRefDialect,
                  mlir::tensor::TensorDialect>();
  mlir::MLIRContext context(registry);
  context.loadAllAvailableDialects();
  mlir::OwningOpRef<mlir::ModuleOp> module =
      model::buildForwardModule(context, config);
  if (!module)
    return {};

  // The pipeline of tools/partition-compile.
  mlir::PassManager pm(&context);
  TrainStepPassOptions step;
  step.microbatches = microbatches;
  step.optimizer = optimizer;
  step.withEval = optimizer == "adamw";
  pm.addPass(createTrainStepPass(step));
  pm.addPass(createLowerToRtPass());
  pm.addPass(createMemoryPlanPass());
  if (mlir::failed(pm.run(*module)))
    return {};
  std::string bytes;
  llvm::raw_string_ostream os(bytes);
  if (mlir::failed(writeProgram(*module, os)))
    return {};
  os.flush();
  return bytes;
}

model::ModelConfig smallGpt2() {
  model::ModelConfig config = *model::getPreset("gpt2-tiny");
  config.layers = 2;
  config.hidden = 32;
  config.heads = 4;
  config.kvHeads = 4;
  config.ffn = 128;
  config.vocab = 64;
  config.seqLen = 16;
  config.batch = 2;
  return config;
}

model::ModelConfig smallLlama() {
  model::ModelConfig config = *model::getPreset("llama-tiny");
  config.layers = 2;
  config.hidden = 32;
  config.heads = 4;
  config.kvHeads = 2;
  config.ffn = 48;
  config.vocab = 64;
  config.seqLen = 16;
  config.batch = 2;
  return config;
}

} // namespace partition::e2e
