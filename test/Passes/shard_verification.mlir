// Every error of --dist-shard beyond those of --dist-data-parallel
// (data_parallel_verification.mlir): impossible tensor-parallel requests
// name the sizes.
// RUN: partition-opt %s -split-input-file -verify-diagnostics --dist-shard


module attributes {dist.plan = #dist.plan<mesh = @mesh, axes = [dp = data, pp = pipeline, tp = tensor], sequence_parallel = false, schedule = "1f1b", microbatches = 1, zero_stage = 0, recompute = none, precision = "fp32">} {
dist.mesh @mesh axes = [dp = 1, pp = 1, tp = 3]
func.func @eval_step(%wte: tensor<16x8xf32> {xfmr.param = "wte"},
                     %tokens: tensor<2x4xi32> {xfmr.input = "tokens"}) -> tensor<2x4x8xf32> attributes {xfmr.eval_step = {}} {
  // expected-error @+1 {{'xfmr.embedding' op cannot split dimension 0 (16) of 'wte' over tp = 3 for tensor parallelism; choose a tensor-parallel degree that divides 16}}
  %x = xfmr.embedding %tokens, %wte : (tensor<2x4xi32>, tensor<16x8xf32>) -> tensor<2x4x8xf32>
  return %x : tensor<2x4x8xf32>
}
}

// -----

module attributes {dist.plan = #dist.plan<mesh = @mesh, axes = [dp = data, pp = pipeline, tp = tensor], sequence_parallel = false, schedule = "1f1b", microbatches = 1, zero_stage = 0, recompute = none, precision = "fp32">} {
dist.mesh @mesh axes = [dp = 1, pp = 1, tp = 3]
func.func @eval_step(%w: tensor<16x8xf32> {xfmr.param = "fc.weight"},
                     %x: tensor<2x4x8xf32>) -> tensor<2x4x16xf32> attributes {xfmr.eval_step = {}} {
  // expected-error @+1 {{'xfmr.linear' op cannot split dimension 0 (16) of 'fc.weight' over tp = 3 for tensor parallelism; choose a tensor-parallel degree that divides 16}}
  %y = xfmr.linear %x, %w : (tensor<2x4x8xf32>, tensor<16x8xf32>) -> tensor<2x4x16xf32>
  return %y : tensor<2x4x16xf32>
}
}

// -----

module attributes {dist.plan = #dist.plan<mesh = @mesh, axes = [dp = data, pp = pipeline, tp = tensor], sequence_parallel = false, schedule = "1f1b", microbatches = 1, zero_stage = 0, recompute = none, precision = "fp32">} {
dist.mesh @mesh axes = [dp = 1, pp = 1, tp = 2]
func.func @eval_step(%wq: tensor<8x8xf32> {xfmr.param = "q.weight"},
                     %wo: tensor<8x8xf32> {xfmr.param = "o.weight"},
                     %x: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> attributes {xfmr.eval_step = {}} {
  %q = xfmr.linear %x, %wq : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
  // expected-error @+1 {{'xfmr.attention' op has 1 query heads, which tp = 2 does not divide; choose a tp that divides the heads}}
  %y = xfmr.attention %q, %x, %x {num_heads = 1 : i64, num_kv_heads = 1 : i64} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %z = xfmr.linear %y, %wo : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
  return %z : tensor<2x4x8xf32>
}
}

// -----

module attributes {dist.plan = #dist.plan<mesh = @mesh, axes = [dp = data, pp = pipeline, tp = tensor], sequence_parallel = false, schedule = "1f1b", microbatches = 1, zero_stage = 0, recompute = none, precision = "fp32">} {
dist.mesh @mesh axes = [dp = 1, pp = 1, tp = 2]
func.func @eval_step(%w: tensor<8x8xf32> {xfmr.param = "fc.weight"},
                     %x: tensor<2x4x8xf32>) -> tensor<2x4x2xf32> attributes {xfmr.eval_step = {}} {
  %y = xfmr.linear %x, %w : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
  // expected-error @+1 {{'tensor.extract_slice' op slices dimension 2, which is split over [tp]; only the batch rows (split over the data axis dp) may be sliced}}
  %s = tensor.extract_slice %y[0, 0, 0] [2, 4, 2] [1, 1, 1] : tensor<2x4x8xf32> to tensor<2x4x2xf32>
  return %s : tensor<2x4x2xf32>
}
}
