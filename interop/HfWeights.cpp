//===- HfWeights.cpp - parameter names and layouts: partition <-> transformers ===//

#include "interop/HfWeights.h"

#include "interop/InteropError.h"
#include "model/ModelBuilder.h"
#include "model/ModelSizes.h"

#include "dialects/Xfmr/XfmrOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/MLIRContext.h"

#include <cstring>
#include <set>

using partition::model::Arch;
using partition::model::ModelConfig;

namespace partition::interop {

std::vector<ParamShape> modelParameters(const ModelConfig &config) {
  mlir::MLIRContext context;
  mlir::OwningOpRef<mlir::ModuleOp> module =
      model::buildForwardModule(context, config);
  // Sizes first: the tensors are allocated from these shapes.
  if (std::string problem = model::checkModelSizes(*module); !problem.empty())
    throw InteropError("model too large: " + problem);
  auto forward = module->lookupSymbol<mlir::func::FuncOp>("forward");
  std::vector<ParamShape> params;
  for (unsigned i = 0; i < forward.getNumArguments(); ++i) {
    auto name = forward.getArgAttrOfType<mlir::StringAttr>(
        i, xfmr::XfmrDialect::kParamAttrName);
    if (!name)
      continue;
    auto type = mlir::cast<mlir::RankedTensorType>(
        forward.getArgument(i).getType());
    params.push_back({name.str(), Shape(type.getShape().begin(),
                                        type.getShape().end())});
  }
  return params;
}

std::vector<HfTensorMap> hfTensorMap(const ModelConfig &config) {
  std::vector<HfTensorMap> maps;
  auto copy = [&](std::string hf, std::string param) {
    maps.push_back({std::move(hf), {std::move(param)}, false});
  };
  if (config.arch == Arch::GPT2) {
    copy("transformer.wte.weight", "wte");
    copy("transformer.wpe.weight", "wpe");
    for (int64_t layer = 0; layer < config.layers; ++layer) {
      std::string p = "h." + std::to_string(layer) + ".";
      std::string h = "transformer." + p;
      for (const char *norm : {"ln_1", "ln_2"})
        for (const char *part : {".weight", ".bias"})
          copy(h + norm + part, p + norm + part);
      maps.push_back({h + "attn.c_attn.weight",
                      {p + "attn.q.weight", p + "attn.k.weight",
                       p + "attn.v.weight"},
                      true});
      maps.push_back({h + "attn.c_attn.bias",
                      {p + "attn.q.bias", p + "attn.k.bias", p + "attn.v.bias"},
                      false});
      for (const char *linear : {"attn.c_proj", "mlp.c_fc", "mlp.c_proj"}) {
        maps.push_back({h + linear + ".weight", {p + linear + ".weight"}, true});
        copy(h + linear + ".bias", p + linear + ".bias");
      }
    }
    copy("transformer.ln_f.weight", "ln_f.weight");
    copy("transformer.ln_f.bias", "ln_f.bias");
  } else {
    copy("model.embed_tokens.weight", "tok_embeddings.weight");
    for (int64_t layer = 0; layer < config.layers; ++layer) {
      std::string p = "layers." + std::to_string(layer) + ".";
      std::string h = "model.layers." + std::to_string(layer) + ".";
      copy(h + "input_layernorm.weight", p + "attention_norm.weight");
      for (const auto &[ours, theirs] :
           {std::pair{"wq", "q_proj"}, {"wk", "k_proj"}, {"wv", "v_proj"},
            {"wo", "o_proj"}}) {
        copy(h + "self_attn." + theirs + ".weight",
             p + "attention." + ours + ".weight");
        bool bias = std::string(ours) == "wo" ? config.outputBias
                                              : config.qkvBias;
        if (bias)
          copy(h + "self_attn." + theirs + ".bias",
               p + "attention." + ours + ".bias");
      }
      copy(h + "post_attention_layernorm.weight", p + "ffn_norm.weight");
      for (const auto &[ours, theirs] :
           {std::pair{"w1", "gate_proj"}, {"w3", "up_proj"},
            {"w2", "down_proj"}})
        copy(h + "mlp." + theirs + ".weight",
             p + "feed_forward." + ours + ".weight");
    }
    copy("model.norm.weight", "norm.weight");
    // A tied head is model.embed_tokens (transformers saves no lm_head).
    if (!config.tieEmbedding)
      copy("lm_head.weight", "output.weight");
  }

  // Every parameter of the builder's model exactly once, nothing else.
  std::set<std::string> expected, seen;
  for (const ParamShape &param : modelParameters(config))
    expected.insert(param.name);
  for (const HfTensorMap &map : maps)
    for (const std::string &part : map.parts)
      if (!expected.count(part) || !seen.insert(part).second)
        throw InteropError("internal error: the transformers tensor table "
                           "names parameter '" + part +
                           "' wrongly (a bug in interop/HfWeights.cpp)");
  if (seen != expected)
    throw InteropError("internal error: the transformers tensor table misses "
                       "parameters of the " +
                       std::string(model::archName(config.arch)) +
                       " model (a bug in interop/HfWeights.cpp)");
  return maps;
}

namespace {

int64_t rowsOf(const Shape &shape) { return shape.empty() ? 1 : shape[0]; }

int64_t rowWidth(const Shape &shape) {
  int64_t width = 1;
  for (size_t i = 1; i < shape.size(); ++i)
    width *= shape[i];
  return width;
}

/// [rows, cols] -> [cols, rows].
std::vector<float> transposed(const std::vector<float> &values, int64_t rows,
                              int64_t cols) {
  std::vector<float> out(values.size());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      out[c * rows + r] = values[r * cols + c];
  return out;
}

} // namespace

Shape hfShape(const HfTensorMap &map,
              const std::map<std::string, Shape> &shapes) {
  Shape shape = shapes.at(map.parts.front());
  for (size_t i = 1; i < map.parts.size(); ++i)
    shape[0] += rowsOf(shapes.at(map.parts[i]));
  if (map.transpose)
    std::swap(shape[0], shape[1]);
  return shape;
}

Tensor toHf(const HfTensorMap &map,
            const std::map<std::string, Tensor> &params) {
  std::map<std::string, Shape> shapes;
  Tensor result;
  for (const std::string &part : map.parts) {
    const Tensor &param = params.at(part);
    shapes[part] = param.shape;
    result.values.insert(result.values.end(), param.values.begin(),
                         param.values.end());
  }
  result.shape = hfShape(map, shapes);
  if (map.transpose)
    result.values = transposed(result.values, result.shape[1], result.shape[0]);
  return result;
}

void fromHf(const HfTensorMap &map, const Tensor &hf,
            const std::map<std::string, Shape> &shapes,
            std::map<std::string, Tensor> &params) {
  std::vector<float> rows =
      map.transpose ? transposed(hf.values, hf.shape[0], hf.shape[1])
                    : hf.values;
  size_t offset = 0;
  for (const std::string &part : map.parts) {
    const Shape &shape = shapes.at(part);
    size_t elements = size_t(rowsOf(shape) * rowWidth(shape));
    params[part] = {shape, std::vector<float>(rows.begin() + offset,
                                              rows.begin() + offset + elements)};
    offset += elements;
  }
}

uint16_t floatToBf16(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, 4);
  if ((bits & 0x7fffffffu) > 0x7f800000u)
    return uint16_t((bits >> 16) | 0x40); // A quiet NaN, as torch makes.
  uint32_t roundingBias = 0x7fffu + ((bits >> 16) & 1u);
  return uint16_t((bits + roundingBias) >> 16);
}

float bf16ToFloat(uint16_t value) {
  uint32_t bits = uint32_t(value) << 16;
  float result;
  std::memcpy(&result, &bits, 4);
  return result;
}

float f16ToFloat(uint16_t value) {
  uint32_t sign = uint32_t(value & 0x8000u) << 16;
  uint32_t exponent = (value >> 10) & 0x1fu;
  uint32_t mantissa = value & 0x3ffu;
  uint32_t bits;
  if (exponent == 0x1f) {
    bits = sign | 0x7f800000u | (mantissa << 13);
  } else if (exponent != 0) {
    bits = sign | ((exponent + 112) << 23) | (mantissa << 13);
  } else if (mantissa == 0) {
    bits = sign;
  } else {
    // Subnormal: normalise.
    int shift = 0;
    while (!(mantissa & 0x400u)) {
      mantissa <<= 1;
      ++shift;
    }
    bits = sign | (uint32_t(113 - shift) << 23) | ((mantissa & 0x3ffu) << 13);
  }
  float result;
  std::memcpy(&result, &bits, 4);
  return result;
}

} // namespace partition::interop
