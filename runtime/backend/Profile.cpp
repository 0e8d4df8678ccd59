//===- Profile.cpp - PARTITION_PROFILE tables -----------------------------===//

#include "runtime/backend/Profile.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>

namespace partition::runtime {

ProfileSettings ProfileSettings::fromEnvironment() {
  ProfileSettings settings;
  const char *value = std::getenv("PARTITION_PROFILE");
  settings.enabled = value && *value && std::strcmp(value, "0") != 0;
  if (const char *skip = std::getenv("PARTITION_PROFILE_SKIP"))
    settings.skip = std::max<int64_t>(0, std::atoll(skip));
  return settings;
}

namespace {

std::string dims(std::initializer_list<int64_t> values) {
  std::string text;
  for (int64_t v : values)
    text += (text.empty() ? "" : "x") + std::to_string(v);
  return text;
}

} // namespace

InstructionCost describeKernel(const KernelArgs &a) {
  InstructionCost cost;
  const KernelInfo &info = kernelInfo(a.kernel);
  cost.kernel = std::string(info.name);
  if (a.floatType == DType::BF16)
    cost.kernel += ".bf16";
  for (const BufferInfo *buffer : a.buffers)
    cost.bytes += double(buffer->bytes);
  switch (info.cost) {
  case KernelCost::Gemm:
  // The expert GEMMs: every row of the buffers, an upper bound of the
  // routed rows (the kernels skip the empty ones).
  case KernelCost::GroupedGemm:
    cost.shape = "M,K,N=" + dims({a.rows, a.inFeatures, a.outFeatures});
    cost.flops = 2.0 * double(a.rows) * double(a.inFeatures) *
                 double(a.outFeatures);
    break;
  case KernelCost::Attention:
  case KernelCost::AttentionGrad:
    cost.shape = "B,T,H,D=" + dims({a.batch, a.seq, a.heads, a.headDim});
    // Tq x Tk pairs: the keys are the queries' sequence unless the
    // positions are explicit (then possibly all-gathered, longer).
    cost.flops = 4.0 * double(a.batch) * double(a.heads) * double(a.seq) *
                 double(a.keySeq ? a.keySeq : a.seq) * double(a.headDim) *
                 (info.cost == KernelCost::AttentionGrad ? 2.0 : 1.0);
    // Both backends skip the masked blocks (--xfmr-stats counts the full
    // T x T, the Megatron-LM convention for model FLOPs).
    if (a.causal)
      cost.flops /= 2;
    // A window W < T leaves T W - W (W - 1) / 2 of the T^2 / 2 pairs.
    if (a.window > 0 && a.window < a.seq) {
      const double t = double(a.seq), w = double(a.window);
      cost.flops *= (t * w - w * (w - 1) / 2) / (t * t / 2);
    }
    break;
  case KernelCost::CrossEntropy:
    cost.shape = "N,V=" + dims({a.rows, a.vocab});
    break;
  // The row's Cost column (Kernels.def) says which of these a kernel is.
  case KernelCost::Other:
    if (a.vocab && a.rows)
      cost.shape = "N,V,C=" + dims({a.rows, a.vocab, a.channels});
    else if (a.batch && a.seq)
      cost.shape = "B,T,C=" + dims({a.batch, a.seq, a.channels});
    else if (a.rows && a.channels)
      cost.shape = "R,C=" + dims({a.rows, a.channels});
    else
      cost.shape = "n=" + std::to_string(a.size);
    break;
  }
  return cost;
}

InstructionCost describeCollective(const Program &program,
                                   const Instruction &instruction) {
  InstructionCost cost;
  // A wait's time is what the rank spent blocked on a started collective.
  if (instruction.waitFor) {
    cost.kernel = "wait";
    return cost;
  }
  cost.kernel = instruction.transfer   ? transferKindName(*instruction.transfer)
                : instruction.tierCopy ? tierCopyKindName(*instruction.tierCopy)
                                       : collectiveKindName(
                                             instruction.collective->kind);
  // A tier copy moves one side's bytes.
  for (uint32_t arg : instruction.args)
    if (!instruction.tierCopy || arg == instruction.args[0])
      cost.bytes += double(program.buffers[arg].bytes);
  cost.shape = "bytes=" + std::to_string(int64_t(cost.bytes));
  return cost;
}

void printProfileTables(std::FILE *out,
                        const std::vector<InstructionCost> &costs,
                        const std::vector<double> &seconds, double runs,
                        bool tera) {
  struct Row {
    std::string kernel, shape;
    int64_t calls = 0;
    double seconds = 0, flops = 0, bytes = 0;
  };
  auto table = [&](bool byShape) {
    std::map<std::string, Row> rows;
    for (size_t i = 0; i < costs.size(); ++i) {
      const InstructionCost &cost = costs[i];
      Row &row = rows[byShape ? cost.kernel + " " + cost.shape : cost.kernel];
      row.kernel = cost.kernel;
      row.shape = byShape ? cost.shape : "";
      row.calls += cost.executions;
      row.seconds += seconds[i];
      row.flops += cost.flops;
      row.bytes += cost.bytes;
    }
    std::vector<Row> sorted;
    for (auto &entry : rows)
      sorted.push_back(entry.second);
    std::stable_sort(sorted.begin(), sorted.end(),
                     [](const Row &a, const Row &b) {
                       return a.seconds > b.seconds;
                     });
    return sorted;
  };
  double total = 0, flops = 0;
  for (size_t i = 0; i < costs.size(); ++i) {
    total += seconds[i];
    flops += costs[i].flops;
  }
  const double unit = tera ? 1e12 : 1e9;
  const char *rate = tera ? "TFLOP/s" : "GFLOP/s";
  auto print = [&](const std::vector<Row> &rows, size_t limit, bool byShape) {
    std::fprintf(out, "  %-30s %-22s %9s %10s %7s %8s %8s\n", "kernel",
                 byShape ? "shape" : "", "calls/run", "ms/run", "share", rate,
                 "GB/s");
    double shown = 0;
    for (size_t r = 0; r < rows.size() && r < limit; ++r) {
      const Row &row = rows[r];
      shown += row.seconds;
      double perRun = row.seconds / runs;
      std::fprintf(out, "  %-30s %-22s %9lld %10.3f %6.1f%%",
                   row.kernel.c_str(), row.shape.c_str(),
                   static_cast<long long>(row.calls), 1e3 * perRun,
                   total > 0 ? 100.0 * row.seconds / total : 0.0);
      if (row.flops > 0 && perRun > 0)
        std::fprintf(out, " %8.1f", row.flops / perRun / unit);
      else
        std::fprintf(out, " %8s", "-");
      std::fprintf(out, " %8.1f\n", perRun > 0 ? row.bytes / perRun / 1e9 : 0);
    }
    if (rows.size() > limit)
      std::fprintf(out, "  (%zu more, %.1f%%)\n", rows.size() - limit,
                   total > 0 ? 100.0 * (total - shown) / total : 0.0);
  };
  std::vector<Row> byKernel = table(false);
  print(byKernel, byKernel.size(), false);
  long long executions = 0;
  for (const InstructionCost &cost : costs)
    executions += cost.executions;
  std::fprintf(out, "  %-30s %-22s %9lld %10.3f %6.1f%% %8.1f\n", "total", "",
               executions, 1e3 * total / runs, 100.0,
               total > 0 ? flops * runs / total / unit : 0.0);
  std::fprintf(out, "\n  by kernel and shape:\n");
  print(table(true), 30, true);
  std::fflush(out);
}

} // namespace partition::runtime
