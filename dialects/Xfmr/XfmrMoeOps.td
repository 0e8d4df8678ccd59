//===- XfmrMoeOps.td - mixture-of-experts ops --------------*- tablegen -*-===//
//
// The mixture-of-experts ops of the xfmr dialect: routing, token dispatch,
// the experts' grouped linear layers, the weighted combine and the
// load-balancing loss, with their gradients. Included by XfmrOps.td, whose
// op classes and type constraints they use.
//
// Layout. Each sequence of the batch is one token group (GShard's): its
// tokens are routed to E experts, each expert taking at most C tokens of the
// group (its capacity; C = S is dropless). The tokens an expert takes sit in
// an [B, E, C, H] buffer, group-major, filled in routing order from slot 0;
// `counts` [B, E] (i32) says how many slots are filled, and every slot past
// the count holds zeros. The group being the sequence, the same tokens drop
// whatever the plan splits (docs/moe.md).
//
//===----------------------------------------------------------------------===//

#ifndef PARTITION_XFMR_MOE_OPS
#define PARTITION_XFMR_MOE_OPS

def Xfmr_IndexTensor : RankedTensorOf<[I32]>;

// The scoring functions of the router (`scoring`):
//  - "softmax": softmax over the E logits, top-k, the k probabilities
//    renormalised to sum to 1 (Mixtral);
//  - "softmax_topk": top-k of the logits, softmax over the k (equal to
//    "softmax" in exact arithmetic: Megatron-LM's default order);
//  - "sigmoid": sigmoid of each logit, top-k, the k scores normalised to
//    sum to 1 (DeepSeek-V3).
// A `bias` [E] (DeepSeek-V3's auxiliary-loss-free balancing) is added to
// the scores for the selection only: the gates are computed without it.

def Xfmr_MoeRouteOp : Xfmr_ForwardOp<"moe_route"> {
  let summary = "top-k routing of each token to experts, with capacity";
  let description = [{
    For every token of `logits` [B, S, E] (the router's output), picks the
    `top_k` experts of highest score (ties to the lower index) and their
    gates, as `scoring` says ("softmax", "softmax_topk" or "sigmoid"; a
    `bias` [E] shifts the scores for the selection only). Each sequence
    (row b) is a group: expert e takes at most `capacity` of its tokens,
    assigned in routing order: every token's first choice in sequence order,
    then every second choice, and so on (GShard's priority). A choice past
    an expert's capacity is dropped: its slot is -1 and the token's output
    from that expert is zero.

    Results: `gates` [B, S, k] (of the logits' element type), `experts` [B, S, k] (i32, the chosen
    expert ids in descending score), `slots` [B, S, k] (i32, the row of
    the token in its expert's buffer, or -1), `counts` [B, E] (i32, the
    filled rows per group and expert). Only `gates` is differentiable
    (the selection is not).

    Example:
    ```mlir
    %g, %e, %s, %n = xfmr.moe_route %logits {top_k = 2 : i64, capacity = 32 : i64}
        : (tensor<4x32x8xf32>) -> (tensor<4x32x2xf32>, tensor<4x32x2xi32>,
                                   tensor<4x32x2xi32>, tensor<4x8xi32>)
    ```

    Constraints:
    - `logits` is [B, S, E] of a float type; `bias` (if any) is [E] of f32;
    - 1 <= top_k <= E; 1 <= capacity <= S;
    - `scoring` is "softmax", "softmax_topk" or "sigmoid";
    - the results have the shapes and types above.
  }];
  let arguments = (ins Xfmr_FloatTensor:$logits,
                       Optional<Xfmr_FloatTensor>:$bias,
                       I64Attr:$top_k, I64Attr:$capacity,
                       DefaultValuedAttr<StrAttr, "\"softmax\"">:$scoring);
  let results = (outs Xfmr_FloatTensor:$gates, Xfmr_IndexTensor:$experts,
                      Xfmr_IndexTensor:$slots, Xfmr_IndexTensor:$counts);
}

def Xfmr_MoeRouteGradOp : Xfmr_BackwardOp<"moe_route_grad"> {
  let summary = "backward of moe_route: the logits' gradient from the gates'";
  let description = [{
    Differentiates the gates of `xfmr.moe_route` with respect to the logits,
    the selection (`experts`) held fixed: logits that no token chose get
    zero. The gates are recomputed from `logits`.

    Example:
    ```mlir
    %dl = xfmr.moe_route_grad %dg, %logits, %e {top_k = 2 : i64}
        : (tensor<4x32x2xf32>, tensor<4x32x8xf32>, tensor<4x32x2xi32>) -> tensor<4x32x8xf32>
    ```

    Constraints:
    - `gates_grad` is [B, S, k] and `logits` [B, S, E] of one float type,
      `experts` [B, S, k] of i32; the result has the logits' type;
    - `top_k` and `scoring` as in `xfmr.moe_route`.
  }];
  let arguments = (ins Xfmr_FloatTensor:$gates_grad, Xfmr_FloatTensor:$logits,
                       Xfmr_IndexTensor:$experts, I64Attr:$top_k,
                       DefaultValuedAttr<StrAttr, "\"softmax\"">:$scoring);
  let results = (outs Xfmr_FloatTensor:$result);
}

def Xfmr_MoeDispatchOp : Xfmr_ForwardOp<"moe_dispatch"> {
  let summary = "copies each token to the buffers of its experts";
  let description = [{
    `result[b, experts[b, s, j], slots[b, s, j], :] = input[b, s, :]` for
    every choice j that was not dropped (slot >= 0); every other row of the
    [B, E, C, H] result is zero. E and C come from the result type.

    Example:
    ```mlir
    %xe = xfmr.moe_dispatch %x, %e, %s
        : (tensor<4x32x64xf32>, tensor<4x32x2xi32>, tensor<4x32x2xi32>) -> tensor<4x8x16x64xf32>
    ```

    Constraints:
    - `input` is [B, S, H]; `experts` and `slots` are [B, S, k] of i32;
    - the result is [B, E, C, H] of the input's element type, C <= S.
  }];
  let arguments = (ins Xfmr_FloatTensor:$input, Xfmr_IndexTensor:$experts,
                       Xfmr_IndexTensor:$slots);
  let results = (outs Xfmr_FloatTensor:$result);
}

def Xfmr_MoeDispatchGradOp : Xfmr_BackwardOp<"moe_dispatch_grad"> {
  let summary = "backward of moe_dispatch: each token's rows summed back";
  let description = [{
    `result[b, s, :] = sum over the kept choices j of
    grad[b, experts[b, s, j], slots[b, s, j], :]`.

    Example:
    ```mlir
    %dx = xfmr.moe_dispatch_grad %dxe, %e, %s
        : (tensor<4x8x16x64xf32>, tensor<4x32x2xi32>, tensor<4x32x2xi32>) -> tensor<4x32x64xf32>
    ```

    Constraints:
    - `grad` is [B, E, C, H]; `experts` and `slots` are [B, S, k] of i32;
    - the result is [B, S, H] of the grad's element type.
  }];
  let arguments = (ins Xfmr_FloatTensor:$grad, Xfmr_IndexTensor:$experts,
                       Xfmr_IndexTensor:$slots);
  let results = (outs Xfmr_FloatTensor:$result);
}

def Xfmr_MoeCombineOp : Xfmr_ForwardOp<"moe_combine"> {
  let summary = "the gate-weighted sum of each token's expert outputs";
  let description = [{
    `result[b, s, :] = sum over the kept choices j of gates[b, s, j] *
    expert_output[b, experts[b, s, j], slots[b, s, j], :]`; a token whose
    choices were all dropped gets zero (the residual connection carries it).

    Example:
    ```mlir
    %y = xfmr.moe_combine %ye, %g, %e, %s
        : (tensor<4x8x16x64xf32>, tensor<4x32x2xf32>, tensor<4x32x2xi32>,
           tensor<4x32x2xi32>) -> tensor<4x32x64xf32>
    ```

    Constraints:
    - `expert_output` is [B, E, C, H]; `gates` is [B, S, k] of its
      element type;
      `experts` and `slots` are [B, S, k] of i32;
    - the result is [B, S, H] of the expert output's element type.
  }];
  let arguments = (ins Xfmr_FloatTensor:$expert_output,
                       Xfmr_FloatTensor:$gates, Xfmr_IndexTensor:$experts,
                       Xfmr_IndexTensor:$slots);
  let results = (outs Xfmr_FloatTensor:$result);
}

def Xfmr_MoeCombineGradOp : Xfmr_BackwardOp<"moe_combine_grad"> {
  let summary = "backward of moe_combine: expert-output and gate gradients";
  let description = [{
    `expert_output_grad[b, e, c, :] = gates[b, s, j] * grad[b, s, :]` for
    the choice j of token s that sits in row c of expert e (zero for empty
    rows); `gates_grad[b, s, j] = <grad[b, s, :], expert_output[b,
    experts[b, s, j], slots[b, s, j], :]>`, zero for a dropped choice.

    Example:
    ```mlir
    %dye, %dg = xfmr.moe_combine_grad %dy, %ye, %g, %e, %s
        : (tensor<4x32x64xf32>, tensor<4x8x16x64xf32>, tensor<4x32x2xf32>,
           tensor<4x32x2xi32>, tensor<4x32x2xi32>)
        -> (tensor<4x8x16x64xf32>, tensor<4x32x2xf32>)
    ```

    Constraints:
    - `grad` is [B, S, H]; `expert_output` [B, E, C, H] and `gates`
      [B, S, k] of its element type; `experts`, `slots` [B, S, k] of i32;
    - `expert_output_grad` has the expert output's type, `gates_grad` the
      gates'.
  }];
  let arguments = (ins Xfmr_FloatTensor:$grad,
                       Xfmr_FloatTensor:$expert_output,
                       Xfmr_FloatTensor:$gates, Xfmr_IndexTensor:$experts,
                       Xfmr_IndexTensor:$slots);
  let results = (outs Xfmr_FloatTensor:$expert_output_grad,
                      Xfmr_FloatTensor:$gates_grad);
}

def Xfmr_ExpertLinearOp
    : Xfmr_ForwardOp<"expert_linear", [Xfmr_Matmul]> {
  let summary = "each expert's linear map over its own rows (grouped GEMM)";
  let description = [{
    `result[b, e, c, n] = sum_k input[b, e, c, k] * weight[e, n, k]` for
    the filled rows c < counts[b, e]; the rows past the count are zero.
    One GEMM per group and expert, of the filled rows only: a dropless
    buffer (C = S) costs the routed tokens, not its capacity.
    `routed_rows` (S x k, the choices of a group) bounds the rows a group
    fills in all, for the FLOP count: B x min(E x C, routed_rows) rows are
    multiplied (every row when absent).

    Example:
    ```mlir
    %h = xfmr.expert_linear %xe, %w1, %n
        : (tensor<4x8x16x64xf32>, tensor<8x128x64xf32>, tensor<4x8xi32>) -> tensor<4x8x16x128xf32>
    ```

    Constraints:
    - `input` is [B, E, C, K], `weight` [E, N, K] of its element type and
      `counts` [B, E] of i32;
    - the result is [B, E, C, N] of the input's element type.
  }];
  let arguments = (ins Xfmr_FloatTensor:$input, Xfmr_FloatTensor:$weight,
                       Xfmr_IndexTensor:$counts,
                       OptionalAttr<I64Attr>:$routed_rows);
  let results = (outs Xfmr_FloatTensor:$result);
}

def Xfmr_ExpertLinearGradInputOp
    : Xfmr_BackwardOp<"expert_linear_grad_input", [Xfmr_Matmul]> {
  let summary = "input gradient of expert_linear: dY W per expert";
  let description = [{
    `result[b, e, c, k] = sum_n grad[b, e, c, n] * weight[e, n, k]` for
    c < counts[b, e], zero past it.

    Example:
    ```mlir
    %dxe = xfmr.expert_linear_grad_input %dh, %w1, %n
        : (tensor<4x8x16x128xf32>, tensor<8x128x64xf32>, tensor<4x8xi32>) -> tensor<4x8x16x64xf32>
    ```

    Constraints:
    - `grad` is [B, E, C, N], `weight` [E, N, K], `counts` [B, E] of i32;
    - the result is [B, E, C, K] of the grad's element type.
  }];
  let arguments = (ins Xfmr_FloatTensor:$grad, Xfmr_FloatTensor:$weight,
                       Xfmr_IndexTensor:$counts,
                       OptionalAttr<I64Attr>:$routed_rows);
  let results = (outs Xfmr_FloatTensor:$result);
}

def Xfmr_ExpertLinearGradWeightOp
    : Xfmr_BackwardOp<"expert_linear_grad_weight", [Xfmr_Matmul]> {
  let summary = "weight gradient of expert_linear: dY^T X per expert";
  let description = [{
    `result[e, n, k] = sum over b and c < counts[b, e] of grad[b, e, c, n] *
    input[b, e, c, k]`; an expert no token reached gets zero.

    Example:
    ```mlir
    %dw = xfmr.expert_linear_grad_weight %dh, %xe, %n
        : (tensor<4x8x16x128xf32>, tensor<4x8x16x64xf32>, tensor<4x8xi32>) -> tensor<8x128x64xf32>
    ```

    Constraints:
    - `grad` is [B, E, C, N], `input` [B, E, C, K], `counts` [B, E] of i32;
    - the result is [E, N, K] of the grad's element type.
  }];
  let arguments = (ins Xfmr_FloatTensor:$grad, Xfmr_FloatTensor:$input,
                       Xfmr_IndexTensor:$counts,
                       OptionalAttr<I64Attr>:$routed_rows);
  let results = (outs Xfmr_FloatTensor:$result);
}

def Xfmr_MoeAuxLossOp : Xfmr_ForwardOp<"moe_aux_loss"> {
  let summary = "load-balancing loss of one MoE layer (Switch / GShard), "
                "with the router z-loss";
  let description = [{
    Per sequence b (the token group), `E * sum_i f[b, i] * P[b, i]`: f is
    the fraction of the group's top-k choices that picked expert i (before
    capacity; `experts`), P the mean over the group's tokens of the
    normalised router scores (softmax of `logits`; with "sigmoid" scoring
    the sigmoid scores divided by their sum). The result is `aux_coef`
    times its mean over the batch, plus `z_coef` times the mean over all
    tokens of logsumexp(logits)^2 (ST-MoE's router z-loss). f is not
    differentiated.

    Example:
    ```mlir
    %aux = xfmr.moe_aux_loss %logits, %e {aux_coef = 1.0e-02 : f32, z_coef = 0.0 : f32}
        : (tensor<4x32x8xf32>, tensor<4x32x2xi32>) -> tensor<f32>
    ```

    Constraints:
    - `logits` is [B, S, E] of a float type and `experts` [B, S, k] of
      i32;
    - the result is a scalar f32; `aux_coef` and `z_coef` are finite and
      not negative;
    - `scoring` as in `xfmr.moe_route`.
  }];
  let arguments = (ins Xfmr_FloatTensor:$logits, Xfmr_IndexTensor:$experts,
                       F32Attr:$aux_coef, F32Attr:$z_coef,
                       DefaultValuedAttr<StrAttr, "\"softmax\"">:$scoring);
  let results = (outs Xfmr_ScalarF32:$result);
}

def Xfmr_MoeAuxLossGradOp : Xfmr_BackwardOp<"moe_aux_loss_grad"> {
  let summary = "backward of moe_aux_loss: the logits' gradient";
  let description = [{
    Example:
    ```mlir
    %dl = xfmr.moe_aux_loss_grad %daux, %logits, %e {aux_coef = 1.0e-02 : f32, z_coef = 0.0 : f32}
        : (tensor<f32>, tensor<4x32x8xf32>, tensor<4x32x2xi32>) -> tensor<4x32x8xf32>
    ```

    Constraints:
    - `loss_grad` is a scalar f32; `logits` and `experts` as in
      `xfmr.moe_aux_loss`; the result has the logits' type.
  }];
  let arguments = (ins Xfmr_ScalarF32:$loss_grad, Xfmr_FloatTensor:$logits,
                       Xfmr_IndexTensor:$experts,
                       F32Attr:$aux_coef, F32Attr:$z_coef,
                       DefaultValuedAttr<StrAttr, "\"softmax\"">:$scoring);
  let results = (outs Xfmr_FloatTensor:$result);
}

// DeepSeek-V3's auxiliary-loss-free balancing (docs/moe.md): the step sums
// each expert's routed tokens over its micro-batches (moe_expert_load, whose
// batch sum the partitioner completes over the data and expert ranks like any
// reduction) and moves the routing bias against the load error once
// (moe_bias_update). Neither is differentiated: the bias is state, not a
// trained parameter.

def Xfmr_MoeExpertLoadOp : Xfmr_Op<"moe_expert_load"> {
  let summary = "tokens routed to each expert, summed over the batch";
  let description = [{
    `result[e] = sum over b of counts[b, e]`, as f32: the load of each
    expert over the token groups of `counts` (the per-group counts of
    `xfmr.moe_route`). A sum over the batch, so a batch split over ranks
    leaves partial loads that the partitioner sums over those ranks; the
    counts are integers, so the sum is exact in f32 (below 2^24 tokens) and
    every split gives the same load.

    Example:
    ```mlir
    %load = xfmr.moe_expert_load %counts : (tensor<4x8xi32>) -> tensor<8xf32>
    ```

    Constraints:
    - `counts` is [B, E] of i32; the result is [E] of f32.
  }];
  let arguments = (ins Xfmr_IndexTensor:$counts);
  let results = (outs 1DTensorOf<[F32]>:$result);
}

def Xfmr_MoeBiasUpdateOp : Xfmr_Op<"moe_bias_update"> {
  let summary = "one step of DeepSeek-V3's routing-bias update";
  let description = [{
    `result[i] = bias[i] + rate * sign(mean(load) - load[i])`: an expert
    that took fewer tokens than the mean gets a larger bias (it is chosen
    more often by `xfmr.moe_route`), one that took more a smaller one, one
    at the mean keeps its bias (sign(0) = 0). `load` is the tokens routed to
    each expert over the whole step (`xfmr.moe_expert_load`, summed over
    micro-batches); `rate` is DeepSeek-V3's bias update speed (gamma). The
    mean couples the experts, so the experts' dimension is not split.

    Example:
    ```mlir
    %new = xfmr.moe_bias_update %bias, %load {rate = 1.0e-03 : f32}
        : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
    ```

    Constraints:
    - `bias`, `load` and the result are [E] of f32;
    - `rate` is finite and not negative.
  }];
  let arguments = (ins 1DTensorOf<[F32]>:$bias, 1DTensorOf<[F32]>:$load,
                       F32Attr:$rate);
  let results = (outs 1DTensorOf<[F32]>:$result);
}

#endif // PARTITION_XFMR_MOE_OPS
