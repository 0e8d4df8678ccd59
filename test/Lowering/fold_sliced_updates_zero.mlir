// RUN: partition-opt %s -split-input-file --dist-zero --lower-to-rt --rt-fold-sliced-updates | FileCheck %s

// --rt-fold-sliced-updates on ZeRO-1 steps lowered with flat buckets
// (lowering/FlatBuckets.h).

// From a ZeRO-1 step (as test/Lowering/lower_to_rt_flat_buckets.mlir):
// a [4, 5] weight and a [6] bias over dp = 2 split into whole chunks, so
// each AdamW reads its chunk in the parameter, and the updated chunks are
// all-gathered into the parameters as before. A [3, 5] weight's padded
// bucket keeps its slice (AdamW reads part of the sliced row).
#plan = #dist.plan<mesh = @mesh, axes = [dp = data, pp = pipeline, tp = tensor], sequence_parallel = false, schedule = "1f1b", microbatches = 1, zero_stage = 1, recompute = none, precision = "fp32">
module attributes {dist.plan = #plan} {
  dist.mesh @mesh axes = [dp = 2, pp = 1, tp = 1]
  // CHECK-LABEL: func.func @train_step
  // CHECK-SAME:  (%[[W:[^:]+]]: memref<4x5xf32> {{[^%]*}}, %[[B:[^:]+]]: memref<6xf32>
  // CHECK-SAME:  %[[INDEX:[^:]+]]: memref<i32> {rt.name = "dp", rt.role = "axis_index"}
  // CHECK-NOT:   slice_block
  // CHECK:       %[[FLATW:.+]] = memref.collapse_shape %[[W]] {{\[\[}}0, 1]] : memref<4x5xf32> into memref<20xf32>
  // CHECK-NOT:   slice_block
  // CHECK:       %[[NEWW:.+]] = memref.alloc() : memref<10xf32>
  // CHECK-NEXT:  rt.kernel "adamw_block" ins(%[[FLATW]], %[[INDEX]], {{.*}}) outs(%[[NEWW]], {{.*}}) ints = [2]
  // CHECK-NEXT:  %[[NEWB:.+]] = memref.alloc() : memref<3xf32>
  // CHECK-NEXT:  rt.kernel "adamw_block" ins(%[[B]], %[[INDEX]], {{.*}}) outs(%[[NEWB]], {{.*}}) ints = [2]
  // CHECK:       rt.all_gather %[[NEWW]], %{{.+}} on @mesh
  // CHECK-NEXT:  rt.all_gather %[[NEWB]], %[[B]] on @mesh
  // CHECK:       return
  func.func @train_step(%w: tensor<4x5xf32> {xfmr.param = "w"}, %b: tensor<6xf32> {xfmr.param = "b"},
                        %mw: tensor<4x5xf32> {xfmr.moment1 = "w"}, %mb: tensor<6xf32> {xfmr.moment1 = "b"},
                        %vw: tensor<4x5xf32> {xfmr.moment2 = "w"}, %vb: tensor<6xf32> {xfmr.moment2 = "b"},
                        %t: tensor<i32> {xfmr.input = "step"}, %lr: tensor<f32> {xfmr.input = "lr"}, %l: tensor<f32> {xfmr.input = "tokens"})
      -> (tensor<f32> {xfmr.output = "loss"}, tensor<4x5xf32> {xfmr.param = "w"}, tensor<6xf32> {xfmr.param = "b"},
          tensor<4x5xf32> {xfmr.moment1 = "w"}, tensor<6xf32> {xfmr.moment1 = "b"},
          tensor<4x5xf32> {xfmr.moment2 = "w"}, tensor<6xf32> {xfmr.moment2 = "b"})
      attributes {xfmr.train_step = {}} {
    %loss = dist.all_reduce %l on @mesh axes [dp] reduce = sum {dist.label = "loss"} : tensor<f32>
    %gw = xfmr.scale %w {factor = 2.0 : f32} : (tensor<4x5xf32>) -> tensor<4x5xf32>
    %gb = xfmr.scale %b {factor = 2.0 : f32} : (tensor<6xf32>) -> tensor<6xf32>
    %g:2 = dist.all_reduce %gw, %gb on @mesh axes [dp] reduce = sum {dist.label = "gradient bucket 0"} : tensor<4x5xf32>, tensor<6xf32>
    %w2, %mw2, %vw2 = xfmr.adamw %w, %g#0, %mw, %vw, %t, %lr {weight_decay = 0.1 : f32} : (tensor<4x5xf32>, tensor<4x5xf32>, tensor<4x5xf32>, tensor<4x5xf32>, tensor<i32>, tensor<f32>) -> (tensor<4x5xf32>, tensor<4x5xf32>, tensor<4x5xf32>)
    %b2, %mb2, %vb2 = xfmr.adamw %b, %g#1, %mb, %vb, %t, %lr : (tensor<6xf32>, tensor<6xf32>, tensor<6xf32>, tensor<6xf32>, tensor<i32>, tensor<f32>) -> (tensor<6xf32>, tensor<6xf32>, tensor<6xf32>)
    return %loss, %w2, %b2, %mw2, %mb2, %vw2, %vb2 : tensor<f32>, tensor<4x5xf32>, tensor<6xf32>, tensor<4x5xf32>, tensor<6xf32>, tensor<4x5xf32>, tensor<6xf32>
  }
}

// -----

#plan = #dist.plan<mesh = @mesh, axes = [dp = data, pp = pipeline, tp = tensor], sequence_parallel = false, schedule = "1f1b", microbatches = 1, zero_stage = 1, recompute = none, precision = "fp32">
module attributes {dist.plan = #plan} {
  dist.mesh @mesh axes = [dp = 2, pp = 1, tp = 1]
  // CHECK-LABEL: func.func @train_step
  // CHECK:       rt.kernel "slice_block" {{.*}} outs(%{{.+}} : memref<1x11xf32>) ints = [0, 2]
  // CHECK-NOT:   adamw_block
  // CHECK:       rt.kernel "adamw" ins
  // CHECK-NOT:   adamw_block
  // CHECK:       return
  func.func @train_step(%w: tensor<3x5xf32> {xfmr.param = "w"}, %b: tensor<5xf32> {xfmr.param = "b"},
                        %mw: tensor<3x5xf32> {xfmr.moment1 = "w"}, %mb: tensor<5xf32> {xfmr.moment1 = "b"},
                        %vw: tensor<3x5xf32> {xfmr.moment2 = "w"}, %vb: tensor<5xf32> {xfmr.moment2 = "b"},
                        %t: tensor<i32> {xfmr.input = "step"}, %lr: tensor<f32> {xfmr.input = "lr"}, %l: tensor<f32> {xfmr.input = "tokens"})
      -> (tensor<f32> {xfmr.output = "loss"}, tensor<3x5xf32> {xfmr.param = "w"}, tensor<5xf32> {xfmr.param = "b"},
          tensor<3x5xf32> {xfmr.moment1 = "w"}, tensor<5xf32> {xfmr.moment1 = "b"},
          tensor<3x5xf32> {xfmr.moment2 = "w"}, tensor<5xf32> {xfmr.moment2 = "b"})
      attributes {xfmr.train_step = {}} {
    %loss = dist.all_reduce %l on @mesh axes [dp] reduce = sum {dist.label = "loss"} : tensor<f32>
    %gw = xfmr.scale %w {factor = 2.0 : f32} : (tensor<3x5xf32>) -> tensor<3x5xf32>
    %gb = xfmr.scale %b {factor = 2.0 : f32} : (tensor<5xf32>) -> tensor<5xf32>
    %g:2 = dist.all_reduce %gw, %gb on @mesh axes [dp] reduce = sum {dist.label = "gradient bucket 0"} : tensor<3x5xf32>, tensor<5xf32>
    %w2, %mw2, %vw2 = xfmr.adamw %w, %g#0, %mw, %vw, %t, %lr {weight_decay = 0.1 : f32} : (tensor<3x5xf32>, tensor<3x5xf32>, tensor<3x5xf32>, tensor<3x5xf32>, tensor<i32>, tensor<f32>) -> (tensor<3x5xf32>, tensor<3x5xf32>, tensor<3x5xf32>)
    %b2, %mb2, %vb2 = xfmr.adamw %b, %g#1, %mb, %vb, %t, %lr : (tensor<5xf32>, tensor<5xf32>, tensor<5xf32>, tensor<5xf32>, tensor<i32>, tensor<f32>) -> (tensor<5xf32>, tensor<5xf32>, tensor<5xf32>)
    return %loss, %w2, %b2, %mw2, %mb2, %vw2, %vb2 : tensor<f32>, tensor<3x5xf32>, tensor<5xf32>, tensor<3x5xf32>, tensor<5xf32>, tensor<3x5xf32>, tensor<5xf32>
  }
}
