//===- partition-translate.cpp - rt IR to .ptp programs -------------------===//
//
//   partition-translate --rt-to-program planned.mlir -o model.ptp
//   partition-translate --rt-to-program cases.mlir --split-input-file \
//       -verify-diagnostics -o /dev/null
//
// One translation, so a main of its own rather than mlirTranslateMain:
// that one parses the command line with LLVM's defaults (several lines,
// exit 1), where every partition tool reports a usage error in one line
// with exit code 2 (tools/common/CommandLine.h).
//
//===----------------------------------------------------------------------===//

#include "lowering/ProgramWriter.h"
#include "tools/common/CommandLine.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Support/ToolUtilities.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/ToolOutputFile.h"

namespace cl = llvm::cl;
using namespace mlir;

namespace {

cl::OptionCategory category("partition-translate options");
cl::opt<std::string> input(cl::Positional, cl::desc("<planned.mlir>"),
                           cl::init("-"), cl::cat(category));
cl::opt<std::string> output("o", cl::desc("Output program (default: stdout)"),
                            cl::value_desc("file.ptp"), cl::init("-"),
                            cl::cat(category));
cl::opt<bool> rtToProgram(
    "rt-to-program",
    cl::desc("Write the memory-planned training step as a .ptp program (the "
             "one translation; also what runs without this flag)"),
    cl::cat(category));
cl::opt<bool> splitInputFile(
    "split-input-file",
    cl::desc("Translate each '// -----'-separated chunk on its own"),
    cl::cat(category));
cl::opt<bool> verifyDiagnostics(
    "verify-diagnostics",
    cl::desc("Check the diagnostics against the expected-* comments"),
    cl::cat(category));

using partition::tools::fail;

LogicalResult translate(std::unique_ptr<llvm::MemoryBuffer> chunk,
                        const DialectRegistry &registry,
                        llvm::raw_ostream &os) {
  MLIRContext context(registry);
  llvm::SourceMgr sources;
  sources.AddNewSourceBuffer(std::move(chunk), llvm::SMLoc());
  auto run = [&]() -> LogicalResult {
    OwningOpRef<ModuleOp> module = parseSourceFile<ModuleOp>(sources, &context);
    if (!module)
      return failure();
    return partition::writeProgram(*module, os);
  };
  if (!verifyDiagnostics) {
    SourceMgrDiagnosticHandler handler(sources, &context);
    return run();
  }
  SourceMgrDiagnosticVerifierHandler handler(sources, &context);
  context.printOpOnDiagnostic(false);
  (void)run();
  return handler.verify();
}

} // namespace

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  cl::HideUnrelatedOptions(category);
  partition::tools::parseCommandLine(
      argc, argv,
      "partition-translate: writes a memory-planned module (rt IR) as a "
      ".ptp program for partition-run\n");

  DialectRegistry registry;
  partition::registerProgramDialects(registry);
  std::string error;
  std::unique_ptr<llvm::MemoryBuffer> file = openInputFile(input, &error);
  if (!file)
    return fail(error);
  std::unique_ptr<llvm::ToolOutputFile> program =
      openOutputFile(output, &error);
  if (!program)
    return fail(error);
  auto process = [&](std::unique_ptr<llvm::MemoryBuffer> chunk,
                     llvm::raw_ostream &os) {
    return translate(std::move(chunk), registry, os);
  };
  if (failed(splitAndProcessBuffer(
          std::move(file), process, program->os(),
          splitInputFile ? kDefaultSplitMarker : llvm::StringRef())))
    return 1;
  program->keep();
  return 0;
}
