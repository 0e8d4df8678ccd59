//===- ProgramWriter.cpp - rt IR to the .ptp FlatBuffer -------------------===//

#include "lowering/ProgramWriter.h"

#include "lowering/PipelineStages.h"
#include "lowering/ProgramFields.h"
#include "lowering/StreamWriter.h"

#include "dialects/CheckedSize.h"
#include "dialects/Dist/DistDialect.h"
#include "dialects/Dist/DistOps.h"
#include "dialects/Rt/RtOps.h"
#include "dialects/Xfmr/XfmrDialect.h"
#include "runtime/program/KernelTable.h"
#include "runtime/program/ProgramFormat.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Tools/mlir-translate/Translation.h"

#include <map>

using namespace mlir;
using partition::rt::AllGatherOp;
using partition::rt::AllReduceOp;
using partition::rt::ReduceScatterOp;
using partition::rt::KernelOp;
using partition::rt::RecvOp;
using partition::rt::RtDialect;
using partition::rt::SendOp;

namespace partition {
namespace {

/// Writes the program of `streams` (written into `fbb`, in stage order):
/// the model description from `trainStep`, the module's mesh with each
/// axis's role.
LogicalResult
finishProgram(flatbuffers::FlatBufferBuilder &fbb, ModuleOp module,
              dist::MeshOp mesh, func::FuncOp trainStep,
              std::vector<flatbuffers::Offset<ptp::Stream>> &streams,
              bool nvme, llvm::raw_ostream &os) {
  // The NVMe tier's files go under the plan's path.
  auto path =
      module->getAttrOfType<StringAttr>(RtDialect::kOffloadPathAttrName);
  if (nvme && !path)
    return module.emitError()
           << "the program has an nvme tier but the module no "
           << RtDialect::kOffloadPathAttrName
           << " (the directory of its files; --rt-offload-optimizer sets it)";
  std::string model = toJson(trainStep->getAttrOfType<DictionaryAttr>(
      xfmr::XfmrDialect::kModelAttrName));
  std::string train = toJson(trainStep->getAttrOfType<DictionaryAttr>(
      xfmr::XfmrDialect::kTrainStepAttrName));
  // Without a mesh the field stays absent: one device.
  // Each axis with the role the plan gives it (none without a plan).
  dist::PlanAttr plan = dist::getPlan(module);
  auto roleOf = [&](StringRef axis) {
    if (plan)
      for (dist::PlanAxisAttr planAxis : plan.getAxes())
        if (planAxis.getName() == axis)
          switch (planAxis.getRole()) {
          case dist::AxisRole::Data:
            return ptp::AxisRole::Data;
          case dist::AxisRole::Expert:
            return ptp::AxisRole::Expert;
          case dist::AxisRole::Tensor:
            return ptp::AxisRole::Tensor;
          case dist::AxisRole::Pipeline:
            return ptp::AxisRole::Pipeline;
          case dist::AxisRole::Context:
            return ptp::AxisRole::Context;
          }
    return ptp::AxisRole::None;
  };
  std::vector<flatbuffers::Offset<ptp::MeshAxis>> meshAxes;
  if (mesh)
    for (auto [name, size] :
         llvm::zip(mesh.getAxisNames(), mesh.getAxisSizes())) {
      StringRef axis = cast<StringAttr>(name).getValue();
      meshAxes.push_back(ptp::CreateMeshAxisDirect(fbb, axis.str().c_str(),
                                                   size, roleOf(axis)));
    }
  // Context parallelism's zigzag: the order the tokens are fed in.
  int64_t sequenceChunks =
      plan && plan.getContextChunks() > 1 ? plan.getContextChunks() : 0;
  auto program = ptp::CreateProgramDirect(
      fbb, ptp::kSchemaVersion, model.c_str(), train.c_str(),
      mesh ? &meshAxes : nullptr, &streams, /*replicas=*/nullptr,
      sequenceChunks, nvme ? path.getValue().str().c_str() : nullptr);
  ptp::FinishProgramBuffer(fbb, program);
  os.write(reinterpret_cast<const char *>(fbb.GetBufferPointer()),
           fbb.GetSize());
  return success();
}

} // namespace

LogicalResult writeProgram(ModuleOp module, llvm::raw_ostream &os) {
  SmallVector<func::FuncOp> planned;
  for (auto function : module.getOps<func::FuncOp>())
    if (function->hasAttr(RtDialect::kArenaBytesAttrName))
      planned.push_back(function);
  if (planned.empty())
    return module.emitError("no memory-planned function (rt.arena_bytes); "
                            "run --lower-to-rt --lower-memory-plan first");
  // The program runs on one mesh (Program.mesh).
  dist::MeshOp mesh;
  for (auto candidate : module.getOps<dist::MeshOp>()) {
    if (mesh)
      return candidate.emitOpError()
             << "is a second device mesh: a program runs on one mesh, and "
             << "this module already declares @" << mesh.getSymName();
    mesh = candidate;
  }
  if (mesh && mesh.getAxisNames().size() > 255)
    return mesh.emitOpError("has more than 255 axes, more than a program can "
                            "index");
  // One stream per pipeline stage (dist.pipeline_stage), or one.
  FailureOr<SmallVector<SmallVector<func::FuncOp>>> stages =
      groupByPipelineStage(module, planned);
  if (failed(stages))
    return failure();
  auto arenaBytes = [](func::FuncOp function) {
    return cast<IntegerAttr>(function->getAttr(RtDialect::kArenaBytesAttrName))
        .getInt();
  };
  flatbuffers::FlatBufferBuilder fbb;
  std::vector<flatbuffers::Offset<ptp::Stream>> streams;
  func::FuncOp firstTrainStep;
  bool nvme = false;
  for (SmallVector<func::FuncOp> &stage : *stages) {
    // The training step comes first; the model description is taken from
    // the first stage's.
    std::stable_partition(stage.begin(), stage.end(), [](func::FuncOp f) {
      return f->hasAttr(xfmr::XfmrDialect::kTrainStepAttrName);
    });
    if (!firstTrainStep)
      firstTrainStep = stage.front();
    int64_t arena = arenaBytes(stage.front());
    if (arena < 0 || arena > kMaxAddressableBytes)
      return stage.front().emitError()
             << "arena of " << arena << " bytes: it must be between 0 and "
             << kMaxAddressableBytes << " bytes (2^48, what a machine can "
             << "address)";
    StreamWriter writer(fbb, arena, mesh);
    for (func::FuncOp function : stage) {
      if (arenaBytes(function) != arena)
        return function.emitError("all planned functions of a stage must "
                                  "share one arena");
      if (failed(writer.addFunction(function)))
        return failure();
    }
    nvme |= writer.hasNvmeTier();
    streams.push_back(writer.finish());
  }
  return finishProgram(fbb, module, mesh, firstTrainStep, streams, nvme, os);
}

void registerProgramDialects(DialectRegistry &registry) {
  registry.insert<rt::RtDialect, dist::DistDialect, xfmr::XfmrDialect,
                  arith::ArithDialect, func::FuncDialect,
                  memref::MemRefDialect>();
}

void registerProgramTranslation() {
  TranslateFromMLIRRegistration registration(
      "rt-to-program", "write a memory-planned training step as a .ptp program",
      [](Operation *op, llvm::raw_ostream &os) -> LogicalResult {
        auto module = dyn_cast<ModuleOp>(op);
        if (!module)
          return op->emitError("expected a module");
        return writeProgram(module, os);
      },
      registerProgramDialects);
}

} // namespace partition
