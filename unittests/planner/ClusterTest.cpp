//===- ClusterTest.cpp - profiles and cluster files -----------------------===//

#include "planner/Cluster.h"

#include <gtest/gtest.h>

using namespace partition::planner;
using partition::OrError;

TEST(Cluster, EveryProfileRoundTripsThroughJson) {
  for (const std::string &name : profileNames()) {
    std::optional<Cluster> profile = getProfile(name);
    ASSERT_TRUE(profile) << name;
    EXPECT_GT(profile->peakFlopsBf16, 0) << name;
    OrError<Cluster> back = parseCluster(clusterToJson(*profile), "x.json");
    ASSERT_TRUE(bool(back)) << back.error();
    EXPECT_EQ(back->name, name);
    EXPECT_EQ(back->peakFlopsBf16, profile->peakFlopsBf16);
    EXPECT_EQ(back->devicesPerNode, profile->devicesPerNode);
    EXPECT_EQ(back->attentionKernel, profile->attentionKernel);
    EXPECT_EQ(back->attentionSkipsMasked, profile->attentionSkipsMasked);
  }
}

TEST(Cluster, GpuProfilesCreditTheCausalBlocksTheKernelSkips) {
  EXPECT_TRUE(getProfile("h100-sxm-dgx")->attentionSkipsMasked);
  EXPECT_TRUE(getProfile("h200-dgx")->attentionSkipsMasked);
  EXPECT_TRUE(getProfile("gb200-nvl72")->attentionSkipsMasked);
  // Materialized attention computes every score; cpu-local's profile does
  // not time the attention kernel (Cluster.h).
  EXPECT_FALSE(getProfile("a100-80gb-dgx")->attentionSkipsMasked);
  EXPECT_FALSE(getProfile("cpu-local")->attentionSkipsMasked);
  OrError<Cluster> c = parseCluster(
      R"({"base": "h100-sxm-dgx", "attention_skips_masked": false})", "c.json");
  ASSERT_TRUE(bool(c)) << c.error();
  EXPECT_FALSE(c->attentionSkipsMasked);
}

TEST(Cluster, FileOverridesItsBase) {
  OrError<Cluster> c = parseCluster(
      R"({"base": "h100-sxm-dgx", "devices_per_node": 4,
          "inter_node_bandwidth": 1e10})",
      "c.json");
  ASSERT_TRUE(bool(c)) << c.error();
  EXPECT_EQ(c->devicesPerNode, 4);
  EXPECT_EQ(c->interNodeBandwidth, 1e10);
  EXPECT_EQ(c->peakFlopsBf16, getProfile("h100-sxm-dgx")->peakFlopsBf16);
}

TEST(Cluster, BadFilesSayWhatIsWrong) {
  auto error = [](const std::string &text) {
    OrError<Cluster> c = parseCluster(text, "c.json");
    EXPECT_FALSE(bool(c)) << text;
    return c ? std::string() : c.error();
  };
  EXPECT_EQ(error(R"({"devices_per_node": "eight"})"),
            "c.json: field 'devices_per_node' must be a positive integer, "
            "got \"eight\"");
  EXPECT_EQ(error(R"({"peak_flops_bf16": -1})"),
            "c.json: field 'peak_flops_bf16' must be a positive number, got -1");
  EXPECT_EQ(error(R"({"base": "tpu"})").substr(0, 39),
            "c.json: unknown base profile \"tpu\" (kno");
  EXPECT_NE(error(R"({"gpus": 8})").find("unknown field 'gpus'"),
            std::string::npos);
  EXPECT_NE(error("[1]").find("must be a JSON object"), std::string::npos);
  EXPECT_NE(error("{").find("invalid JSON"), std::string::npos);
  // The shared reader: no exception escapes (the build has none).
  EXPECT_EQ(error(" \n").substr(0, 26), "c.json: the file is empty;");
  EXPECT_EQ(error(R"({"memory_bytes": 1e400})"),
            "c.json: the number 1e400 is out of range (beyond a double's "
            "+-1.8e308)");
  EXPECT_EQ(error(R"({"compute_units": 4, "compute_units": 8})"),
            "c.json: the key 'compute_units' is given twice; give each key "
            "once");
  EXPECT_NE(error(R"({"memory_bytes": })").find("invalid JSON: parse error"),
            std::string::npos);
  // A key is shown escaped: the message stays one line (a cluster-fuzz
  // finding, fuzz/corpus/cluster/key-with-cr.json).
  EXPECT_EQ(error("{\"attention_k\\rnel\": 1}"),
            "c.json: unknown field 'attention_k\\0Dnel' (known: base, "
            "name, peak_flops_bf16, peak_flops_fp32, gemm_efficiency, "
            "gemm_tile_m, gemm_tile_n, compute_units, memory_bytes, "
            "memory_bandwidth, memory_efficiency, kernel_latency, "
            "devices_per_node, intra_node_bandwidth, intra_node_latency, "
            "inter_node_bandwidth, inter_node_latency, "
            "overlaps_communication, shared_node, attention_kernel, "
            "attention_skips_masked, gemm_pack_bandwidth, "
            "gemm_pack_cached_bytes, host_link_bandwidth, host_memory_bytes, "
            "disk_read_bandwidth, disk_write_bandwidth, "
            "disk_compute_slowdown)");
  // The offload fields: 0 is "none", a negative or non-number is not, and
  // a disk reads and writes.
  EXPECT_EQ(error(R"({"disk_read_bandwidth": -1})"),
            "c.json: field 'disk_read_bandwidth' must be a number, 0 or "
            "more (0: none), got -1");
  EXPECT_EQ(error(R"({"host_link_bandwidth": "fast"})"),
            "c.json: field 'host_link_bandwidth' must be a number, 0 or "
            "more (0: none), got \"fast\"");
  EXPECT_EQ(error(R"({"base": "gb200-nvl72", "disk_read_bandwidth": 6e9})"),
            "c.json: disk_read_bandwidth and disk_write_bandwidth are both 0 "
            "(no disk) or both positive, got 6000000000.0 and 0.0");
  EXPECT_NE(error(R"({"attention_kernel": "fast"})")
                .find("must be one of fused, materialized"),
            std::string::npos);
}

TEST(Cluster, OffloadFieldsHaveDefaultsAndOverrides) {
  // Every shipped profile has a host link; the DGX nodes host memory and
  // a disk, cpu-local its disk but no host memory of its own (the ranks'
  // memory is the host's), GB200 no disk figure.
  for (const std::string &name : profileNames()) {
    Cluster c = *getProfile(name);
    EXPECT_GT(c.hostLinkBandwidth, 0) << name;
    EXPECT_EQ(c.hasDisk(), name != "gb200-nvl72") << name;
    EXPECT_EQ(c.hostMemoryBytes > 0, name != "cpu-local") << name;
    // DMA runs beside the GPUs' kernels; only cpu-local's cores move the
    // disk's bytes.
    EXPECT_EQ(c.diskComputeSlowdown > 0, name == "cpu-local") << name;
  }
  EXPECT_EQ(getProfile("h100-sxm-dgx")->hostLinkBandwidth, 55e9);
  OrError<Cluster> c = parseCluster(
      R"({"base": "h100-sxm-dgx", "disk_read_bandwidth": 6.5e9,
          "disk_write_bandwidth": 5e9, "host_memory_bytes": 0,
          "disk_compute_slowdown": 0.25})",
      "c.json");
  ASSERT_TRUE(bool(c)) << c.error();
  EXPECT_EQ(c->diskComputeSlowdown, 0.25);
  EXPECT_EQ(c->diskReadBandwidth, 6.5e9);
  EXPECT_EQ(c->diskWriteBandwidth, 5e9);
  EXPECT_EQ(c->hostMemoryBytes, 0);
  OrError<Cluster> none = parseCluster(
      R"({"disk_read_bandwidth": 0, "disk_write_bandwidth": 0})", "c.json");
  ASSERT_TRUE(bool(none)) << none.error();
  EXPECT_FALSE(none->hasDisk());
  OrError<Cluster> negative =
      parseCluster(R"({"disk_compute_slowdown": -0.1})", "c.json");
  EXPECT_FALSE(bool(negative));
}

TEST(Cluster, UnknownProfileNamesTheKnownOnes) {
  OrError<Cluster> c = loadCluster("v100");
  ASSERT_FALSE(bool(c));
  EXPECT_NE(c.error().find("unknown cluster profile 'v100' (known: "
                           "a100-80gb-dgx, h100-sxm-dgx"),
            std::string::npos);
}
