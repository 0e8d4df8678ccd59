//===- Nonuniform.cpp - a tensor-parallel degree per part of the model ----===//

#include "planner/Nonuniform.h"

#include <algorithm>
#include <cmath>
#include <set>

namespace partition::planner {

std::vector<std::vector<TpPart>> perLayerAssignments(int64_t layers,
                                                     int64_t meshTp) {
  std::vector<std::vector<TpPart>> out;
  if (layers < 2 || meshTp < 2)
    return out;
  std::vector<int64_t> degrees;
  for (int64_t d = 1; d <= meshTp; ++d)
    if (meshTp % d == 0)
      degrees.push_back(d);
  int64_t stride = std::max<int64_t>(1, (layers + 31) / 32);
  std::vector<int64_t> cuts; // first layer of a later part
  for (int64_t cut = stride; cut < layers; cut += stride)
    cuts.push_back(cut);
  // Adjacent parts at one degree would be one part, already tried.
  for (int64_t a : degrees)
    for (int64_t b : degrees) {
      if (a == b)
        continue;
      for (int64_t cut : cuts)
        out.push_back({{0, cut - 1, a}, {cut, layers - 1, b}});
      for (int64_t c : degrees) {
        if (b == c)
          continue;
        for (size_t i = 0; i < cuts.size(); ++i)
          for (size_t j = i + 1; j < cuts.size(); ++j)
            out.push_back({{0, cuts[i] - 1, a},
                           {cuts[i], cuts[j] - 1, b},
                           {cuts[j], layers - 1, c}});
      }
    }
  return out;
}

NonuniformResult searchNonuniform(const ModelShape &model,
                                  const Cluster &cluster,
                                  const std::vector<Candidate> &bases,
                                  int64_t top, const Validate &validate,
                                  const MemoryOracle &memory,
                                  bool includeUncompilable) {
  NonuniformResult result;
  std::vector<Prediction> bounds;
  for (const Candidate &base : bases) {
    for (std::vector<TpPart> &parts :
         perLayerAssignments(model.layers, base.tp)) {
      Candidate c = base;
      c.perLayer = std::move(parts);
      bool hard = false;
      std::string refusal = validate ? validate(c, hard) : std::string();
      if (!refusal.empty() && (hard || !includeUncompilable)) {
        if (result.firstRefusal.empty())
          result.firstRefusal = refusal;
        ++result.refused;
        continue;
      }
      Prediction p = predict(model, c, cluster, /*exactPipeline=*/false);
      ++result.evaluated;
      if (!std::isfinite(p.stepSeconds))
        continue;
      p.notCompilable = refusal;
      if (!p.fits) {
        ++result.unfit;
        continue;
      }
      bounds.push_back(std::move(p));
    }
  }
  // Branch and bound, as the uniform search: by the lower bound (no
  // pipeline simulated), exact until the bound passes the top-th best.
  auto faster = [](const Prediction &a, const Prediction &b) {
    if (a.stepSeconds != b.stepSeconds)
      return a.stepSeconds < b.stepSeconds;
    return a.memoryPerRank < b.memoryPerRank;
  };
  std::stable_sort(bounds.begin(), bounds.end(), faster);
  size_t keep = size_t(std::max<int64_t>(1, top));
  std::vector<double> best;
  for (const Prediction &bound : bounds) {
    if (best.size() >= keep && bound.stepSeconds > best.back())
      break;
    Prediction p =
        bound.plan.pp > 1 ? predict(model, bound.plan, cluster) : bound;
    if (!std::isfinite(p.stepSeconds))
      continue;
    p.notCompilable = bound.notCompilable;
    // The compiler's memory plan where the plan compiles, as for uniform
    // plans (planner/Search.cpp).
    if (memory && p.notCompilable.empty()) {
      if (std::optional<double> bytes = memory(p.plan)) {
        p.memoryPerRank = *bytes;
        p.memorySource = "compiled";
        p.fits = *bytes <= deviceShare(cluster, p.plan.devices()).memoryBytes;
        if (!p.fits) {
          ++result.unfit;
          continue;
        }
      }
    }
    best.insert(std::upper_bound(best.begin(), best.end(), p.stepSeconds),
                p.stepSeconds);
    if (best.size() > keep)
      best.pop_back();
    result.ranked.push_back(std::move(p));
  }
  std::stable_sort(result.ranked.begin(), result.ranked.end(), faster);
  if (result.ranked.size() > keep)
    result.ranked.resize(keep);
  return result;
}

} // namespace partition::planner
