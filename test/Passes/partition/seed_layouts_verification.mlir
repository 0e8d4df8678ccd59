// Every error of --dist-seed-layouts.
// RUN: partition-opt %s -split-input-file -verify-diagnostics --dist-seed-layouts

// expected-error @+1 {{partitioning needs the plan (run --dist-apply-plan first)}}
module {
  func.func @eval_step(%tokens: tensor<4x8xi32> {xfmr.input = "tokens"}) attributes {xfmr.eval_step = {}} {
    return
  }
}

// -----

#plan = #dist.plan<mesh = @mesh, axes = [dp = data, pp = pipeline, tp = tensor], sequence_parallel = false, schedule = "1f1b", microbatches = 1, zero_stage = 0, recompute = none, precision = "fp32">
// expected-error @+1 {{no training step to partition (run --xfmr-train-step first)}}
module attributes {dist.plan = #plan} {
  dist.mesh @mesh axes = [dp = 2, pp = 1, tp = 1]
}

// -----

#plan = #dist.plan<mesh = @mesh, axes = [dp = data, pp = pipeline, tp = tensor], sequence_parallel = false, schedule = "1f1b", microbatches = 1, zero_stage = 0, recompute = none, precision = "fp32">
module attributes {dist.plan = #plan} {
  dist.mesh @mesh axes = [dp = 2, pp = 1, tp = 1]
  dist.mesh @other axes = [dp = 2]
  // expected-error @+1 {{argument #0 is annotated on @other; the plan's mesh is @mesh}}
  func.func @eval_step(%tokens: tensor<4x8xi32> {dist.sharding = #dist.sharding<@other, [[dp], []]>, xfmr.input = "tokens"}) attributes {xfmr.eval_step = {}} {
    return
  }
}

// -----

#plan = #dist.plan<mesh = @mesh, axes = [dp = data, pp = pipeline, tp = tensor], sequence_parallel = false, schedule = "1f1b", microbatches = 1, zero_stage = 0, recompute = none, precision = "fp32">
module attributes {dist.plan = #plan} {
  dist.mesh @mesh axes = [dp = 2, pp = 1, tp = 2]
  // expected-error @+1 {{argument #0 is annotated as a partial sum; an input must be whole or split}}
  func.func @eval_step(%w: tensor<4x8xf32> {dist.sharding = #dist.sharding<@mesh, [[], []], partial = [tp]>, xfmr.param = "w"}) attributes {xfmr.eval_step = {}} {
    return
  }
}

// -----

#plan = #dist.plan<mesh = @mesh, axes = [dp = data, pp = pipeline, tp = tensor], sequence_parallel = false, schedule = "1f1b", microbatches = 1, zero_stage = 0, recompute = none, precision = "fp32">
module attributes {dist.plan = #plan} {
  dist.mesh @mesh axes = [dp = 4, pp = 1, tp = 1]
  // expected-error @+1 {{the targets batch has 6 elements in dimension 0, which do not split evenly over [dp] (4 blocks)}}
  func.func @eval_step(%targets: tensor<6x8xi32> {xfmr.input = "targets"}) attributes {xfmr.eval_step = {}} {
    return
  }
}

// -----

// A part's tensor-parallel degree must be the size of a major prefix of the
// tensor axes (--dist-apply-plan lays them out so): 2 x 2 has no prefix of
// size 3.
#plan = #dist.plan<mesh = @mesh, axes = [dp = data, pp = pipeline, tp = tensor, tp_sub = tensor], sequence_parallel = false, schedule = "1f1b", microbatches = 1, zero_stage = 0, recompute = none, precision = "fp32", layer_tp = [4, 3], embedding_tp = 4>
// expected-error @+1 {{the plan gives a part of the model the tensor-parallel degree 3, which is not the size of a major prefix of the tensor axes [tp, tp_sub]; apply the plan with --dist-apply-plan, which lays the axes out for the degrees}}
module attributes {dist.plan = #plan} {
  dist.mesh @mesh axes = [dp = 1, pp = 1, tp = 2, tp_sub = 2]
}
