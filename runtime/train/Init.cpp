//===- Init.cpp - deterministic parameter initialisation ------------------===//

#include "runtime/train/Init.h"

#include "runtime/train/Random.h"

#include <cmath>

namespace partition::runtime {
namespace {


uint64_t hashName(const std::string &name) {
  uint64_t hash = 0xcbf29ce484222325ULL; // FNV-1a
  for (unsigned char c : name)
    hash = (hash ^ c) * 0x100000001b3ULL;
  return hash;
}

bool endsWith(const std::string &text, const std::string &suffix) {
  return text.size() >= suffix.size() &&
         text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

} // namespace

std::vector<float> initialParameter(const std::string &name,
                                    const std::vector<int64_t> &shape,
                                    int64_t layers, uint64_t seed) {
  int64_t elements = 1;
  for (int64_t dim : shape)
    elements *= dim;
  // Biases start at zero, DeepSeek-V3's routing bias (expert_bias) too.
  if (endsWith(name, ".bias") || endsWith(name, ".expert_bias"))
    return std::vector<float>(elements, 0.0f);
  if (shape.size() <= 1)
    return std::vector<float>(elements, 1.0f);

  double stddev = 0.02;
  for (const char *residual :
       {"attn.c_proj.weight", "mlp.c_proj.weight", "attention.wo.weight",
        "feed_forward.w2.weight", "experts.w2", "shared_experts.w2.weight"})
    if (endsWith(name, residual))
      stddev /= std::sqrt(2.0 * double(std::max<int64_t>(layers, 1)));

  SplitMix64 rng{seed ^ hashName(name)};
  std::vector<float> values(elements);
  // Box-Muller, two normals per pair of uniforms.
  for (int64_t i = 0; i < elements; i += 2) {
    double radius = std::sqrt(-2.0 * std::log(rng.uniform()));
    double angle = 2.0 * M_PI * rng.uniform();
    values[i] = float(stddev * radius * std::cos(angle));
    if (i + 1 < elements)
      values[i + 1] = float(stddev * radius * std::sin(angle));
  }
  return values;
}

} // namespace partition::runtime
