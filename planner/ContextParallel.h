//===- ContextParallel.h - context parallelism's costs ----------*- C++ -*-===//
//
// Context parallelism (plan.json's mesh.cp, context_parallel): every
// activation is split along the sequence over the cp ranks of a context
// group, so each rank's GEMMs, elementwise kernels and activations are a
// cp-th of a layer's; parameters are replicated over cp and their
// gradients reduced over dp x cp. Attention is the one op that needs the
// whole sequence:
//
//  - all_gather (Llama 3's method, what partition-compile builds): before
//    each layer's attention the rank all-gathers the keys and values of
//    the group (cheap with GQA: 2 x kv_heads x head_dim x seq elements per
//    sequence), runs its local queries against them and, in the backward,
//    gathers them again (they live only while the layer runs) and
//    reduce-scatters dK/dV. Nothing is overlapped with compute: Llama 3
//    reports the all-gather exposed (section 3.3.2), and the attention
//    that could hide it needs its result first.
//  - ring: cp - 1 steps, each sending one K/V block to the next rank while
//    the attention of the block in hand runs; what a step's transfer takes
//    beyond its block's compute is exposed. Predicted, not compiled yet.
//
// Causal attention work per rank: query i meets i + 1 keys. Cut in cp
// contiguous pieces, rank r does (2r + 1) / cp^2 of the work and the step
// waits for the last rank, (2 cp - 1) / cp^2; zigzag (2 cp chunks, rank r
// holding chunks r and 2 cp - 1 - r) gives each rank 1 / cp.
//
// Model FLOPs do not change with cp (the same tokens, the same attention);
// only the time of the slowest rank does.
//
//===----------------------------------------------------------------------===//

#ifndef PARTITION_PLANNER_CONTEXTPARALLEL_H
#define PARTITION_PLANNER_CONTEXTPARALLEL_H

#include "planner/Cluster.h"
#include "planner/CostModel.h"

namespace partition::planner {

/// The sequences at or above this length are where the search tries cp > 1
/// by default: there attention's s^2 work and the activations' s outgrow
/// what tp and pp split (Llama 3 used cp only for its 131k stage, not at
/// 8k). Below it cp is searched only when no plan fits without it, or
/// when plan.json fixes it.
inline constexpr int64_t kContextSearchMinSeqLen = 32768;

/// The slowest rank's share of one sequence's causal attention work (1 at
/// cp 1): 1 / cp with zigzag, (2 cp - 1) / cp^2 without.
double causalShare(int64_t cp, const std::string &loadBalance);

/// The query rows the attention kernels take at once (runtime/backend/cpu
/// Attention.cpp's kBlock, the CUDA kernel's kRows): a causal block visits
/// keys up to its last row.
inline constexpr double kAttentionBlockRows = 64;

/// The keys a query of the slowest rank is charged for, averaged over the
/// layers (the fused kernel's work per query). With cp the rank's s/cp
/// queries do causalShare of the work: s x cp x causalShare keys of the
/// square, s with zigzag (a cp-th of cp 1's attention) and (2 - 1/cp) s
/// without; where the cluster's kernel skips the masked blocks
/// (Cluster::attentionSkipsMasked) half of that plus half a block of rows.
/// Sliding-window layers meet the window wherever their queries sit, so no
/// rank waits for another there.
double attendedKeysPerQuery(const ModelShape &m, const Candidate &p,
                            const Cluster &c);

/// Bytes of the keys and values one rank of the tp group gathers per
/// layer per micro-batch: the whole sequence of its key-value heads
/// (kv_heads / tp, at least one: heads fewer than tp are replicated),
/// 2 x heads x head_dim x seq x micro-batch elements. 0 at cp 1.
double kvGatherBytes(const ModelShape &m, const Candidate &p);

/// The context-parallel communication of one layer per micro-batch on one
/// rank (seconds): what is exposed in the forward, the backward and a full
/// recomputation's forward.
struct ContextComm {
  double forward = 0, backward = 0, recompute = 0;
};

/// `attentionForward` / `attentionBackward`: the rank's attention kernel
/// time for the micro-batch (its share of the causal work), which the
/// ring hides its transfers behind.
ContextComm contextComm(const ModelShape &m, const Candidate &p,
                        const Cluster &c, double attentionForward,
                        double attentionBackward);

/// Transient bytes of a layer's context-parallel buffers: all_gather holds
/// the gathered K/V and, in the backward, the dK/dV it reduce-scatters;
/// ring two blocks in flight of each.
double contextTransientBytes(const ModelShape &m, const Candidate &p);

/// Whether the search tries cp > 1 for this model by default.
bool searchContextParallel(const ModelShape &m);

} // namespace partition::planner

#endif // PARTITION_PLANNER_CONTEXTPARALLEL_H
