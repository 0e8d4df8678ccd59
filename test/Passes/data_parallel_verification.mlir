// Every error of --dist-data-parallel (the partitioner's phases without
// tensor parallelism). A mesh without the axes the plan names is the plan's
// own error (test/Dialect/Dist/plan_attr_verification.mlir).
// RUN: partition-opt %s -split-input-file -verify-diagnostics --dist-data-parallel
// RUN: not partition-opt %s -split-input-file --dist-data-parallel="bucket-bytes=0" 2>&1 | FileCheck %s --check-prefix=BUCKET
// BUCKET: bucket-bytes must be positive, got 0

// expected-error @+1 {{partitioning needs the plan (run --dist-apply-plan first)}}
module {
  func.func @eval_step(%tokens: tensor<4x8xi32> {xfmr.input = "tokens"}) attributes {xfmr.eval_step = {}} {
    return
  }
}

// -----

// expected-error @+1 {{no training step to partition (run --xfmr-train-step first)}}
module attributes {dist.plan = #dist.plan<mesh = @mesh, axes = [dp = data, pp = pipeline, tp = tensor], sequence_parallel = false, schedule = "1f1b", microbatches = 1, zero_stage = 0, recompute = none, precision = "fp32">} {
  dist.mesh @mesh axes = [dp = 2, pp = 1, tp = 1]
}

// -----

module attributes {dist.plan = #dist.plan<mesh = @mesh, axes = [dp = data, pp = pipeline, tp = tensor], sequence_parallel = false, schedule = "1f1b", microbatches = 1, zero_stage = 0, recompute = none, precision = "fp32">} {
dist.mesh @mesh axes = [dp = 2, pp = 1, tp = 1]
// expected-error @+1 {{the tokens batch has 3 elements in dimension 0, which do not split evenly over [dp] (2 blocks)}}
func.func @eval_step(%tokens: tensor<3x8xi32> {xfmr.input = "tokens"}) attributes {xfmr.eval_step = {}} {
  return
}
}

// -----

module attributes {dist.plan = #dist.plan<mesh = @mesh, axes = [dp = data, pp = pipeline, tp = tensor], sequence_parallel = false, schedule = "1f1b", microbatches = 1, zero_stage = 0, recompute = none, precision = "fp32">} {
dist.mesh @mesh axes = [dp = 2, pp = 1, tp = 1]
func.func @eval_step(%tokens: tensor<6x8xi32> {xfmr.input = "tokens"}) -> tensor<3x8xi32> attributes {xfmr.eval_step = {}} {
  // expected-error @+1 {{'tensor.extract_slice' op takes rows [0, 3) of a batch split over dp = 2; each micro-batch must hold a multiple of 2 rows}}
  %t = tensor.extract_slice %tokens[0, 0] [3, 8] [1, 1] : tensor<6x8xi32> to tensor<3x8xi32>
  return %t : tensor<3x8xi32>
}
}

// -----

module attributes {dist.plan = #dist.plan<mesh = @mesh, axes = [dp = data, pp = pipeline, tp = tensor], sequence_parallel = false, schedule = "1f1b", microbatches = 1, zero_stage = 0, recompute = none, precision = "fp32">} {
dist.mesh @mesh axes = [dp = 2, pp = 1, tp = 1]
func.func @eval_step(%tokens: tensor<4x8xi32> {xfmr.input = "tokens"}) -> tensor<8xi32> attributes {xfmr.eval_step = {}} {
  // expected-error @+1 {{'tensor.extract_slice' op takes rows [0, 1) of a batch split over dp = 2; each micro-batch must hold a multiple of 2 rows}}
  %t = tensor.extract_slice %tokens[0, 0] [1, 8] [1, 1] : tensor<4x8xi32> to tensor<8xi32>
  return %t : tensor<8xi32>
}
}

// -----

module attributes {dist.plan = #dist.plan<mesh = @mesh, axes = [dp = data, pp = pipeline, tp = tensor], sequence_parallel = false, schedule = "1f1b", microbatches = 1, zero_stage = 0, recompute = none, precision = "fp32">} {
dist.mesh @mesh axes = [dp = 2, pp = 1, tp = 1]
func.func @eval_step(%tokens: tensor<4x8xi32> {xfmr.input = "tokens"}) -> tensor<4x8xi32> attributes {xfmr.eval_step = {}} {
  // expected-error @+1 {{'arith.addi' op has operand #0 split over the mesh but no sharding rule (ShardingRuleOpInterface)}}
  %t = arith.addi %tokens, %tokens : tensor<4x8xi32>
  return %t : tensor<4x8xi32>
}
}

// -----

module attributes {dist.plan = #dist.plan<mesh = @mesh, axes = [dp = data, pp = pipeline, tp = tensor], sequence_parallel = false, schedule = "1f1b", microbatches = 1, zero_stage = 0, recompute = none, precision = "fp32">} {
dist.mesh @mesh axes = [dp = 2, pp = 1, tp = 1]
// expected-error @+1 {{result #0 is split over the mesh; returning it whole needs an all_gather, which the partitioner does not insert for results other than parameters, moments, gradients and logits}}
func.func @eval_step(%wte: tensor<16x8xf32> {xfmr.param = "wte"},
                     %tokens: tensor<4x8xi32> {xfmr.input = "tokens"}) -> tensor<4x8x8xf32> attributes {xfmr.eval_step = {}} {
  %x = xfmr.embedding %tokens, %wte : (tensor<4x8xi32>, tensor<16x8xf32>) -> tensor<4x8x8xf32>
  return %x : tensor<4x8x8xf32>
}
}
