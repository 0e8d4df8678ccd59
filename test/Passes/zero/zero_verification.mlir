// Errors of --dist-zero.
// RUN: partition-opt %s -split-input-file --dist-zero -verify-diagnostics > /dev/null
// RUN: not partition-opt %s -split-input-file --dist-zero=stage=4 2>&1 | FileCheck %s --check-prefix=STAGE4
// STAGE4: error: --dist-zero: stage 4 does not exist; use 0, 1, 2 or 3

// A gradient sum that AdamW and another op read: ZeRO would leave the
// other op only a chunk.
#plan = #dist.plan<mesh = @mesh, axes = [dp = data, pp = pipeline, tp = tensor], sequence_parallel = false, schedule = "1f1b", microbatches = 1, zero_stage = 1, recompute = none, precision = "fp32">
module attributes {dist.plan = #plan} {
  dist.mesh @mesh axes = [dp = 2, pp = 1, tp = 1]
  func.func @train_step(%w: tensor<4xf32> {xfmr.param = "w"}, %m: tensor<4xf32> {xfmr.moment1 = "w"}, %v: tensor<4xf32> {xfmr.moment2 = "w"},
                        %t: tensor<i32> {xfmr.input = "step"}, %lr: tensor<f32> {xfmr.input = "lr"})
      -> (tensor<4xf32> {xfmr.param = "w"}, tensor<4xf32> {xfmr.moment1 = "w"}, tensor<4xf32> {xfmr.moment2 = "w"}, tensor<4xf32> {xfmr.output = "loss"})
      attributes {xfmr.train_step = {}} {
    // expected-error @+1 {{sums a gradient that AdamW and other ops read; ZeRO keeps only each rank's chunk of the sum}}
    %s = dist.all_reduce %w on @mesh axes [dp] reduce = sum : tensor<4xf32>
    %w2, %m2, %v2 = xfmr.adamw %w, %s, %m, %v, %t, %lr : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<i32>, tensor<f32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
    return %w2, %m2, %v2, %s : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
  }
}

// -----

// A parameter whose gradient is not summed over the data axis.
#plan = #dist.plan<mesh = @mesh, axes = [dp = data, pp = pipeline, tp = tensor], sequence_parallel = false, schedule = "1f1b", microbatches = 1, zero_stage = 2, recompute = none, precision = "fp32">
module attributes {dist.plan = #plan} {
  dist.mesh @mesh axes = [dp = 2, pp = 1, tp = 1]
  func.func @train_step(%w: tensor<4xf32> {xfmr.param = "w"}, %m: tensor<4xf32> {xfmr.moment1 = "w"}, %v: tensor<4xf32> {xfmr.moment2 = "w"},
                        %t: tensor<i32> {xfmr.input = "step"}, %lr: tensor<f32> {xfmr.input = "lr"})
      -> (tensor<4xf32> {xfmr.param = "w"}, tensor<4xf32> {xfmr.moment1 = "w"}, tensor<4xf32> {xfmr.moment2 = "w"})
      attributes {xfmr.train_step = {}} {
    // expected-error @+1 {{updates a parameter whose gradient is not summed over [dp]; ZeRO shards the state over that sum}}
    %w2, %m2, %v2 = xfmr.adamw %w, %w, %m, %v, %t, %lr : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<i32>, tensor<f32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
    return %w2, %m2, %v2 : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
  }
}
