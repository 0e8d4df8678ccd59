//===- Cluster.cpp - cluster profiles and cluster files -------------------===//

#include "planner/Cluster.h"

#include "support/JsonReader.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <fstream>
#include <functional>
#include <sstream>

namespace partition::planner {
namespace {

constexpr double GiB = 1024.0 * 1024 * 1024;

/// DGX A100 80 GB, the Selene nodes of Narayanan et al. (SC21).
Cluster a100() {
  Cluster c;
  c.name = "a100-80gb-dgx";
  // A100 data sheet: 312 TFLOP/s dense bf16/fp16 tensor, 19.5 fp32.
  c.peakFlopsBf16 = 312e12;
  c.peakFlopsFp32 = 19.5e12;
  // NVIDIA's "Matrix Multiplication Background" guide: large fp16 GEMMs
  // on A100 run at about 250 TFLOP/s, 80% of peak (clock and
  // power limits under sustained tensor-core load).
  c.gemmEfficiency = 0.8;
  // cuBLAS's large fp16 tile on Ampere (256 x 128 outputs per thread
  // block, one block per SM at a time); 108 SMs (data sheet).
  c.gemmTileM = 256;
  c.gemmTileN = 128;
  c.computeUnits = 108;
  // Data sheet: 80 GB HBM2e (81920 MiB as nvidia-smi shows), 2039 GB/s.
  c.memoryBytes = 80 * GiB;
  c.memoryBandwidth = 2039e9;
  // Streaming kernels (BabelStream triad) reach about 90% of HBM peak.
  c.memoryEfficiency = 0.9;
  // A CUDA kernel launch, about 5 us from the host.
  c.kernelLatency = 5e-6;
  // DGX A100: 8 GPUs on NVSwitch, NVLink 3 at 600 GB/s per GPU in both
  // directions together, 300 GB/s each way raw; NCCL's all-reduce moves
  // data at about 240 GB/s of it (nccl-tests "busbw" on DGX A100, the
  // NVLink packet headers and protocol taking the rest). 8 HDR InfiniBand
  // NICs of 200 Gb/s per node, one per GPU: 25 GB/s each way. Latencies:
  // NCCL's small-message time inside a node (~5 us) and across IB (~10 us).
  c.devicesPerNode = 8;
  c.intraNodeBandwidth = 240e9;
  c.intraNodeLatency = 5e-6;
  c.interNodeBandwidth = 25e9;
  c.interNodeLatency = 10e-6;
  // As Megatron-LM ran on Selene in 2021 (the paper's runs): gradient
  // all-reduce after the backward, not overlapped; attention scores and
  // probabilities materialized in HBM (fused scale-mask-softmax, no flash
  // attention yet).
  c.overlapsCommunication = false;
  c.attentionKernel = "materialized";
  // Offload. Each A100 sits on its own PCIe Gen4 x16 link (31.5 GB/s raw
  // each way); CUDA's bandwidthTest moves pinned host memory at about 25
  // GB/s over it. DGX A100 80 GB data sheet: 2 TB of host memory, 30 TB of
  // internal storage as 8 x 3.84 TB U.2 NVMe drives in RAID 0; a PCIe Gen4
  // U.2 drive of that class (Samsung PM1733 3.84 TB data sheet) reads 7.0
  // GB/s and writes 3.8 GB/s sequentially: 56 and 30 GB/s for the node, the
  // drives' own figures (an upper bound: `partition-plan --calibrate` on a
  // node measures its filesystem).
  c.hostLinkBandwidth = 25e9;
  c.hostMemoryBytes = 2e12;
  c.diskReadBandwidth = 8 * 7.0e9;
  c.diskWriteBandwidth = 8 * 3.8e9;
  return c;
}

/// DGX H100: 8 H100 SXM5 80 GB.
Cluster h100() {
  Cluster c = a100();
  c.name = "h100-sxm-dgx";
  // H100 SXM data sheet: 989 TFLOP/s dense bf16, 67 fp32; 132 SMs.
  c.peakFlopsBf16 = 989e12;
  c.peakFlopsFp32 = 67e12;
  // Large bf16 GEMMs in cuBLAS reach about 750 TFLOP/s on H100 SXM
  // (NVIDIA's published cuBLAS 12 figures): 75%.
  c.gemmEfficiency = 0.75;
  c.computeUnits = 132;
  // 80 GB HBM3 at 3.35 TB/s.
  c.memoryBytes = 80 * GiB;
  c.memoryBandwidth = 3.35e12;
  // NVLink 4: 900 GB/s per GPU both ways (450 each way raw, about 360
  // for NCCL as on A100: 80%); 8 ConnectX-7 NDR 400 Gb/s NICs per node:
  // 50 GB/s per GPU each way.
  c.intraNodeBandwidth = 360e9;
  c.interNodeBandwidth = 50e9;
  // This project's CUDA backend: NCCL on its own stream, flash attention.
  c.overlapsCommunication = true;
  c.attentionKernel = "fused";
  c.attentionSkipsMasked = true;
  // PCIe Gen5 x16 to each GPU: 63 GB/s raw each way, about 55 GB/s of
  // pinned copies. DGX H100 data sheet: 2 TB of host memory, 8 x 3.84 TB
  // U.2 NVMe internal storage (the drives' figures as on DGX A100).
  c.hostLinkBandwidth = 55e9;
  return c;
}

/// DGX H200: the H100's compute with 141 GB of HBM3e.
Cluster h200() {
  Cluster c = h100();
  c.name = "h200-dgx";
  // H200 SXM data sheet: 141 GB at 4.8 TB/s; compute as H100 SXM.
  c.memoryBytes = 141e9;
  c.memoryBandwidth = 4.8e12;
  return c;
}

/// GB200 NVL72: 72 Blackwell GPUs in one NVLink domain.
Cluster gb200() {
  Cluster c = h100();
  c.name = "gb200-nvl72";
  // GB200 NVL72 data sheet, per GPU (rack figures / 72): 180 PFLOP/s
  // dense fp16/bf16 -> 2.5 PFLOP/s; 5760 TFLOP/s fp32 -> 80; 13.4 TB HBM3e
  // -> 186 GB at 576 TB/s -> 8 TB/s.
  c.peakFlopsBf16 = 2.5e15;
  c.peakFlopsFp32 = 80e12;
  c.computeUnits = 148;
  c.memoryBytes = 186e9;
  c.memoryBandwidth = 8e12;
  // NVLink 5: 1.8 TB/s per GPU both ways, all 72 GPUs on one switch
  // domain; one ConnectX-7 400 Gb/s NIC per GPU beyond the rack.
  c.devicesPerNode = 72;
  c.intraNodeBandwidth = 720e9; // 900 raw each way, 80% for NCCL
  c.interNodeBandwidth = 50e9;
  // NVLink-C2C between each Grace CPU and its two GPUs: 900 GB/s both
  // ways, 450 each way shared by two GPUs; 480 GB of LPDDR5X per Grace,
  // 36 per rack (the data sheet's "up to 17 TB"). The data sheet gives no
  // local NVMe figure: no disk here (give disk_read_bandwidth and
  // disk_write_bandwidth in a cluster file for the nvme tier).
  c.hostLinkBandwidth = 225e9;
  c.hostMemoryBytes = 36 * 480e9;
  c.diskReadBandwidth = 0;
  c.diskWriteBandwidth = 0;
  return c;
}

/// This machine, as `partition-plan --calibrate` measured it on
/// 2026-12-01 (the 2-core build machine, shared with other builds: load
/// average near 20, so these are medians under load; see bench/README.md).
/// The command writes a file of the same fields: pass it with --cluster
/// FILE.json to use a fresh measurement. Ranks are processes on one node
/// sharing its cores, bandwidth and memory (sharedNode).
Cluster cpuLocal() {
  Cluster c;
  c.name = "cpu-local";
  // OpenBLAS sgemm, the best of four shapes (median of 5 runs), 2 threads.
  c.peakFlopsFp32 = 7.2e9;
  // bf16 kernels load bf16 and compute in fp32: the same peak.
  c.peakFlopsBf16 = 7.2e9;
  c.gemmEfficiency = 1.0;
  // OpenBLAS's sgemm micro-kernel tile on x86-64 (16 x 6 outputs); the
  // machine's 2 cores.
  c.gemmTileM = 16;
  c.gemmTileN = 6;
  c.computeUnits = 2;
  // Physical memory; a streaming triad; an empty OpenMP parallel region.
  c.memoryBytes = 25276502016.0;
  c.memoryBandwidth = 2.2e9;
  c.memoryEfficiency = 1.0;
  c.kernelLatency = 31e-6;
  // All ranks on this node; MPI_Allreduce of 8 B and 16 MiB on 2 ranks.
  c.devicesPerNode = 64;
  c.intraNodeBandwidth = 0.16e9;
  c.intraNodeLatency = 0.32e-6;
  c.interNodeBandwidth = 1e9;
  c.interNodeLatency = 50e-6;
  c.overlapsCommunication = false;
  c.sharedNode = true;
  // Offload: the host tier is the ranks' own memory (no host memory of
  // its own); a copy to it is a memcpy of the rank: 256 MiB, the median
  // of 5. The disk under /work through the runtime's I/O engine (io_uring,
  // O_DIRECT, 256 MiB written then read, medians of 3). Both as
  // `--calibrate` measured them on 2026-12-05 at load 1.2 (partition-
  // bench-io agrees: 1.4 / 2.2 GB/s on a quiet machine, docs/offload.md).
  c.hostLinkBandwidth = 10.6e9;
  c.hostMemoryBytes = 0;
  c.diskReadBandwidth = 1.2e9;
  c.diskWriteBandwidth = 2.0e9;
  // The kernels beside the disk's transfers (an sgemm and a triad on both
  // cores while io_uring moves 128 MiB each way): 0, 10, 18, 20 and 24%
  // slower in five `--calibrate` runs on 2026-12-05 (14:00-14:04 UTC, load
  // 1.6-3); the median.
  c.diskComputeSlowdown = 0.18;
  return c;
}

struct Profile {
  const char *name;
  Cluster (*make)();
};
const Profile kProfiles[] = {{"a100-80gb-dgx", a100},
                             {"h100-sxm-dgx", h100},
                             {"h200-dgx", h200},
                             {"gb200-nvl72", gb200},
                             {"cpu-local", cpuLocal}};

/// One field of the JSON form: its key and how it reads and writes.
struct Field {
  const char *key;
  enum Kind { Number, Count, Flag, Choice, NonNegative } kind;
  double Cluster::*number = nullptr;
  int Cluster::*count = nullptr;
  bool Cluster::*flag = nullptr;
  std::string Cluster::*choice = nullptr;
  std::vector<std::string> choices = {};
};

const std::vector<Field> &fields() {
  static const std::vector<Field> all = {
      {"peak_flops_bf16", Field::Number, &Cluster::peakFlopsBf16},
      {"peak_flops_fp32", Field::Number, &Cluster::peakFlopsFp32},
      {"gemm_efficiency", Field::Number, &Cluster::gemmEfficiency},
      {"gemm_tile_m", Field::Count, nullptr, &Cluster::gemmTileM},
      {"gemm_tile_n", Field::Count, nullptr, &Cluster::gemmTileN},
      {"compute_units", Field::Count, nullptr, &Cluster::computeUnits},
      {"memory_bytes", Field::Number, &Cluster::memoryBytes},
      {"memory_bandwidth", Field::Number, &Cluster::memoryBandwidth},
      {"memory_efficiency", Field::Number, &Cluster::memoryEfficiency},
      {"kernel_latency", Field::Number, &Cluster::kernelLatency},
      {"devices_per_node", Field::Count, nullptr, &Cluster::devicesPerNode},
      {"intra_node_bandwidth", Field::Number, &Cluster::intraNodeBandwidth},
      {"intra_node_latency", Field::Number, &Cluster::intraNodeLatency},
      {"inter_node_bandwidth", Field::Number, &Cluster::interNodeBandwidth},
      {"inter_node_latency", Field::Number, &Cluster::interNodeLatency},
      {"overlaps_communication", Field::Flag, nullptr, nullptr,
       &Cluster::overlapsCommunication},
      {"shared_node", Field::Flag, nullptr, nullptr, &Cluster::sharedNode},
      {"attention_kernel", Field::Choice, nullptr, nullptr, nullptr,
       &Cluster::attentionKernel, {"fused", "materialized"}},
      {"attention_skips_masked", Field::Flag, nullptr, nullptr,
       &Cluster::attentionSkipsMasked},
      {"gemm_pack_bandwidth", Field::NonNegative, &Cluster::gemmPackBandwidth},
      {"gemm_pack_cached_bytes", Field::NonNegative,
       &Cluster::gemmPackCachedBytes},
      {"host_link_bandwidth", Field::NonNegative, &Cluster::hostLinkBandwidth},
      {"host_memory_bytes", Field::NonNegative, &Cluster::hostMemoryBytes},
      {"disk_read_bandwidth", Field::NonNegative, &Cluster::diskReadBandwidth},
      {"disk_write_bandwidth", Field::NonNegative,
       &Cluster::diskWriteBandwidth},
      {"disk_compute_slowdown", Field::NonNegative,
       &Cluster::diskComputeSlowdown},
  };
  return all;
}

std::string joinedProfileNames() {
  std::string names;
  for (const Profile &profile : kProfiles)
    names += (names.empty() ? "" : ", ") + std::string(profile.name);
  return names;
}

/// The value as the file wrote it, short, for messages.
std::string show(const nlohmann::json &value) {
  std::string text = value.dump();
  return text.size() > 40 ? text.substr(0, 37) + "..." : text;
}

} // namespace

const std::vector<std::string> &profileNames() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> all;
    for (const Profile &profile : kProfiles)
      all.push_back(profile.name);
    return all;
  }();
  return names;
}

std::optional<Cluster> getProfile(const std::string &name) {
  for (const Profile &profile : kProfiles)
    if (name == profile.name)
      return profile.make();
  return std::nullopt;
}

OrError<Cluster> parseCluster(const std::string &text,
                               const std::string &fileName) {
  auto fail = [&](const std::string &message) {
    return OrError<Cluster>::failure(fileName + ": " + message);
  };
  // The shared reader: no exceptions (the build has none), duplicate keys,
  // depth and numbers beyond a double's range refused in one line.
  if (jsonreader::isBlank(text))
    return fail("the file is empty; give a JSON object of cluster fields, "
                "such as {\"base\": \"h100-sxm-dgx\"}");
  std::string problem;
  std::optional<nlohmann::json> parsed =
      jsonreader::parseJson(text, problem, /*maxDepth=*/4);
  if (!parsed)
    return fail(problem);
  const nlohmann::json &root = *parsed;
  if (!root.is_object())
    return fail("a cluster must be a JSON object, got " + show(root));

  Cluster cluster = cpuLocal();
  if (auto base = root.find("base"); base != root.end()) {
    if (!base->is_string())
      return fail("field 'base' must be a profile name (" +
                  joinedProfileNames() + "), got " + show(*base));
    std::optional<Cluster> profile = getProfile(base->get<std::string>());
    if (!profile)
      return fail("unknown base profile " + show(*base) + " (known: " +
                  joinedProfileNames() + ")");
    cluster = *profile;
  }
  if (auto name = root.find("name"); name != root.end()) {
    if (!name->is_string())
      return fail("field 'name' must be a string, got " + show(*name));
    cluster.name = name->get<std::string>();
  } else {
    cluster.name = fileName;
  }

  for (const auto &[key, value] : root.items()) {
    if (key == "base" || key == "name")
      continue;
    const Field *field = nullptr;
    for (const Field &candidate : fields())
      if (key == candidate.key)
        field = &candidate;
    if (!field) {
      std::string known = "base, name";
      for (const Field &candidate : fields())
        known += std::string(", ") + candidate.key;
      return fail("unknown field '" + jsonreader::showKey(key) +
                  "' (known: " + known + ")");
    }
    switch (field->kind) {
    case Field::Number:
      if (!value.is_number() || !(value.get<double>() > 0) ||
          !std::isfinite(value.get<double>()))
        return fail("field '" + key + "' must be a positive number, got " +
                    show(value));
      cluster.*(field->number) = value.get<double>();
      break;
    case Field::NonNegative:
      // 0: the cluster has none (no disk, no host memory of its own).
      if (!value.is_number() || !(value.get<double>() >= 0) ||
          !std::isfinite(value.get<double>()))
        return fail("field '" + key +
                    "' must be a number, 0 or more (0: none), got " +
                    show(value));
      cluster.*(field->number) = value.get<double>();
      break;
    case Field::Count:
      if (!value.is_number_integer() || value.get<int64_t>() < 1 ||
          value.get<int64_t>() > (1 << 24))
        return fail("field '" + key +
                    "' must be a positive integer, got " + show(value));
      cluster.*(field->count) = value.get<int>();
      break;
    case Field::Flag:
      if (!value.is_boolean())
        return fail("field '" + key + "' must be true or false, got " +
                    show(value));
      cluster.*(field->flag) = value.get<bool>();
      break;
    case Field::Choice: {
      bool known = false;
      if (value.is_string())
        for (const std::string &choice : field->choices)
          known = known || value.get<std::string>() == choice;
      if (!known) {
        std::string choices;
        for (const std::string &choice : field->choices)
          choices += (choices.empty() ? "" : ", ") + choice;
        return fail("field '" + key + "' must be one of " + choices +
                    ", got " + show(value));
      }
      cluster.*(field->choice) = value.get<std::string>();
      break;
    }
    }
  }
  if (cluster.gemmEfficiency > 1 || cluster.memoryEfficiency > 1)
    return fail("gemm_efficiency and memory_efficiency are fractions of "
                "peak, at most 1");
  if ((cluster.diskReadBandwidth > 0) != (cluster.diskWriteBandwidth > 0))
    return fail("disk_read_bandwidth and disk_write_bandwidth are both 0 "
                "(no disk) or both positive, got " +
                show(cluster.diskReadBandwidth) + " and " +
                show(cluster.diskWriteBandwidth));
  return cluster;
}

OrError<Cluster> loadCluster(const std::string &nameOrFile) {
  if (std::optional<Cluster> profile = getProfile(nameOrFile))
    return *profile;
  std::ifstream file(nameOrFile);
  if (!file) {
    // A name without a path separator or .json was meant as a profile.
    bool looksLikeFile = nameOrFile.find('/') != std::string::npos ||
                         nameOrFile.find(".json") != std::string::npos;
    if (looksLikeFile)
      return OrError<Cluster>::failure("cannot read cluster file '" +
                                        nameOrFile + "'");
    return OrError<Cluster>::failure(
        "unknown cluster profile '" + nameOrFile + "' (known: " +
        joinedProfileNames() + "; or give a cluster JSON file)");
  }
  std::stringstream text;
  text << file.rdbuf();
  return parseCluster(text.str(), nameOrFile);
}

std::string clusterToJson(const Cluster &cluster) {
  nlohmann::ordered_json out;
  out["name"] = cluster.name;
  for (const Field &field : fields()) {
    switch (field.kind) {
    case Field::Number:
    case Field::NonNegative:
      out[field.key] = cluster.*(field.number);
      break;
    case Field::Count:
      out[field.key] = cluster.*(field.count);
      break;
    case Field::Flag:
      out[field.key] = cluster.*(field.flag);
      break;
    case Field::Choice:
      out[field.key] = cluster.*(field.choice);
      break;
    }
  }
  return out.dump(2) + "\n";
}

} // namespace partition::planner
