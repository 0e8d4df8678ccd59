// --dist-seed-layouts: the batch inputs split over the plan's data axis;
// user annotations win.
// RUN: partition-opt %s -split-input-file --dist-seed-layouts | FileCheck %s

// The tokens and targets (inputs with a batch dimension) are split on their
// rows over the axis with the data role; scalars and parameters are not
// seeded.

#plan = #dist.plan<mesh = @mesh, axes = [dp = data, pp = pipeline, tp = tensor], sequence_parallel = false, schedule = "1f1b", microbatches = 1, zero_stage = 0, recompute = none, precision = "fp32">
module attributes {dist.plan = #plan} {
  dist.mesh @mesh axes = [dp = 2, pp = 1, tp = 1]
  // CHECK-LABEL: func.func @train_step
  // CHECK-SAME: %{{.*}}: tensor<16x8xf32> {xfmr.param = "w"}
  // CHECK-SAME: %{{.*}}: tensor<f32> {xfmr.input = "lr"}
  // CHECK-SAME: %{{.*}}: tensor<4x8xi32> {dist.sharding = #dist.sharding<@mesh, {{\[\[}}dp], []]>, xfmr.input = "tokens"}
  // CHECK-SAME: %{{.*}}: tensor<4x8xi32> {dist.sharding = #dist.sharding<@mesh, {{\[\[}}dp], []]>, xfmr.input = "targets"}
  func.func @train_step(%w: tensor<16x8xf32> {xfmr.param = "w"},
                        %lr: tensor<f32> {xfmr.input = "lr"},
                        %tokens: tensor<4x8xi32> {xfmr.input = "tokens"},
                        %targets: tensor<4x8xi32> {xfmr.input = "targets"})
      attributes {xfmr.train_step = {}} {
    return
  }
}

// -----

// The axis is found by its role, not its name: here the data axis is
// called "replica".

#plan = #dist.plan<mesh = @cluster, axes = [replica = data, model = tensor], sequence_parallel = false, schedule = "1f1b", microbatches = 1, zero_stage = 0, recompute = none, precision = "fp32">
module attributes {dist.plan = #plan} {
  dist.mesh @cluster axes = [replica = 4, model = 1]
  // CHECK-LABEL: func.func @eval_step
  // CHECK-SAME: {dist.sharding = #dist.sharding<@cluster, {{\[\[}}replica], []]>, xfmr.input = "tokens"}
  func.func @eval_step(%tokens: tensor<8x8xi32> {xfmr.input = "tokens"})
      attributes {xfmr.eval_step = {}} {
    return
  }
}

// -----

// Annotations win: annotated tokens keep their layout (rows over tp,
// positions over dp).

#plan = #dist.plan<mesh = @mesh, axes = [dp = data, pp = pipeline, tp = tensor], sequence_parallel = false, schedule = "1f1b", microbatches = 1, zero_stage = 0, recompute = none, precision = "fp32">
module attributes {dist.plan = #plan} {
  dist.mesh @mesh axes = [dp = 2, pp = 1, tp = 2]
  // CHECK-LABEL: func.func @eval_step
  // CHECK-SAME: {dist.sharding = #dist.sharding<@mesh, {{\[\[}}tp], [dp]]>, xfmr.input = "tokens"}
  // CHECK-SAME: {dist.sharding = #dist.sharding<@mesh, {{\[\[}}dp], []]>, xfmr.input = "targets"}
  func.func @eval_step(%tokens: tensor<4x8xi32> {dist.sharding = #dist.sharding<@mesh, [[tp], [dp]]>, xfmr.input = "tokens"},
                       %targets: tensor<4x8xi32> {xfmr.input = "targets"})
      attributes {xfmr.eval_step = {}} {
    return
  }
}

// -----

// One data-parallel replica: nothing to seed.

#plan = #dist.plan<mesh = @mesh, axes = [dp = data, pp = pipeline, tp = tensor], sequence_parallel = false, schedule = "1f1b", microbatches = 1, zero_stage = 0, recompute = none, precision = "fp32">
module attributes {dist.plan = #plan} {
  dist.mesh @mesh axes = [dp = 1, pp = 1, tp = 2]
  // CHECK-LABEL: func.func @eval_step
  // CHECK-SAME: (%{{.*}}: tensor<4x8xi32> {xfmr.input = "tokens"})
  func.func @eval_step(%tokens: tensor<4x8xi32> {xfmr.input = "tokens"})
      attributes {xfmr.eval_step = {}} {
    return
  }
}
