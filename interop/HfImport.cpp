//===- HfImport.cpp - a transformers model directory as a partition model -===//

#include "interop/HfImport.h"

#include "interop/InteropError.h"
#include "runtime/checkpoint/Checkpoint.h"
#include "runtime/checkpoint/Safetensors.h"
#include "support/JsonReader.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <sstream>

namespace ckpt = partition::runtime::checkpoint;
namespace fs = std::filesystem;
using nlohmann::json;
using partition::model::Arch;

namespace partition::interop {
namespace {

json readJson(const std::string &path, const std::string &what) {
  std::ifstream in(path);
  if (!in)
    throw InteropError(path + ": cannot open " + what);
  std::stringstream text;
  text << in.rdbuf();
  // The shared reader: duplicate keys, depth and numbers beyond a double's
  // range refused (nlohmann's DOM parser would keep the last key silently).
  std::string problem;
  std::optional<json> parsed = jsonreader::parseJson(text.str(), problem);
  if (!parsed)
    throw InteropError(path + ": " + problem + "; expected " + what);
  return *parsed;
}

/// The safetensors files of a model directory and which holds each tensor.
struct WeightFiles {
  std::vector<std::unique_ptr<ckpt::Safetensors>> files;
  std::map<std::string, const ckpt::Safetensors *> where;

  void add(const ckpt::Safetensors &file, const std::string &name) {
    if (!where.emplace(name, &file).second)
      throw InteropError(file.path() + ": tensor '" + name +
                         "' is also in " + where.at(name)->path() +
                         "; a model directory holds each tensor once");
  }
};

WeightFiles openWeights(const std::string &dir) {
  WeightFiles weights;
  std::string single = dir + "/model.safetensors";
  std::string index = dir + "/model.safetensors.index.json";
  if (fs::exists(single)) {
    const ckpt::Safetensors &file = *weights.files.emplace_back(
        std::make_unique<ckpt::Safetensors>(ckpt::Safetensors::open(single)));
    for (const std::string &name : file.names())
      weights.add(file, name);
    return weights;
  }
  if (!fs::exists(index)) {
    bool pickle = fs::exists(dir + "/pytorch_model.bin");
    throw InteropError(
        dir + ": holds no model.safetensors nor model.safetensors.index.json" +
        (pickle ? std::string(" (only pytorch_model.bin, which "
                              "partition-import does not read: save it with "
                              "save_pretrained(dir, safe_serialization=True))")
                : std::string("; give a transformers model directory")));
  }
  json parsed = readJson(index, "a safetensors index (weight_map)");
  if (!parsed.is_object() || !parsed.contains("weight_map") ||
      !parsed["weight_map"].is_object())
    throw InteropError(index + ": weight_map is missing or not an object");
  std::map<std::string, const ckpt::Safetensors *> byFile;
  for (const auto &[name, shard] : parsed["weight_map"].items()) {
    if (!shard.is_string() || shard.get<std::string>().empty() ||
        shard.get<std::string>().find('/') != std::string::npos)
      throw InteropError(index + ": weight_map[\"" + name +
                         "\"] must be a file name in the directory, got " +
                         shard.dump());
    std::string shardName = shard.get<std::string>();
    if (!byFile.count(shardName)) {
      std::string path = dir + "/" + shardName;
      if (!fs::exists(path))
        throw InteropError(index + ": lists shard " + shardName +
                           ", which is missing from " + dir);
      byFile[shardName] = weights.files
                              .emplace_back(std::make_unique<ckpt::Safetensors>(
                                  ckpt::Safetensors::open(path)))
                              .get();
    }
    const ckpt::Safetensors &file = *byFile[shardName];
    if (!file.contains(name))
      throw InteropError(index + ": tensor '" + name + "' is listed in " +
                         shardName + ", which does not hold it");
    weights.add(file, name);
  }
  // A tensor in a shard but not in the index would be silently dropped.
  for (const auto &file : weights.files)
    for (const std::string &name : file->names())
      if (!weights.where.count(name))
        throw InteropError(file->path() + ": tensor '" + name +
                           "' is not listed in " + index);
  return weights;
}

/// Tensors transformers keeps in some files that are not parameters: GPT-2's
/// causal-mask buffers and old Llama files' rotary frequencies.
bool isBuffer(const std::string &name) {
  auto endsWith = [&](const std::string &suffix) {
    return name.size() >= suffix.size() &&
           name.compare(name.size() - suffix.size(), suffix.size(), suffix) ==
               0;
  };
  return endsWith(".attn.bias") || endsWith(".attn.masked_bias") ||
         endsWith(".rotary_emb.inv_freq");
}

Tensor readAsFloat(const ckpt::Safetensors &file, const std::string &name) {
  const ckpt::TensorInfo &info = file.info(name);
  Tensor tensor;
  tensor.shape = info.shape;
  size_t elements = size_t(info.elements());
  tensor.values.resize(elements);
  switch (info.dtype) {
  case ckpt::DType::F32:
    file.readRaw(name, tensor.values.data(), elements * sizeof(float));
    break;
  case ckpt::DType::BF16:
  case ckpt::DType::F16: {
    std::vector<uint16_t> halves(elements);
    file.readRaw(name, halves.data(), elements * sizeof(uint16_t));
    for (size_t i = 0; i < elements; ++i)
      tensor.values[i] = info.dtype == ckpt::DType::BF16
                             ? bf16ToFloat(halves[i])
                             : f16ToFloat(halves[i]);
    break;
  }
  default:
    throw InteropError(file.path() + ": tensor '" + name + "' is " +
                       ckpt::dtypeName(info.dtype) +
                       "; partition-import reads F32, BF16 and F16 weights");
  }
  for (size_t i = 0; i < elements; ++i)
    if (!std::isfinite(tensor.values[i]))
      throw InteropError(file.path() + ": tensor '" + name + "' element " +
                         std::to_string(i) +
                         " is not finite; the weights are damaged");
  return tensor;
}

std::string shapeText(const Shape &shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + "]";
}

} // namespace

HfModel readHfModel(const std::string &dir, const TrainingShape &shape) {
  if (!fs::is_directory(dir))
    throw InteropError(dir + ": not a directory; give a transformers model "
                             "directory (config.json + model.safetensors)");
  std::string configPath = dir + "/config.json";
  HfModel model;
  model.config = fromHfConfig(
      readJson(configPath, "a transformers config.json"), configPath, shape);
  const model::ModelConfig &config = model.config;
  WeightFiles weights = openWeights(dir);

  // Another naming of the same GPT-2 tensors: the original OpenAI upload
  // (GPT2Model) has no "transformer." prefix.
  auto locate = [&](const std::string &name) -> std::string {
    if (weights.where.count(name))
      return name;
    const std::string prefix = "transformer.";
    if (config.arch == Arch::GPT2 && name.rfind(prefix, 0) == 0 &&
        weights.where.count(name.substr(prefix.size())))
      return name.substr(prefix.size());
    return "";
  };

  // Mixtral's experts: one tensor per expert (save_pretrained's files),
  // or transformers 5's fused module state when the directory holds it
  // (a mixture of the two is refused below, tensor by tensor).
  MoeLayout layout = MoeLayout::PerExpert;
  for (int64_t layer = 0; layer < config.layers; ++layer)
    if (config.isMoeLayer(layer) &&
        weights.where.count("model.layers." + std::to_string(layer) +
                            ".mlp.experts.gate_up_proj"))
      layout = MoeLayout::Fused;

  std::map<std::string, Shape> shapes;
  for (const ParamShape &param : modelParameters(config))
    shapes[param.name] = param.shape;
  std::set<std::string> used;
  std::map<std::string, Tensor> params;
  for (const HfTensorMap &map : hfTensorMap(config, layout)) {
    std::string name = locate(map.hfName);
    if (name.empty())
      throw InteropError(dir + ": tensor '" + map.hfName +
                         "' is missing; the weights do not match config.json");
    const ckpt::Safetensors &file = *weights.where.at(name);
    Shape expected = hfShape(map, shapes);
    const Shape &actual = file.info(name).shape;
    if (actual != expected) {
      bool embedding = map.parts.front() == "wte" ||
                       map.parts.front() == "tok_embeddings.weight" ||
                       map.parts.front() == "output.weight";
      if (embedding && actual.size() == 2 && actual[1] == expected[1] &&
          actual[0] != expected[0])
        throw InteropError(file.path() + ": tensor '" + name + "' has " +
                           std::to_string(actual[0]) + " rows but vocab_size "
                           "is " + std::to_string(config.vocab) +
                           ": a padded vocabulary, which partition's models "
                           "cannot express; cut the table to vocab_size rows "
                           "or set vocab_size to the rows");
      throw InteropError(file.path() + ": tensor '" + name + "' is " +
                         shapeText(actual) + " but config.json gives " +
                         shapeText(expected));
    }
    fromHf(map, readAsFloat(file, name), shapes, params);
    used.insert(name);
  }

  if (config.tiedEmbedding()) {
    // A tied head may be saved too: it must be the embedding itself.
    const std::string embedding =
        config.arch == Arch::GPT2 ? "wte" : "tok_embeddings.weight";
    const std::string hfEmbedding = config.arch == Arch::GPT2
                                        ? "transformer.wte.weight"
                                        : "model.embed_tokens.weight";
    if (std::string head = locate("lm_head.weight"); !head.empty()) {
      Tensor tensor = readAsFloat(*weights.where.at(head), head);
      const Tensor &table = params.at(embedding);
      if (tensor.shape != table.shape ||
          std::memcmp(tensor.values.data(), table.values.data(),
                      table.values.size() * sizeof(float)) != 0)
        throw InteropError(weights.where.at(head)->path() +
                           ": lm_head.weight differs from " + hfEmbedding +
                           " although tie_word_embeddings is true: an "
                           "untied head; set tie_word_embeddings to false" +
                           (config.arch == Arch::GPT2
                                ? std::string(" (which partition's GPT-2 "
                                              "cannot express)")
                                : std::string()));
      used.insert(head);
    }
  }
  for (const auto &[name, file] : weights.where)
    if (!used.count(name) && !isBuffer(name))
      throw InteropError(file->path() + ": tensor '" + name +
                         "' is not a parameter of a " +
                         model::archName(config.arch) +
                         " model as config.json describes it; partition-"
                         "import refuses weights it would drop");

  for (const ParamShape &param : modelParameters(config))
    model.params.push_back({param.name, std::move(params.at(param.name))});
  return model;
}

void saveWeightsCheckpoint(const std::string &dir, const HfModel &model,
                           const std::string &source) {
  std::vector<ckpt::TensorRef> tensors;
  for (const auto &[name, tensor] : model.params)
    tensors.push_back({name, ckpt::DType::F32, tensor.shape,
                       tensor.values.data(),
                       tensor.values.size() * sizeof(float)});
  ckpt::Metadata extra{{"model", modelToJson(model.config).dump()},
                       {"imported_from", source}};
  ckpt::saveCheckpoint(dir, tensors, ckpt::TrainingState{}, extra);
}

} // namespace partition::interop
