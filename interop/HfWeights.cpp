//===- HfWeights.cpp - parameter names and layouts: partition <-> transformers ===//

#include "interop/HfWeights.h"

#include "interop/InteropError.h"
#include "model/ModelBuilder.h"
#include "model/ModelSizes.h"

#include "dialects/Xfmr/XfmrOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/MLIRContext.h"

#include <algorithm>
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

std::vector<HfTensorMap> hfTensorMap(const ModelConfig &config,
                                     MoeLayout layout) {
  std::vector<HfTensorMap> maps;
  auto copy = [&](std::string hf, std::string param) {
    maps.push_back({std::move(hf), {std::move(param)}, false});
  };
  // A Mixtral feed-forward block: `p` and `h` end with the block's name.
  auto experts = [&](const std::string &p, const std::string &h) {
    if (layout == MoeLayout::Fused) {
      copy(h + "mlp.gate.weight", p + "router.weight");
      // gate_up_proj[e] = [w1[e]; w3[e]]: transformers chunks its output
      // in two, gate first.
      maps.push_back({h + "mlp.experts.gate_up_proj",
                      {p + "experts.w1", p + "experts.w3"},
                      false,
                      /*concatDim=*/1});
      copy(h + "mlp.experts.down_proj", p + "experts.w2");
      return;
    }
    copy(h + "block_sparse_moe.gate.weight", p + "router.weight");
    for (int64_t e = 0; e < config.experts; ++e)
      for (const char *w : {"w1", "w2", "w3"})
        maps.push_back({h + "block_sparse_moe.experts." + std::to_string(e) +
                            "." + w + ".weight",
                        {p + "experts." + w},
                        false,
                        0,
                        /*slice=*/e});
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
      if (config.isMoeLayer(layer)) {
        experts(p + "feed_forward.", h);
        continue;
      }
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

  // Every parameter of the builder's model exactly once (a sliced one in
  // every slice of its dimension 0), nothing else.
  std::map<std::string, int64_t> expected;
  std::set<std::string> seen;
  for (const ParamShape &param : modelParameters(config))
    expected[param.name] = param.shape.empty() ? 1 : param.shape[0];
  std::map<std::string, std::set<int64_t>> slices;
  for (const HfTensorMap &map : maps)
    for (const std::string &part : map.parts)
      if (!expected.count(part) ||
          (map.slice < 0 ? !seen.insert(part).second
                         : map.parts.size() != 1 || map.slice >= expected[part] ||
                               !slices[part].insert(map.slice).second))
        throw InteropError("internal error: the transformers tensor table "
                           "names parameter '" + part +
                           "' wrongly (a bug in interop/HfWeights.cpp)");
  // A sliced parameter: every slice, and not also mapped whole.
  for (const auto &[part, indices] : slices)
    if (int64_t(indices.size()) != expected[part] || !seen.insert(part).second)
      throw InteropError("internal error: the transformers tensor table "
                         "slices parameter '" + part +
                         "' wrongly (a bug in interop/HfWeights.cpp)");
  std::set<std::string> names;
  for (const auto &[name, rows] : expected)
    names.insert(name);
  if (seen != names)
    throw InteropError("internal error: the transformers tensor table misses "
                       "parameters of the " +
                       std::string(model::archName(config.arch)) +
                       " model (a bug in interop/HfWeights.cpp)");
  return maps;
}

namespace {

int64_t product(const Shape &shape, size_t from, size_t to) {
  int64_t result = 1;
  for (size_t i = from; i < to && i < shape.size(); ++i)
    result *= shape[i];
  return result;
}

/// Concatenation along `dim` is, for each index of the dimensions before
/// it (`outer` of them), one chunk of every part in turn: the chunk is
/// the part's elements from `dim` on.
int64_t outerOf(const Shape &shape, int64_t dim) {
  return product(shape, 0, size_t(dim));
}
int64_t chunkOf(const Shape &shape, int64_t dim) {
  return product(shape, size_t(dim), shape.size());
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
  if (map.slice >= 0)
    return Shape(shape.begin() + 1, shape.end());
  size_t dim = size_t(map.concatDim);
  for (size_t i = 1; i < map.parts.size(); ++i) {
    const Shape &part = shapes.at(map.parts[i]);
    shape[dim] += dim < part.size() ? part[dim] : 1;
  }
  if (map.transpose)
    std::swap(shape[0], shape[1]);
  return shape;
}

Tensor toHf(const HfTensorMap &map,
            const std::map<std::string, Tensor> &params) {
  std::map<std::string, Shape> shapes;
  Tensor result;
  for (const std::string &part : map.parts)
    shapes[part] = params.at(part).shape;
  result.shape = hfShape(map, shapes);
  if (map.slice >= 0) {
    const Tensor &param = params.at(map.parts.front());
    size_t size = size_t(chunkOf(param.shape, 1));
    auto begin = param.values.begin() + map.slice * size;
    result.values.assign(begin, begin + size);
    return result;
  }
  int64_t outer = outerOf(shapes.at(map.parts.front()), map.concatDim);
  for (int64_t o = 0; o < outer; ++o)
    for (const std::string &part : map.parts) {
      const Tensor &param = params.at(part);
      size_t chunk = size_t(chunkOf(param.shape, map.concatDim));
      auto begin = param.values.begin() + o * chunk;
      result.values.insert(result.values.end(), begin, begin + chunk);
    }
  if (map.transpose)
    result.values = transposed(result.values, result.shape[1], result.shape[0]);
  return result;
}

void fromHf(const HfTensorMap &map, const Tensor &hf,
            const std::map<std::string, Shape> &shapes,
            std::map<std::string, Tensor> &params) {
  if (map.slice >= 0) {
    const std::string &part = map.parts.front();
    const Shape &shape = shapes.at(part);
    Tensor &param = params[part];
    if (param.values.empty())
      param = {shape, std::vector<float>(size_t(chunkOf(shape, 0)))};
    std::copy(hf.values.begin(), hf.values.end(),
              param.values.begin() + map.slice * chunkOf(shape, 1));
    return;
  }
  std::vector<float> rows =
      map.transpose ? transposed(hf.values, hf.shape[0], hf.shape[1])
                    : hf.values;
  for (const std::string &part : map.parts)
    params[part] = {shapes.at(part), {}};
  int64_t outer = outerOf(shapes.at(map.parts.front()), map.concatDim);
  auto next = rows.begin();
  for (int64_t o = 0; o < outer; ++o)
    for (const std::string &part : map.parts) {
      size_t chunk = size_t(chunkOf(shapes.at(part), map.concatDim));
      std::vector<float> &values = params[part].values;
      values.insert(values.end(), next, next + chunk);
      next += chunk;
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
