//===- Offload.h - the cost of offload ---------------------------*- C++ -*-===//
//
// What offload (plan.json's offload.optimizer and offload.parameters,
// docs/offload.md) costs a plan: the exposed time of the moments' and
// ZeRO-3 parameter shards' transfers to and from their tier, what the
// compute loses beside the disk's, and the device memory they leave.
// predict() (CostModel.cpp) adds them.
//
//===----------------------------------------------------------------------===//

#ifndef PARTITION_PLANNER_OFFLOAD_H
#define PARTITION_PLANNER_OFFLOAD_H

#include "planner/CostModel.h"

#include <string>

namespace partition::planner {

/// The exposed seconds of optimizer offload per step : `bytes` of moments of
/// this rank read from and written back to `tier` ("host" or "nvme") around
/// updates of `update` seconds in all, which the compiler moves into the
/// backward pass (`window` seconds of it: the last micro-batch's after the
/// first update, below the last layer's and the head's backward) except the
/// update of the tensor whose gradient completes last (`lastShare` of the bytes
/// and of the update: the embedding), at the end of the step; slices of
/// planfile::offloadSliceBytes(bufferBytes) per moment. `node` is the whole
/// node, `device` this rank's share of it, `ranksOnNode` the ranks sharing
/// the node's disk.
double offloadSeconds(const std::string &tier, double bytes,
                      int64_t bufferBytes, double update, double window,
                      double lastShare, const Cluster &node,
                      const Cluster &device, int64_t ranksOnNode);

/// One rank's ZeRO-3 parameter shards in a tier (offload.parameters):
/// what their reads for the all-gathers cost. --rt-offload-optimizer
/// reads each layer's shard slice by slice ahead of the flat_pack that
/// packs its all-gather bucket (one layer ahead of its compute, as ZeRO-3
/// prefetches), in forward and in backward of every micro-batch, at most
/// half of the staging budget ahead.
struct ParameterGathers {
  /// Bytes of this rank's fp32 shards: the embedding's (gathered before
  /// the first layer; 0 off the first pipeline stage), each layer's, and
  /// the head's the backward gathers first (the tied embedding or the
  /// untied head of a one-stage plan; else 0).
  double embeddingBytes = 0, layerBytes = 0, headBytes = 0;
  int64_t layers = 0, microbatches = 1;
  /// Seconds per micro-batch: one layer's forward, and its backward (with
  /// what it recomputes); the embedding's forward; the head's forward and
  /// backward.
  double layerForward = 0, layerBackward = 0, embeddingForward = 0,
         headForward = 0, headBackward = 0;
  /// ZeRO-3's collectives the rank waits for between packs: a layer's
  /// all-gather (forward), its all-gather and reduce-scatter (backward),
  /// the embedding's all-gather; and whether they run beside the compute
  /// (Cluster::overlapsCommunication: the reads then hide behind the
  /// longer of the two, else behind both one after the other).
  double layerGather = 0, layerBackwardComm = 0, embeddingGather = 0;
  bool overlapsCommunication = false;
};

struct GatherReads {
  /// Seconds per step the rank waits for shard reads (all micro-batches).
  double exposed = 0;
  /// Bytes read per step, and the tier's seconds to read them.
  double bytes = 0, seconds = 0;
  /// The tier's seconds reading the last micro-batch's backward shards
  /// (the optimizer's update transfers share the disk with them).
  double backwardSeconds = 0;
};

/// The shard reads of `g` from `tier` ("host" or "nvme"), simulated in
/// program order: reads in slices of 2 x planfile::offloadSliceBytes
/// (bufferBytes), each started when the slice half of `bufferBytes`
/// before it is packed (at least one ahead), the tier one read at a time,
/// the rank waiting where a slice is packed before its read is done.
/// `node`, `device` and `ranksOnNode` as for offloadSeconds.
GatherReads parameterGatherSeconds(const std::string &tier,
                                   const ParameterGathers &g,
                                   int64_t bufferBytes, const Cluster &node,
                                   const Cluster &device, int64_t ranksOnNode);

/// The seconds `tier` takes to read `readBytes` and write `writeBytes` of
/// one rank (the disk shared by `ranksOnNode`, one direction after the
/// other; a host link both at once), as offloadSeconds prices them.
double offloadIoSeconds(const std::string &tier, double readBytes,
                        double writeBytes, const Cluster &node,
                        const Cluster &device, int64_t ranksOnNode);

/// What the compute loses beside the disk: `hidden` seconds of the disk's
/// transfers ran under kernels, which ran Cluster::diskComputeSlowdown
/// (s) slower there: hidden x s / (1 + s) of them.
double diskSlowdownSeconds(double hidden, const Cluster &node);

/// What predict() knows of the step that offload's cost depends on.
struct OffloadStep {
  /// This rank's shard of the parameters (AdamW's), the updates' seconds
  /// (U), the last micro-batch's backward on the first stage after its
  /// first update (W: less the head's and the last layer's), the
  /// share of the updates that stays at the end (the embedding's), and
  /// the step's compute (the most the transfers hide behind).
  double shardParams = 0, update = 0, window = 0, lastShare = 0,
         compute = 0;
  /// The shards' reads for the all-gathers (offload.parameters).
  ParameterGathers gathers;
};

/// The exposed seconds per step of the plan's offload, the breakdown's
/// `offload` line: the shards' reads for the all-gathers
/// (parameterGatherSeconds), the updates' transfers of the moments and
/// shards (offloadSeconds over both, the window less the disk's time on
/// the backward's shard reads), and what the compute loses beside the
/// disk (diskSlowdownSeconds of the disk's time not exposed). Fills
/// `out`'s offloaded bytes, bytes read and written, and the gathers' and
/// slowdown's parts.
double offloadStepSeconds(const Candidate &plan, const OffloadStep &step,
                          const Cluster &node, const Cluster &device,
                          Prediction &out);

/// The memory of a plan with its moments offloaded: they leave the
/// device (the staging buffers take their place) unless the host tier is
/// the device's own memory (a shared node); a host tier must fit the
/// node's host memory (`out.tierFits`). With offload.parameters the
/// fp32 parameter shards leave it likewise (the one staging budget
/// serves both; `out.offloadedParameterBytes`).
void offloadMemory(const Candidate &plan, const Cluster &node,
                   const Cluster &device, Prediction &out);

} // namespace partition::planner

#endif // PARTITION_PLANNER_OFFLOAD_H
