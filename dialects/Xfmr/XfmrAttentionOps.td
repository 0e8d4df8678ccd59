//===- XfmrAttentionOps.td - attention and ring attention --*- tablegen -*-===//
//
// The attention ops of the xfmr dialect: scaled dot-product attention and
// its gradient, and the ring attention block ops of context parallelism.
// Included by XfmrOps.td, whose op classes and type constraints they use.
//
//===----------------------------------------------------------------------===//

#ifndef PARTITION_XFMR_ATTENTION_OPS
#define PARTITION_XFMR_ATTENTION_OPS

//===----------------------------------------------------------------------===//
// Attention
//===----------------------------------------------------------------------===//

def Xfmr_AttentionOp
    : Xfmr_ForwardOp<"attention", [Xfmr_Matmul, AttrSizedOperandSegments],
                     Xfmr_PartitionsLocally> {
  let summary = "multi-head scaled dot-product attention (causal, GQA, RoPE, "
                "sliding window)";
  let description = [{
    Heads are packed in the feature dimension: `query` is [B, T, H*D], `key`
    and `value` are [B, T, Hkv*D]. Query head h reads key/value head
    h / (H / Hkv) (grouped-query attention; Hkv = H is multi-head attention).
    With `rope_theta`, rotary position embedding is applied to the query and
    the key first, pairing feature i with i + D/2 within each head, at
    frequency theta^(-2i/D). Scores are scaled by 1/sqrt(D) and, when
    `causal`, position t sees positions s <= t only.

    `rope_scaling` rescales the rotary frequencies as transformers'
    rope_type of that name, with `rope_scaling_factors`:
    - `"linear"`, `[factor]`: every frequency divided by the factor;
    - `"llama3"`, `[factor, low_freq_factor, high_freq_factor,
      original_context]` (Llama 3.1 / 3.2): a frequency whose wavelength
      2 pi / f exceeds original_context / low_freq_factor is divided by the
      factor, one below original_context / high_freq_factor is kept, and
      between them f ((1 - s) / factor + s) with
      s = (original_context / wavelength - low_freq_factor) /
      (high_freq_factor - low_freq_factor);
    - `"yarn"`, `[factor, beta_fast, beta_slow, original_context]`: pair i
      keeps its frequency below a ramp and is divided by the factor above
      it, f ((1 - r) + r / factor) with r = clamp((i - low) / (high - low),
      0, 1), low = floor(c(beta_fast)), high = ceil(c(beta_slow)) (clamped
      to [0, D - 1]) and c(b) = D ln(original_context / (2 pi b)) /
      (2 ln theta); cos and sin are multiplied by 0.1 ln(factor) + 1 (for
      a factor above 1), so the scores by its square (transformers'
      _compute_yarn_parameters, truncate = true, attention_factor
      derived from the factor).

    `sliding_window` W (Mistral) narrows the causal mask to the last W
    positions: position t sees positions s with t - W < s <= t, itself
    included (transformers' sliding_window convention). A window of at
    least the sequence length masks nothing more than causality.

    With `query_positions` and `key_positions` (both or neither; [Tq] and
    [Tk] i32 vectors) the positions are explicit instead of the indices: a
    permuted sequence (context parallelism's zigzag layout,
    `xfmr.sequence_positions`) or local queries against all-gathered keys,
    so Tq may differ from Tk. Query t sees key s iff not `causal` or
    kp[s] <= qp[t] (with `sliding_window` W also kp[s] > qp[t] - W), and
    RoPE rotates query t at angle qp[t] * freq and key s at kp[s] * freq.
    A query that sees no key gets zeros.

    Example:
    ```mlir
    %o = xfmr.attention %q, %k, %v {num_heads = 4 : i64, num_kv_heads = 2 : i64,
                                    rope_theta = 1.0e+04 : f32}
        : (tensor<4x64x64xf32>, tensor<4x64x32xf32>, tensor<4x64x32xf32>) -> tensor<4x64x64xf32>
    %s = xfmr.attention %q, %k, %v {num_heads = 4 : i64, num_kv_heads = 2 : i64,
                                    rope_theta = 5.0e+05 : f32, rope_scaling = "llama3",
                                    rope_scaling_factors = array<f64: 32.0, 1.0, 4.0, 8192.0>}
        : (tensor<4x64x64xf32>, tensor<4x64x32xf32>, tensor<4x64x32xf32>) -> tensor<4x64x64xf32>
    %w = xfmr.attention %q, %k, %v {num_heads = 4 : i64, num_kv_heads = 2 : i64,
                                    rope_theta = 1.0e+04 : f32, sliding_window = 16 : i64}
        : (tensor<4x64x64xf32>, tensor<4x64x32xf32>, tensor<4x64x32xf32>) -> tensor<4x64x64xf32>
    %l = xfmr.attention %q, %k, %v positions %qp, %kp {num_heads = 4 : i64, num_kv_heads = 2 : i64}
        : (tensor<4x16x64xf32>, tensor<4x64x32xf32>, tensor<4x64x32xf32>,
           tensor<16xi32>, tensor<64xi32>) -> tensor<4x16x64xf32>
    ```

    Constraints:
    - `num_heads` and `num_kv_heads` are positive and `num_kv_heads` divides
      `num_heads`;
    - `query` and the result are [B, T, H*D] of one type;
    - `key` and `value` are [B, T, Hkv*D] of that element type (with
      positions, [B, Tk, Hkv*D]);
    - `query_positions` and `key_positions` come together, [Tq] and [Tk];
    - with `rope_theta`, it is positive and D is even;
    - `rope_scaling` and `rope_scaling_factors` come together and with
      `rope_theta`; the scaling is `linear` (one factor), `llama3` or
      `yarn` (four); the factor is positive and, for `llama3`, 0 <
      low_freq_factor < high_freq_factor and original_context is a positive
      integer; for `yarn`, the factor is at least 1, 0 < beta_slow <
      beta_fast, original_context is a positive integer and rope_theta
      exceeds 1.
    - `sliding_window` is positive and only on a `causal` attention.
  }];
  let arguments = (ins Xfmr_FloatTensor:$query, Xfmr_FloatTensor:$key,
                       Xfmr_FloatTensor:$value,
                       Optional<Xfmr_PositionsTensor>:$query_positions,
                       Optional<Xfmr_PositionsTensor>:$key_positions,
                       I64Attr:$num_heads, I64Attr:$num_kv_heads,
                       DefaultValuedAttr<BoolAttr, "true">:$causal,
                       OptionalAttr<F32Attr>:$rope_theta,
                       OptionalAttr<StrAttr>:$rope_scaling,
                       OptionalAttr<DenseF64ArrayAttr>:$rope_scaling_factors,
                       OptionalAttr<I64Attr>:$sliding_window);
  let results = (outs Xfmr_FloatTensor:$result);
  let assemblyFormat = [{
    $query `,` $key `,` $value
    (`positions` $query_positions^ `,` $key_positions)? attr-dict `:`
    functional-type(operands, results)
  }];
  let extraClassDeclaration = [{
    /// Head dimension D.
    int64_t getHeadDim();
  }];
}

def Xfmr_AttentionGradOp
    : Xfmr_BackwardOp<"attention_grad", [Xfmr_Matmul, AttrSizedOperandSegments],
                      Xfmr_PartitionsLocally> {
  let summary = "backward of attention: query, key and value gradients";
  let description = [{
    Recomputes the attention probabilities from `query` and `key` and returns
    the gradients of the three inputs as the forward op received them: with
    `rope_theta` (and `rope_scaling`), the query and key gradients are with
    respect to the query and key before rotation. With `sliding_window`, the
    probabilities are the forward's windowed ones: a key outside a query's
    window gets no gradient from it.

    Example:
    ```mlir
    %dq, %dk, %dv = xfmr.attention_grad %do, %q, %k, %v {num_heads = 4 : i64, num_kv_heads = 4 : i64}
        : (tensor<4x64x64xf32>, tensor<4x64x64xf32>, tensor<4x64x64xf32>, tensor<4x64x64xf32>)
        -> (tensor<4x64x64xf32>, tensor<4x64x64xf32>, tensor<4x64x64xf32>)
    %wq, %wk, %wv = xfmr.attention_grad %do, %q, %k, %v {num_heads = 4 : i64, num_kv_heads = 4 : i64,
                                                       sliding_window = 16 : i64}
        : (tensor<4x64x64xf32>, tensor<4x64x64xf32>, tensor<4x64x64xf32>, tensor<4x64x64xf32>)
        -> (tensor<4x64x64xf32>, tensor<4x64x64xf32>, tensor<4x64x64xf32>)
    ```

    With the forward's `query_positions` and `key_positions`, the
    probabilities are those of the positioned forward:
    ```mlir
    %pq, %pk, %pv = xfmr.attention_grad %do, %q, %k, %v positions %qp, %kp
        {num_heads = 4 : i64, num_kv_heads = 4 : i64}
        : (tensor<4x16x64xf32>, tensor<4x16x64xf32>, tensor<4x64x64xf32>, tensor<4x64x64xf32>,
           tensor<16xi32>, tensor<64xi32>)
        -> (tensor<4x16x64xf32>, tensor<4x64x64xf32>, tensor<4x64x64xf32>)
    ```

    Constraints: those of `xfmr.attention`, with `grad` and `query_grad`
    typed like the query and `key_grad`, `value_grad` like the key.
  }];
  let arguments = (ins Xfmr_FloatTensor:$grad, Xfmr_FloatTensor:$query,
                       Xfmr_FloatTensor:$key, Xfmr_FloatTensor:$value,
                       Optional<Xfmr_PositionsTensor>:$query_positions,
                       Optional<Xfmr_PositionsTensor>:$key_positions,
                       I64Attr:$num_heads, I64Attr:$num_kv_heads,
                       DefaultValuedAttr<BoolAttr, "true">:$causal,
                       OptionalAttr<F32Attr>:$rope_theta,
                       OptionalAttr<StrAttr>:$rope_scaling,
                       OptionalAttr<DenseF64ArrayAttr>:$rope_scaling_factors,
                       OptionalAttr<I64Attr>:$sliding_window);
  let results = (outs Xfmr_FloatTensor:$query_grad,
                      Xfmr_FloatTensor:$key_grad,
                      Xfmr_FloatTensor:$value_grad);
  let assemblyFormat = [{
    $grad `,` $query `,` $key `,` $value
    (`positions` $query_positions^ `,` $key_positions)? attr-dict `:`
    functional-type(operands, results)
  }];
}

//===----------------------------------------------------------------------===//
// Ring attention (context parallelism)
//===----------------------------------------------------------------------===//
//
// With the sequence split over cp ranks, ring attention keeps each rank's
// queries and passes the key/value blocks around the ring: each block's
// partial attention is merged into the running one by its log-sum-exp
// (flash attention's online softmax), and the backward runs per block from
// the final output and log-sum-exp. The partitioner emits these ops after
// autodiff (like the vocab_parallel_* ops), so they have no backward. With
// the zigzag layout a rank's positions are not contiguous: every op takes
// the original position of each query and key explicitly.

def Xfmr_Positions : 1DTensorOf<[I32]>;

def Xfmr_AttentionBlockOp
    : Xfmr_Op<"attention_block", [Xfmr_Matmul], Xfmr_PartitionsLocally> {
  let summary = "attention of the queries over one block of keys, with its "
                "log-sum-exp";
  let description = [{
    Softmax attention of `query` [B, Tq, H*D] over the Tk keys and values of
    this block only (`key`, `value` [B, Tk, Hkv*D]), at the original
    positions `query_positions` [Tq] and `key_positions` [Tk]: query t sees
    key s iff not `causal` or key_positions[s] <= query_positions[t], and,
    with `sliding_window` W, also key_positions[s] > query_positions[t] - W.
    RoPE (with `rope_theta`, and `rope_scaling`) rotates query t by the angle
    query_positions[t] x frequency and key s by key_positions[s] x
    frequency. Heads, GQA, the score scale 1/sqrt(D) and the RoPE attributes
    are those of `xfmr.attention`.

    `lse` [B, H, Tq] (f32) is log sum_s exp(score[t, s]) over the visible
    keys, so that `xfmr.attention_merge` combines the partial attentions of
    disjoint key blocks exactly. A query that sees no key of this block gets
    a zero output and an lse of exactly -inf. With all the keys in one block
    at positions 0..T-1 the output is `xfmr.attention`'s.

    Example:
    ```mlir
    %o, %lse = xfmr.attention_block %q, %k, %v, %qpos, %kpos
        {num_heads = 4 : i64, num_kv_heads = 2 : i64, rope_theta = 1.0e+04 : f32}
        : (tensor<4x32x64xf32>, tensor<4x16x32xf32>, tensor<4x16x32xf32>,
           tensor<32xi32>, tensor<16xi32>) -> (tensor<4x32x64xf32>, tensor<4x4x32xf32>)
    ```

    Constraints: the attributes' of `xfmr.attention`; `query` and `out` are
    [B, Tq, H*D] of one type; `key` and `value` are [B, Tk, Hkv*D] of its
    element type; `query_positions` is [Tq] and `key_positions` [Tk] of i32;
    `lse` is [B, H, Tq] of f32.
  }];
  let arguments = (ins Xfmr_FloatTensor:$query, Xfmr_FloatTensor:$key,
                       Xfmr_FloatTensor:$value,
                       Xfmr_Positions:$query_positions,
                       Xfmr_Positions:$key_positions,
                       I64Attr:$num_heads, I64Attr:$num_kv_heads,
                       DefaultValuedAttr<BoolAttr, "true">:$causal,
                       OptionalAttr<F32Attr>:$rope_theta,
                       OptionalAttr<StrAttr>:$rope_scaling,
                       OptionalAttr<DenseF64ArrayAttr>:$rope_scaling_factors,
                       OptionalAttr<I64Attr>:$sliding_window);
  let results = (outs Xfmr_FloatTensor:$out, Xfmr_FloatTensor:$lse);
}

def Xfmr_AttentionMergeOp : Xfmr_Op<"attention_merge"> {
  let summary = "combines two partial attentions over disjoint key sets";
  let description = [{
    With heads packed in the features (head h is features [h*D, (h+1)*D) of
    `out_a`, `out_b` [B, T, H*D]) and `lse_a`, `lse_b` [B, H, T]:
    `lse = logaddexp(lse_a, lse_b)` and
    `out[b, t, h*D + d] = out_a[...] exp(lse_a[b, h, t] - lse) +
    out_b[...] exp(lse_b[b, h, t] - lse)`: the attention over the union of
    the two key sets, exactly. Where both lse are -inf (no visible key in
    either), the output is 0 and the lse -inf.

    Example:
    ```mlir
    %o, %lse = xfmr.attention_merge %oa, %la, %ob, %lb
        : (tensor<4x32x64xf32>, tensor<4x4x32xf32>, tensor<4x32x64xf32>,
           tensor<4x4x32xf32>) -> (tensor<4x32x64xf32>, tensor<4x4x32xf32>)
    ```

    Constraints:
    - `out_a`, `out_b` and `out` have one type, [B, T, C];
    - `lse_a`, `lse_b` and `lse` are [B, H, T] of f32, with H dividing C.
  }];
  let arguments = (ins Xfmr_FloatTensor:$out_a, Xfmr_FloatTensor:$lse_a,
                       Xfmr_FloatTensor:$out_b, Xfmr_FloatTensor:$lse_b);
  let results = (outs Xfmr_FloatTensor:$out, Xfmr_FloatTensor:$lse);
}

def Xfmr_AttentionBlockGradOp
    : Xfmr_Op<"attention_block_grad", [Xfmr_Matmul], Xfmr_PartitionsLocally> {
  let summary = "flash-attention backward of one key block";
  let description = [{
    The gradients of one block of `xfmr.attention_block` given the FINAL
    `out` and `lse` of the whole attention (over every block): with
    p = exp(score - lse) for the visible keys (0 for the others) and
    D_t = sum_d grad[t, d] out[t, d] per head, dS = p (grad v^T - D),
    `query_grad` = scale dS k, `key_grad` = scale dS^T q and
    `value_grad` = p^T grad, the query and key gradients taken back through
    RoPE's rotation (so with respect to the un-rotated inputs, as
    `xfmr.attention_grad`) and the key and value gradients summed over the
    query heads of each GQA group. Summed over all blocks, `query_grad` is
    `xfmr.attention_grad`'s; the key and value gradients of each block are
    its rows of `xfmr.attention_grad`'s.

    Example:
    ```mlir
    %dq, %dk, %dv = xfmr.attention_block_grad %do, %q, %k, %v, %qpos, %kpos, %o, %lse
        {num_heads = 4 : i64, num_kv_heads = 2 : i64}
        : (tensor<4x32x64xf32>, tensor<4x32x64xf32>, tensor<4x16x32xf32>,
           tensor<4x16x32xf32>, tensor<32xi32>, tensor<16xi32>,
           tensor<4x32x64xf32>, tensor<4x4x32xf32>)
        -> (tensor<4x32x64xf32>, tensor<4x16x32xf32>, tensor<4x16x32xf32>)
    ```

    Constraints: those of `xfmr.attention_block`, with `grad`, `out` and
    `query_grad` typed like the query, `key_grad` and `value_grad` like the
    key, and `lse` [B, H, Tq] of f32.
  }];
  let arguments = (ins Xfmr_FloatTensor:$grad, Xfmr_FloatTensor:$query,
                       Xfmr_FloatTensor:$key, Xfmr_FloatTensor:$value,
                       Xfmr_Positions:$query_positions,
                       Xfmr_Positions:$key_positions,
                       Xfmr_FloatTensor:$out, Xfmr_FloatTensor:$lse,
                       I64Attr:$num_heads, I64Attr:$num_kv_heads,
                       DefaultValuedAttr<BoolAttr, "true">:$causal,
                       OptionalAttr<F32Attr>:$rope_theta,
                       OptionalAttr<StrAttr>:$rope_scaling,
                       OptionalAttr<DenseF64ArrayAttr>:$rope_scaling_factors,
                       OptionalAttr<I64Attr>:$sliding_window);
  let results = (outs Xfmr_FloatTensor:$query_grad,
                      Xfmr_FloatTensor:$key_grad,
                      Xfmr_FloatTensor:$value_grad);
}

#endif // PARTITION_XFMR_ATTENTION_OPS
