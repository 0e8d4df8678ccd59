// Errors of --dist-propagate beyond those the --dist-data-parallel and
// --dist-shard verification tests exercise through it
// (data_parallel_verification.mlir: ops without a rule, slices, split
// results; shard_verification.mlir: the tensor-parallel policy).
// RUN: partition-opt %s -split-input-file -verify-diagnostics --dist-seed-layouts --dist-propagate

// The evaluation step reuses the training step's placements: annotating a
// parameter differently there is an error.

#plan = #dist.plan<mesh = @mesh, axes = [dp = data, pp = pipeline, tp = tensor], sequence_parallel = false, schedule = "1f1b", microbatches = 1, zero_stage = 0, recompute = none, precision = "fp32">
module attributes {dist.plan = #plan} {
  dist.mesh @mesh axes = [dp = 1, pp = 1, tp = 2]
  func.func @train_step(%w: tensor<8x8xf32> {dist.sharding = #dist.sharding<@mesh, [[tp], []]>, xfmr.param = "w"}) -> (tensor<8x8xf32> {xfmr.param = "w"}) attributes {xfmr.train_step = {}} {
    return %w : tensor<8x8xf32>
  }
  // expected-error @+1 {{argument #0 ('w') is annotated unlike in the training step}}
  func.func @eval_step(%w: tensor<8x8xf32> {dist.sharding = #dist.sharding<@mesh, [[], [tp]]>, xfmr.param = "w"}) attributes {xfmr.eval_step = {}} {
    return
  }
}

// -----

// A column-parallel weight whose output features the tensor axis does not
// divide names the sizes (no padding outside the vocabulary).

#plan = #dist.plan<mesh = @mesh, axes = [dp = data, pp = pipeline, tp = tensor], sequence_parallel = false, schedule = "1f1b", microbatches = 1, zero_stage = 0, recompute = none, precision = "fp32">
module attributes {dist.plan = #plan} {
  dist.mesh @mesh axes = [dp = 1, pp = 1, tp = 4]
  func.func @eval_step(%w: tensor<6x8xf32> {xfmr.param = "fc.weight"}, %x: tensor<2x4x8xf32>) -> tensor<2x4x6xf32> attributes {xfmr.eval_step = {}} {
    // expected-error @+1 {{'xfmr.linear' op cannot split dimension 0 (6) of 'fc.weight' over tp = 4 for tensor parallelism; choose a tensor-parallel degree that divides 6}}
    %y = xfmr.linear %x, %w : (tensor<2x4x8xf32>, tensor<6x8xf32>) -> tensor<2x4x6xf32>
    return %y : tensor<2x4x6xf32>
  }
}
