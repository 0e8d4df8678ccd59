//===- PipelineInfo.cpp - the split and schedule --dist-pipeline chose ----===//

#include "passes/pipeline/PipelineInfo.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"

using namespace mlir;

namespace partition::pipeline {

OrError<Schedule> PipelineInfo::generate() const {
  std::optional<ScheduleKind> kind = parseScheduleKind(schedule);
  if (!kind)
    return OrError<Schedule>::failure("unknown schedule \"" + schedule + "\"");
  ScheduleConfig config;
  config.kind = *kind;
  config.stages = stages;
  config.microbatches = microbatches;
  config.chunks = virtualStages;
  return generateSchedule(config);
}

double PipelineInfo::cost(int stage, const Action &action) const {
  size_t chunk = static_cast<size_t>(action.chunk * stages + stage);
  const std::vector<double> &costs =
      action.kind == ActionKind::Forward         ? forward
      : action.kind == ActionKind::BackwardInput ? backwardInput
                                                 : backwardWeight;
  return chunk < costs.size() ? costs[chunk] : 0;
}

void writePipelineInfo(ModuleOp module, const PipelineInfo &info) {
  Builder b(module.getContext());
  auto ints = [&](auto values) {
    return b.getDenseI64ArrayAttr(
        llvm::to_vector(llvm::map_range(values, [](auto v) { return int64_t(v); })));
  };
  llvm::SmallVector<Attribute> tied;
  for (const std::string &name : info.tied)
    tied.push_back(b.getStringAttr(name));
  module->setAttr(
      kPipelineInfoAttrName,
      b.getDictionaryAttr({
          b.getNamedAttr("schedule", b.getStringAttr(info.schedule)),
          b.getNamedAttr("stages", b.getI64IntegerAttr(info.stages)),
          b.getNamedAttr("microbatches",
                         b.getI64IntegerAttr(info.microbatches)),
          b.getNamedAttr("virtual_stages",
                         b.getI64IntegerAttr(info.virtualStages)),
          b.getNamedAttr("chunk_layers", ints(info.chunkLayers)),
          b.getNamedAttr("forward", b.getDenseF64ArrayAttr(info.forward)),
          b.getNamedAttr("backward_input",
                         b.getDenseF64ArrayAttr(info.backwardInput)),
          b.getNamedAttr("backward_weight",
                         b.getDenseF64ArrayAttr(info.backwardWeight)),
          b.getNamedAttr("activation_bytes", ints(info.activationBytes)),
          b.getNamedAttr("tied", b.getArrayAttr(tied)),
      }));
}

std::optional<PipelineInfo> readPipelineInfo(ModuleOp module) {
  auto dict = module->getAttrOfType<DictionaryAttr>(kPipelineInfoAttrName);
  if (!dict)
    return std::nullopt;
  PipelineInfo info;
  auto schedule = dict.getAs<StringAttr>("schedule");
  auto stages = dict.getAs<IntegerAttr>("stages");
  auto microbatches = dict.getAs<IntegerAttr>("microbatches");
  auto virtualStages = dict.getAs<IntegerAttr>("virtual_stages");
  auto layers = dict.getAs<DenseI64ArrayAttr>("chunk_layers");
  auto forward = dict.getAs<DenseF64ArrayAttr>("forward");
  auto backwardInput = dict.getAs<DenseF64ArrayAttr>("backward_input");
  auto backwardWeight = dict.getAs<DenseF64ArrayAttr>("backward_weight");
  auto activations = dict.getAs<DenseI64ArrayAttr>("activation_bytes");
  auto tied = dict.getAs<ArrayAttr>("tied");
  if (!schedule || !stages || !microbatches || !virtualStages || !layers ||
      !forward || !backwardInput || !backwardWeight || !activations || !tied)
    return std::nullopt;
  info.schedule = schedule.str();
  info.stages = static_cast<int>(stages.getInt());
  info.microbatches = static_cast<int>(microbatches.getInt());
  info.virtualStages = static_cast<int>(virtualStages.getInt());
  for (int64_t count : layers.asArrayRef())
    info.chunkLayers.push_back(static_cast<int>(count));
  info.forward.assign(forward.asArrayRef().begin(), forward.asArrayRef().end());
  info.backwardInput.assign(backwardInput.asArrayRef().begin(),
                            backwardInput.asArrayRef().end());
  info.backwardWeight.assign(backwardWeight.asArrayRef().begin(),
                             backwardWeight.asArrayRef().end());
  info.activationBytes.assign(activations.asArrayRef().begin(),
                              activations.asArrayRef().end());
  for (Attribute name : tied)
    if (auto text = dyn_cast<StringAttr>(name))
      info.tied.push_back(text.str());
  if (info.stages < 1 || info.virtualStages < 1 ||
      static_cast<int>(info.chunkLayers.size()) != info.chunks())
    return std::nullopt;
  return info;
}

} // namespace partition::pipeline
