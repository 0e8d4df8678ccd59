// Attention heads --dist-shard cannot split: key-value heads are split like
// the query heads, or replicated when tp is a multiple of them, and then
// only as one head per block (--dist-apply-plan lays such a tp out as two
// axes, tp and tp_kv_rep: shard_kv_replicas.test). On a plain tp axis, or
// with a tp that is neither a divisor nor a multiple of the key-value
// heads, the attention names both numbers.
// RUN: partition-opt %s -split-input-file -verify-diagnostics --dist-shard

module attributes {dist.plan = #dist.plan<mesh = @mesh, axes = [dp = data, pp = pipeline, tp = tensor], sequence_parallel = false, schedule = "1f1b", microbatches = 1, zero_stage = 0, recompute = none, precision = "fp32">} {
  dist.mesh @mesh axes = [dp = 1, pp = 1, tp = 4]
  func.func @eval_step(%wq: tensor<16x8xf32> {xfmr.param = "q.weight"},
                       %wk: tensor<8x8xf32> {xfmr.param = "k.weight"},
                       %wo: tensor<8x16xf32> {xfmr.param = "o.weight"},
                       %x: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> attributes {xfmr.eval_step = {}} {
    %q = xfmr.linear %x, %wq : (tensor<2x4x8xf32>, tensor<16x8xf32>) -> tensor<2x4x16xf32>
    %k = xfmr.linear %x, %wk : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
    // expected-error @+1 {{'xfmr.attention' op has 2 key-value heads in 1 blocks for 4 blocks of query heads; replicated key-value heads need one head per block: choose a tp that divides the key-value heads or is a multiple of them}}
    %y = xfmr.attention %q, %k, %k {num_heads = 4 : i64, num_kv_heads = 2 : i64} : (tensor<2x4x16xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x16xf32>
    %o = xfmr.linear %y, %wo : (tensor<2x4x16xf32>, tensor<8x16xf32>) -> tensor<2x4x8xf32>
    return %o : tensor<2x4x8xf32>
  }
}

// -----

module attributes {dist.plan = #dist.plan<mesh = @mesh, axes = [dp = data, pp = pipeline, tp = tensor], sequence_parallel = false, schedule = "1f1b", microbatches = 1, zero_stage = 0, recompute = none, precision = "fp32">} {
  dist.mesh @mesh axes = [dp = 1, pp = 1, tp = 3]
  func.func @eval_step(%wq: tensor<12x8xf32> {xfmr.param = "q.weight"},
                       %wo: tensor<8x12xf32> {xfmr.param = "o.weight"},
                       %k: tensor<2x4x4xf32>) -> tensor<2x4x8xf32> attributes {xfmr.eval_step = {}} {
    %x = arith.constant dense<1.0> : tensor<2x4x8xf32>
    %q = xfmr.linear %x, %wq : (tensor<2x4x8xf32>, tensor<12x8xf32>) -> tensor<2x4x12xf32>
    // expected-error @+1 {{'xfmr.attention' op has 2 key-value heads in 1 blocks for 3 blocks of query heads; replicated key-value heads need one head per block: choose a tp that divides the key-value heads or is a multiple of them}}
    %y = xfmr.attention %q, %k, %k {num_heads = 6 : i64, num_kv_heads = 2 : i64} : (tensor<2x4x12xf32>, tensor<2x4x4xf32>, tensor<2x4x4xf32>) -> tensor<2x4x12xf32>
    %o = xfmr.linear %y, %wo : (tensor<2x4x12xf32>, tensor<8x12xf32>) -> tensor<2x4x8xf32>
    return %o : tensor<2x4x8xf32>
  }
}
