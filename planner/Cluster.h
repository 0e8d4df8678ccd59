//===- Cluster.h - what the cost model knows of a cluster -------*- C++ -*-===//
//
// A cluster as the cost model sees it: per device, peak FLOP/s per
// precision, memory and memory bandwidth; devices per node; per device,
// the bandwidth and latency of the links inside a node and between nodes.
// Built-in profiles take their numbers from data sheets (each constant says
// where it comes from); `cpu-local` is this machine as `partition-plan
// --calibrate` measured it. A cluster file (JSON) names a profile to start
// from ("base", default cpu-local ... see parseCluster) and overrides any
// field; a field of the wrong type or an unknown field is an error.
//
// Plain C++ and nlohmann-json (no MLIR): the planner library and its tests
// use it alone.
//
//===----------------------------------------------------------------------===//

#ifndef PARTITION_PLANNER_CLUSTER_H
#define PARTITION_PLANNER_CLUSTER_H

#include "support/OrError.h"

#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace partition::planner {

struct Cluster {
  std::string name;
  /// Dense peak FLOP/s of one device: bf16 (tensor cores) and fp32.
  double peakFlopsBf16 = 0;
  double peakFlopsFp32 = 0;
  /// The fraction of peak the best GEMM kernels reach on large,
  /// well-shaped matrices (cuBLAS, OpenBLAS); the shape terms of the cost
  /// model (tiles, waves, memory roofline) come on top.
  double gemmEfficiency = 0;
  /// GEMM tile (rows x columns of the output one compute unit makes at a
  /// time) and compute units (SMs, cores): tile and wave quantization.
  int gemmTileM = 0, gemmTileN = 0, computeUnits = 0;
  /// CPU GEMMs: the rate (bytes/s, all compute units) at which the BLAS
  /// library packs a GEMM's two operands into its panels before the
  /// kernel runs, which peak FLOP/s does not include: a GEMM of a few rows
  /// against a large weight (the LM head of a small micro-batch: 32 x 768
  /// x 50257) spends most of its time there. Each GEMM then adds its
  /// operands' bytes at this rate, except an operand of at most
  /// `gemmPackCachedBytes` (a core's cache: it is packed from there, at no
  /// cost worth counting). 0 (the GPU profiles): no such term.
  /// `--calibrate` measures the rate from a large and a thin sgemm and
  /// takes the cache's size from the system (the L2 of one core).
  double gemmPackBandwidth = 0;
  double gemmPackCachedBytes = 0;
  /// Device memory in bytes, and its bandwidth (bytes/s) with the fraction
  /// of it that streaming kernels reach.
  double memoryBytes = 0;
  double memoryBandwidth = 0;
  double memoryEfficiency = 0;
  /// Fixed cost of one kernel launch (s).
  double kernelLatency = 0;
  /// Devices per node and the links: per device, one direction (bytes/s),
  /// and the latency of one message (s).
  int devicesPerNode = 0;
  double intraNodeBandwidth = 0, intraNodeLatency = 0;
  double interNodeBandwidth = 0, interNodeLatency = 0;
  /// Whether the backend runs gradient all-reduces while later layers'
  /// backward still computes (separate streams on GPUs). Off on cpu-local:
  /// the CPU backend's communication thread runs them beside the backward,
  /// but on the ranks' own cores, so what it hides it mostly takes from
  /// the kernels (gpt2-124m dp2 on 2 cores: 7 ms of waits left per step,
  /// and the GEMMs 20% slower than alone; docs/performance.md).
  bool overlapsCommunication = false;
  /// How attention runs: "fused" (flash-style: scores stay on chip, the
  /// backward recomputes them; this project's CUDA and CPU kernels) or
  /// "materialized" (Megatron-LM's core attention as of 2021: scores
  /// written to memory, a fused scale-mask-softmax kernel, dropout on the
  /// probabilities with a byte mask, the backward reading the saved
  /// probabilities and mask).
  std::string attentionKernel = "fused";
  /// Whether the fused kernel's time is credited with the key blocks a
  /// causal mask skips (a query block visits keys up to its last row:
  /// about half the square). Both of this project's kernels skip them, as
  /// FlashAttention does; it is on for the GPU profiles. Off on cpu-local:
  /// its profile times sgemm, not the attention kernel, and crediting it
  /// there moves the recorded CPU table's smallest plan (dp2, 2 layers of
  /// 128) from 22% to 26% under its measured time (docs/planner.md).
  bool attentionSkipsMasked = false;
  /// Whether the devices of a node are processes sharing its cores and
  /// memory (cpu-local: ranks on one machine): then each of the d devices
  /// on a node gets 1/d of the node's FLOP/s, bandwidth, compute units and
  /// memory, which the figures above describe whole.
  bool sharedNode = false;
  /// Optimizer offload (docs/offload.md): the link between a device and
  /// its host memory, per device, one direction (bytes/s: PCIe, NVLink-C2C;
  /// on cpu-local a memcpy); the host memory of a node (bytes; 0 where the
  /// devices are the host's own processes, sharedNode: the host tier is
  /// then the same memory as the devices'); and the node's disk for the
  /// nvme tier, read and write (bytes/s, shared by the node's devices; 0:
  /// no disk, the nvme tier is not considered).
  double hostLinkBandwidth = 0;
  double hostMemoryBytes = 0;
  double diskReadBandwidth = 0, diskWriteBandwidth = 0;
  /// How much slower the rank's kernels run while the disk's transfers are
  /// in flight (a fraction: 0.3 = 30% longer), where moving them costs the
  /// compute's own cores (CPU ranks: io_uring's completions, a virtual
  /// disk's emulation on the same cores); 0 where DMA runs beside the
  /// kernels (GPUs). `--calibrate` measures it (an sgemm on all threads
  /// alone and beside a read and a write through the I/O engine).
  double diskComputeSlowdown = 0;

  bool hasDisk() const {
    return diskReadBandwidth > 0 && diskWriteBandwidth > 0;
  }

  double peakFlops(const std::string &precision) const {
    return precision == "bf16" ? peakFlopsBf16 : peakFlopsFp32;
  }
};

/// The built-in profile names, in a stable order.
const std::vector<std::string> &profileNames();
/// A built-in profile, or nullopt.
std::optional<Cluster> getProfile(const std::string &name);

/// A cluster from JSON text: {"base": "a100-80gb-dgx", "devices_per_node":
/// 4, ...}; every field optional over the base profile (cpu-local when no
/// base is named). `fileName` starts every message.
OrError<Cluster> parseCluster(const std::string &text,
                               const std::string &fileName);

/// `--cluster` as the user gave it: a profile name, else a JSON file.
OrError<Cluster> loadCluster(const std::string &nameOrFile);

/// The cluster as JSON (every field), as parseCluster reads it back.
std::string clusterToJson(const Cluster &cluster);

} // namespace partition::planner

#endif // PARTITION_PLANNER_CLUSTER_H
