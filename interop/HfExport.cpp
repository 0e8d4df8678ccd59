//===- HfExport.cpp - a checkpoint as a transformers model directory ------===//

#include "interop/HfExport.h"

#include "interop/HfConfig.h"
#include "interop/HfMoe.h"
#include "interop/HfWeights.h"
#include "interop/InteropError.h"
#include "runtime/checkpoint/AtomicFile.h"
#include "runtime/checkpoint/Checkpoint.h"
#include "support/JsonReader.h"

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <map>
#include <system_error>

namespace ckpt = partition::runtime::checkpoint;

namespace partition::interop {
namespace {

void writeText(const std::string &path, const std::string &text) {
  ckpt::AtomicFile file(path);
  file.write(text.data(), text.size());
  file.commit();
}

std::optional<std::string> readFile(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return std::nullopt;
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

/// bos_token_id, eos_token_id and pad_token_id of a config.json or
/// generation_config.json: null, an id or a list of ids, each below
/// `vocab`. Absent keys are left out.
nlohmann::json specialIds(const std::string &path, const std::string &text,
                          int64_t vocab) {
  std::string problem;
  std::optional<nlohmann::json> parsed = jsonreader::parseJson(text, problem);
  if (!parsed || !parsed->is_object())
    throw InteropError(path + ": " +
                       (problem.empty() ? "not a JSON object" : problem) +
                       "; expected the tokenizer's model configuration");
  nlohmann::json ids = nlohmann::json::object();
  for (const char *key : {"bos_token_id", "eos_token_id", "pad_token_id"}) {
    if (!parsed->contains(key))
      continue;
    const nlohmann::json &value = parsed->at(key);
    bool ok = value.is_null();
    auto valid = [&](const nlohmann::json &id) {
      return id.is_number_integer() && id.get<int64_t>() >= 0 &&
             id.get<int64_t>() < vocab;
    };
    if (value.is_array()) {
      ok = true;
      for (const nlohmann::json &id : value)
        ok = ok && valid(id);
    } else if (!ok) {
      ok = valid(value);
    }
    if (!ok)
      throw InteropError(path + ": " + key + " = " + value.dump() +
                         " is not a token id (or list of them) below the "
                         "model's vocabulary of " + std::to_string(vocab));
    ids[key] = value;
  }
  return ids;
}

} // namespace

const std::vector<std::string> &tokenizerFiles() {
  static const std::vector<std::string> files = {
      "tokenizer.json",      "tokenizer_config.json",
      "special_tokens_map.json", "tokenizer.model",
      "vocab.json",          "merges.txt",
      "added_tokens.json",   "chat_template.jinja",
      "generation_config.json"};
  return files;
}

ExportResult exportHf(const std::string &checkpointDir,
                      const std::string &outDir, const std::string &dtype,
                      const std::string &tokenizerDir) {
  if (dtype != "fp32" && dtype != "bf16")
    throw InteropError("--dtype must be fp32 or bf16, got '" + dtype + "'");
  ckpt::Checkpoint checkpoint = ckpt::openCheckpoint(checkpointDir);
  const std::string &file = checkpoint.tensors.path();
  const ckpt::Metadata &metadata = checkpoint.tensors.metadata();
  auto model = metadata.find("model");
  if (model == metadata.end())
    throw InteropError(file + ": the checkpoint holds no model configuration "
                              "(\"model\" metadata); it was not written by "
                              "partition-run or partition-import");
  std::string problem;
  std::optional<nlohmann::json> parsed =
      jsonreader::parseJson(model->second, problem);
  if (!parsed)
    throw InteropError(file + ": the \"model\" metadata is not valid JSON (" +
                       problem + ")");
  const nlohmann::json &modelJson = *parsed;
  ExportResult result;
  result.config = modelFromJson(modelJson, file);
  if (std::string problem = moeExportProblem(result.config); !problem.empty())
    throw InteropError(file + ": " + problem);
  result.step = checkpoint.state.step;

  // Every parameter, verified, before anything is written.
  std::map<std::string, Tensor> params;
  for (const ParamShape &param : modelParameters(result.config)) {
    if (!checkpoint.tensors.contains(param.name))
      throw InteropError(file + ": the checkpoint lacks parameter '" +
                         param.name + "' of its own model configuration; "
                                      "the file is damaged");
    Tensor &tensor = params[param.name];
    tensor.shape = param.shape;
    int64_t elements = 1;
    for (int64_t dim : param.shape)
      elements *= dim;
    tensor.values.resize(size_t(elements));
    checkpoint.read(param.name, ckpt::DType::F32, param.shape,
                    tensor.values.data(), tensor.values.size() * sizeof(float));
  }

  bool bf16 = dtype == "bf16";
  std::vector<Tensor> hf;
  std::vector<std::vector<uint16_t>> halves;
  std::vector<ckpt::TensorRef> refs;
  std::vector<HfTensorMap> maps = hfTensorMap(result.config);
  hf.reserve(maps.size());
  halves.reserve(maps.size());
  for (const HfTensorMap &map : maps) {
    hf.push_back(toHf(map, params));
    const Tensor &tensor = hf.back();
    if (bf16) {
      std::vector<uint16_t> &half = halves.emplace_back(tensor.values.size());
      for (size_t i = 0; i < half.size(); ++i) {
        half[i] = floatToBf16(tensor.values[i]);
        // Within 2^-8 of FLT_MAX a value rounds to infinity: refuse rather
        // than write a model that computes inf.
        if ((half[i] & 0x7fffu) == 0x7f80u)
          throw InteropError(file + ": parameter values of '" + map.hfName +
                             "' (" + std::to_string(tensor.values[i]) +
                             ") overflow bf16; export with --dtype fp32");
      }
      refs.push_back({map.hfName, ckpt::DType::BF16, tensor.shape, half.data(),
                      half.size() * sizeof(uint16_t)});
    } else {
      refs.push_back({map.hfName, ckpt::DType::F32, tensor.shape,
                      tensor.values.data(),
                      tensor.values.size() * sizeof(float)});
    }
  }
  result.tensors = refs.size();

  // The tokenizer's files, read whole before anything is written.
  std::vector<std::pair<std::string, std::string>> copies;
  nlohmann::json ids = nlohmann::json::object();
  if (!tokenizerDir.empty()) {
    if (!std::filesystem::is_directory(tokenizerDir))
      throw InteropError(tokenizerDir + ": --tokenizer is not a directory");
    bool tokenizer = false;
    for (const std::string &name : tokenizerFiles()) {
      std::optional<std::string> text = readFile(tokenizerDir + "/" + name);
      if (!text)
        continue;
      tokenizer = tokenizer || name != "generation_config.json";
      copies.emplace_back(name, std::move(*text));
    }
    if (!tokenizer)
      throw InteropError(tokenizerDir +
                         ": holds no tokenizer files (tokenizer.json, "
                         "tokenizer.model, vocab.json, ...)");
    for (const char *name : {"generation_config.json", "config.json"}) {
      std::string path = tokenizerDir + "/" + name;
      if (std::optional<std::string> text = readFile(path))
        ids.update(specialIds(path, *text, result.config.vocab));
    }
    result.tokenizerFiles = copies.size();
  }
  nlohmann::json config =
      hfConfig(result.config, bf16 ? "bfloat16" : "float32");
  for (const auto &[key, value] : ids.items())
    config[key] = value;

  std::error_code error;
  std::filesystem::create_directories(outDir, error);
  if (error)
    throw InteropError(outDir + ": cannot create the output directory (" +
                       error.message() + ")");
  // transformers refuses a safetensors file without format "pt".
  ckpt::writeSafetensors(outDir + "/model.safetensors", refs,
                         {{"format", "pt"}});
  writeText(outDir + "/config.json", config.dump(2) + "\n");
  bool generation = false;
  for (const auto &[name, text] : copies) {
    writeText(outDir + "/" + name, text);
    generation = generation || name == "generation_config.json";
  }
  if (!generation) {
    nlohmann::json settings = hfGenerationConfig(result.config);
    for (const auto &[key, value] : ids.items())
      settings[key] = value;
    writeText(outDir + "/generation_config.json", settings.dump(2) + "\n");
  }
  return result;
}

} // namespace partition::interop
