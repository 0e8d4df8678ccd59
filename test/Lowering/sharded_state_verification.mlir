// RUN: partition-opt %s --split-input-file --lower-to-rt -verify-diagnostics

// --lower-to-rt writes each result into the buffer of the argument it
// updates, so the two must hold the same block: the same dist.local_sharding.

dist.mesh @mesh axes = [dp = 2, tp = 2]
// expected-error @+1 {{result #1 updates argument #0 but its dist.local_sharding differs from the argument's}}
func.func @result_sharded_otherwise(
    %w: tensor<2x8xf32> {xfmr.param = "w", dist.local_sharding = #dist.sharding<@mesh, [[tp], []]>})
    -> (tensor<f32> {xfmr.output = "loss"},
        tensor<2x8xf32> {xfmr.param = "w", dist.local_sharding = #dist.sharding<@mesh, [[dp], []]>})
    attributes {xfmr.train_step = {}} {
  %loss = arith.constant dense<0.0> : tensor<f32>
  return %loss, %w : tensor<f32>, tensor<2x8xf32>
}

// -----

dist.mesh @mesh axes = [dp = 2, tp = 2]
// expected-error @+1 {{result #1 updates argument #0 but its dist.local_sharding differs from the argument's}}
func.func @result_not_sharded(
    %w: tensor<2x8xf32> {xfmr.param = "w", dist.local_sharding = #dist.sharding<@mesh, [[tp], []]>})
    -> (tensor<f32> {xfmr.output = "loss"}, tensor<2x8xf32> {xfmr.param = "w"})
    attributes {xfmr.train_step = {}} {
  %loss = arith.constant dense<0.0> : tensor<f32>
  return %loss, %w : tensor<f32>, tensor<2x8xf32>
}
