//===- Nonuniform.cpp - a tensor-parallel degree per part of the model ----===//

#include "planner/Nonuniform.h"

#include <algorithm>
#include <cmath>
#include <set>

namespace partition::planner {

std::string checkPerLayer(const std::vector<TpPart> &parts, int64_t layers,
                          int64_t meshTp) {
  if (parts.size() < 2)
    return "a nonuniform plan has at least two parts";
  int64_t next = 0, largest = 0;
  std::set<int64_t> degrees;
  for (size_t i = 0; i < parts.size(); ++i) {
    const TpPart &part = parts[i];
    std::string where = "part " + std::to_string(i) + " (layers " +
                        std::to_string(part.first) + "-" +
                        std::to_string(part.last) + ")";
    if (part.first != next)
      return where + " does not start at layer " + std::to_string(next) +
             ": parts must cover every layer once, in order";
    if (part.last < part.first || part.last >= layers)
      return where + " is not a range of the model's " +
             std::to_string(layers) + " layers";
    if (part.tp < 1 || meshTp % part.tp != 0)
      return where + ": tp " + std::to_string(part.tp) +
             " does not divide the mesh's tp " + std::to_string(meshTp);
    if (i > 0 && parts[i - 1].tp == part.tp)
      return where + " has the degree of the part before it; merge them";
    degrees.insert(part.tp);
    largest = std::max(largest, part.tp);
    next = part.last + 1;
  }
  if (next != layers)
    return "the parts end at layer " + std::to_string(next - 1) +
           ", the model has " + std::to_string(layers) + " layers";
  if (largest != meshTp)
    return "no part runs at the mesh's tp " + std::to_string(meshTp) +
           " (the largest degree is the mesh's)";
  // Sorted ascending: a chain when each divides the next.
  int64_t previous = 0;
  for (int64_t d : degrees) {
    if (previous && d % previous != 0)
      return "degrees " + std::to_string(previous) + " and " +
             std::to_string(d) + " do not divide one another";
    previous = d;
  }
  return "";
}

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
  auto keep = [&](std::vector<TpPart> parts) {
    if (checkPerLayer(parts, layers, meshTp).empty())
      out.push_back(std::move(parts));
  };
  for (int64_t a : degrees)
    for (int64_t b : degrees) {
      if (a == b)
        continue;
      for (int64_t cut : cuts)
        keep({{0, cut - 1, a}, {cut, layers - 1, b}});
      for (int64_t c : degrees) {
        if (b == c)
          continue;
        for (size_t i = 0; i < cuts.size(); ++i)
          for (size_t j = i + 1; j < cuts.size(); ++j)
            keep({{0, cuts[i] - 1, a},
                  {cuts[i], cuts[j] - 1, b},
                  {cuts[j], layers - 1, c}});
      }
    }
  return out;
}

NonuniformResult searchNonuniform(const ModelShape &model,
                                  const Cluster &cluster,
                                  const std::vector<Candidate> &bases,
                                  int64_t top) {
  NonuniformResult result;
  std::vector<Prediction> bounds;
  for (const Candidate &base : bases) {
    for (std::vector<TpPart> &parts :
         perLayerAssignments(model.layers, base.tp)) {
      Candidate c = base;
      c.perLayer = std::move(parts);
      Prediction p = predict(model, c, cluster, /*exactPipeline=*/false);
      ++result.evaluated;
      if (!std::isfinite(p.stepSeconds))
        continue;
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
