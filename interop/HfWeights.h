//===- HfWeights.h - parameter names and layouts: partition <-> transformers -*- C++ -*-===//
//
// Which transformers tensor holds which partition parameters, and how:
//
//   GPT-2  transformer.wte.weight           wte
//          transformer.wpe.weight           wpe
//          transformer.h.N.attn.c_attn.*    [q; k; v] concatenated, the
//                                           weight transposed (Conv1D keeps
//                                           [in, out]; partition [out, in])
//          transformer.h.N.{attn.c_proj, mlp.c_fc, mlp.c_proj}.weight
//                                           transposed; biases and norms as
//                                           they are; lm_head tied to wte
//   Llama  model.embed_tokens / model.norm / lm_head <- tok_embeddings /
//          norm / output; wq wk wv wo -> self_attn.{q,k,v,o}_proj, w1 w3 w2
//          -> mlp.{gate,up,down}_proj, attention_norm / ffn_norm ->
//          input_layernorm / post_attention_layernorm. No permutation of q
//          and k: partition's rotary embedding pairs feature i with i + D/2,
//          as transformers' rotate_half does.
//   Mixtral (family mixtral; every layer a MoE layer) as Llama but for the
//          feed-forward block: router -> block_sparse_moe.gate, and the
//          stacked experts [E, F, H] / [E, H, F] one tensor per expert,
//          block_sparse_moe.experts.e.w1 / w3 / w2 (what save_pretrained
//          writes, transformers 4 and 5 alike); transformers 5's module
//          state (mlp.gate, mlp.experts.gate_up_proj [E, 2F, H] = w1 and w3
//          concatenated per expert, mlp.experts.down_proj [E, H, F]) is read
//          too (MoeLayout::Fused).
//
// The partition side comes from the model builder itself
// (modelParameters), so the table cannot drift from partition-gen: every
// parameter maps to exactly one transformers tensor (checked).
//
//===----------------------------------------------------------------------===//

#ifndef PARTITION_INTEROP_HFWEIGHTS_H
#define PARTITION_INTEROP_HFWEIGHTS_H

#include "model/ModelConfig.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace partition::interop {

using Shape = std::vector<int64_t>;

/// A parameter of the model partition-gen builds: its xfmr.param name and
/// shape, in argument order.
struct ParamShape {
  std::string name;
  Shape shape;
};
std::vector<ParamShape> modelParameters(const model::ModelConfig &config);

/// One transformers tensor.
struct HfTensorMap {
  std::string hfName;
  /// The partition parameters it holds, concatenated along dimension
  /// `concatDim` (0 but for Mixtral's fused gate_up_proj, 1).
  std::vector<std::string> parts;
  /// transformers stores the transpose of the concatenation (GPT-2's
  /// Conv1D).
  bool transpose = false;
  int64_t concatDim = 0;
  /// >= 0: the tensor is this index of the single part's dimension 0 (one
  /// expert of a stacked expert weight), that dimension dropped.
  int64_t slice = -1;
};

/// How a Mixtral directory names its expert weights: per expert
/// (block_sparse_moe.experts.e.w1, what save_pretrained writes) or fused
/// (transformers 5's mlp.experts.gate_up_proj / down_proj state dict).
enum class MoeLayout { PerExpert, Fused };

/// Every transformers tensor of `config`'s model, in the order
/// model.safetensors lists them. Throws InteropError if the table and the
/// builder disagree (a bug, not an input error).
std::vector<HfTensorMap> hfTensorMap(const model::ModelConfig &config,
                                     MoeLayout layout = MoeLayout::PerExpert);

/// A dense fp32 tensor, row-major.
struct Tensor {
  Shape shape;
  std::vector<float> values;
};

/// The transformers tensor `map` describes, from the partition parameters.
Tensor toHf(const HfTensorMap &map,
            const std::map<std::string, Tensor> &params);

/// The inverse: splits (and transposes back) transformers tensor `hf` into
/// the parameters of `map`, whose shapes `shapes` gives; adds them to
/// `params` (a slice fills its part of a parameter, which the first slice
/// read allocates). The caller has checked hf.shape against hfShape().
void fromHf(const HfTensorMap &map, const Tensor &hf,
            const std::map<std::string, Shape> &shapes,
            std::map<std::string, Tensor> &params);

/// The shape transformers gives the tensor of `map`.
Shape hfShape(const HfTensorMap &map,
              const std::map<std::string, Shape> &shapes);

/// bfloat16 <-> fp32 (round to nearest even; NaN stays NaN) and fp16 ->
/// fp32, as torch converts.
uint16_t floatToBf16(float value);
float bf16ToFloat(uint16_t value);
float f16ToFloat(uint16_t value);

} // namespace partition::interop

#endif // PARTITION_INTEROP_HFWEIGHTS_H
