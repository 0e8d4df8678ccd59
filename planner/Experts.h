//===- Experts.h - mixtures of experts and expert parallelism ---*- C++ -*-===//
//
// What a mixture-of-experts (MoE) layer costs (docs/moe.md has the model;
// model/ModelBuilder.cpp mixtureOfExperts builds it): a router linear
// [E, H]; top-k routing per sequence with a capacity of C rows per expert
// (dropless: C = S); the dispatch into an expert buffer [B, E, C, H];
// three grouped GEMMs (w1, w3: H -> F; w2: F -> H) over the buffer's
// filled rows (B S k of them, balanced); the combine.
//
// Expert parallelism (plan.json's moe.expert_parallel = EP, dividing
// mesh.dp and the experts) splits each MoE layer's stacked expert weights
// over EP ranks of the data axis (the minor part of it: ranks tp x cp x
// pp apart):
//
//  - per MoE layer and micro-batch, two all-to-alls forward (the buffer
//    [B_local, E, C, H] to the experts' ranks, [B_local EP, E/EP, C, H],
//    and back) and two backward (the output's gradient out, the input's
//    back: the backward reads the forward's exchanged copies), each
//    sending (EP - 1)/EP of the buffer at capacity (what the runtime
//    moves, padding included: the bytes do not depend on the routing);
//    plus a small one of the counts. Nothing hides them: the experts wait
//    for their rows and the combine for the experts;
//  - the compute per rank is unchanged on balanced routing: a rank's E/EP
//    experts get the k choices of EP ranks' tokens for them, B S k rows;
//  - expert weights, their gradients and AdamW state are an EP-th per
//    rank. Every token routed to an expert came to its rank, so its
//    gradient needs summing only over the ranks that hold the same
//    experts, dp / EP of them (dp x cp / EP with context parallelism):
//    the expert-data-parallel group, which also shards them under ZeRO
//    (Megatron's expert-data-parallel group). At EP = dp it is one rank:
//    no reduction, state whole.
//
// Under tensor parallelism the experts' features split over tp as a dense
// FFN's (w1 / w3 column-, w2 row-parallel) and the whole buffer stays on
// each tp rank: the w2 output's partial sums are all-reduced over tp on
// the buffer (and its gradient in the backward), as the partitioner does.
//
// Not modelled: routing imbalance (the step waits for the busiest expert:
// here every expert gets k/E of the tokens), dropped tokens (a capacity
// below the routed rows: here min(routed, capacity) rows are computed),
// the counts' small all-to-all, and kernels that multiply every row of the
// capacity buffer (the CUDA backend's strided-batched GEMMs: E/k times the
// expert FLOPs when dropless).
//
//===----------------------------------------------------------------------===//

#ifndef PARTITION_PLANNER_EXPERTS_H
#define PARTITION_PLANNER_EXPERTS_H

#include "planner/Cluster.h"
#include "planner/CostModel.h"

#include <cstdint>
#include <vector>

namespace partition::planner {

/// A dense layer's feed-forward parameters (Llama's SwiGLU 3hf; GPT-2's
/// fc1 and fc2 with biases, 2hf + f + h) and of them the matmul weights.
int64_t denseFfnParameters(const ModelShape &m);
double denseFfnMatmulParameters(const ModelShape &m);

/// One MoE layer's feed-forward parameters: the router (E h), the stacked
/// expert weights (E 3 h F) and the shared experts (3 h S F).
int64_t moeFfnParameters(const ModelShape &m);
/// One MoE layer's stacked expert weights, E x 3 x h x F: what expert
/// parallelism splits.
double expertWeights(const ModelShape &m);
/// The matmul weights one token's forward meets in a MoE layer: the
/// router, its k experts and the shared experts.
double activeFfnMatmulParameters(const ModelShape &m);

/// Buffer-sized all-to-alls per MoE layer and micro-batch under expert
/// parallelism, as partition-compile emits them (its --memory-report
/// counts 4 per layer, and 1 of the small counts): forward, the dispatched
/// buffer to the experts and their output back; backward, the output's
/// gradient to the experts and the input's gradient back.
inline constexpr double kForwardAllToAlls = 2, kBackwardAllToAlls = 2;

/// The expert-parallel degrees the compiler accepts for `dp` data-parallel
/// ranks: 1 and every degree dividing both dp and the experts. {1} for a
/// dense model.
std::vector<int64_t> expertParallelDegrees(const ModelShape &m, int64_t dp);

/// Rows of one micro-batch's expert buffer on one rank: b x E x C (the
/// buffer after the all-to-all, [b EP, E/EP, C], has as many), a cp-th
/// with context parallelism.
double expertBufferRows(const ModelShape &m, const Candidate &p);

/// Bytes of one micro-batch's expert buffer on one rank at capacity
/// (b E C h elements of the activation type): what its tp all-reduce
/// moves.
double expertAllToAllBytes(const ModelShape &m, const Candidate &p);

/// Bytes one all-to-all moves per rank per micro-batch: only the filled
/// rows travel (both backends' counted exchanges, docs/moe.md), with
/// balanced routing the micro-batch's tokens times top-k, at most the
/// buffer.
double expertExchangeBytes(const ModelShape &m, const Candidate &p);

/// Elements per token one MoE layer's block keeps for the backward (its
/// part of a layer's saved activations, tp degree `t`): the buffer rows
/// per token (E C / S) times the experts' input and output (2h) and the
/// gate, up and SwiGLU rows (3F/t; 2F/t under selective recomputation,
/// which rebuilds the SwiGLU), plus the router's logits and the shared
/// experts' (as a dense SwiGLU's).
double moeSavedPerToken(const ModelShape &m, double t, bool selective);

/// What a MoE model's mean layer keeps per token beyond the dense
/// formula of CostModel.cpp (which counts a dense block's 3f/t, or 2f/t
/// under selective recomputation, 2f/t and f/t for GPT-2): the MoE
/// layers' share of moeSavedPerToken less those f terms. 0 when dense.
double moeSavedDelta(const ModelShape &m, double t, bool selective);
/// The same for the working set of one layer's backward under full
/// recomputation: a MoE layer holds its rebuilt buffers and one
/// buffer-sized gradient at a time (the combine's, then the experts'
/// input's: rows x h; the F-wide gradients die as they go) instead of a
/// dense block's f-wide gradients. mixtral-tiny at seq 64, dp 2 / ep 2,
/// full: 4,435,968 bytes against the compiler's 4,434,624.
double moeWorkingDelta(const ModelShape &m, double t);

/// One MoE layer's feed-forward block for one micro-batch on one rank
/// (seconds), to be put in place of a dense block's.
struct ExpertLayerCost {
  /// Router, routing, dispatch and combine, the grouped expert GEMMs and
  /// the shared experts.
  double forwardCompute = 0, backwardInputCompute = 0, backwardWeight = 0;
  /// The elementwise work selective recomputation repeats (SwiGLU).
  double recomputeStream = 0;
  /// Tensor parallelism: the buffer's all-reduce over tp (forward, and
  /// its gradient's backward).
  double forwardTensor = 0, backwardTensor = 0;
  /// Expert parallelism: the forward's two all-to-alls, the backward's
  /// four.
  double forwardAllToAll = 0, backwardAllToAll = 0;
};

ExpertLayerCost expertLayerCost(const ModelShape &m, const Candidate &p,
                                const Cluster &c);

} // namespace partition::planner

#endif // PARTITION_PLANNER_EXPERTS_H
