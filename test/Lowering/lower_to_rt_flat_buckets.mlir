// RUN: partition-opt %s -split-input-file --dist-zero --lower-to-rt | FileCheck %s

// ZeRO's flat buckets lowered with few copies (lowering/FlatBuckets.h): the
// reduce-scattered row is unpacked by views; this rank's parameter chunks
// are sliced from each parameter seen flat straight into their row; AdamW
// writes each updated chunk in its slot of the row that is all-gathered.
// Only the gradients' pack and the gathered bucket's unpack copy.

// A [4, 5] weight and a [6] bias over dp = 2: chunks of 10 and 3, no padding.
#plan = #dist.plan<mesh = @mesh, axes = [dp = data, pp = pipeline, tp = tensor], sequence_parallel = false, schedule = "1f1b", microbatches = 1, zero_stage = 1, recompute = none, precision = "fp32">
module attributes {dist.plan = #plan} {
  dist.mesh @mesh axes = [dp = 2, pp = 1, tp = 1]
  // CHECK-LABEL: func.func @train_step
  // CHECK-SAME: (%[[W:[^:]+]]: memref<4x5xf32> {{[^%]*}}, %[[B:[^:]+]]: memref<6xf32>
  // CHECK-SAME: %[[INDEX:[^:]+]]: memref<i32> {rt.name = "dp", rt.role = "axis_index"}
  // CHECK:      rt.kernel "flat_pack" {{.*}} outs(%[[GRADS:[^ ]+]] : memref<2x13xf32>) ints = [0]
  // CHECK-NEXT: rt.kernel "flat_pack" {{.*}} outs(%[[GRADS]] : memref<2x13xf32>) ints = [10]
  // CHECK:      rt.reduce_scatter %[[GRADS]], %[[GROW:[^ ]+]] on @mesh
  // CHECK-NEXT: %[[GW:.+]] = memref.subview %[[GROW]][0, 0] [1, 10] [1, 1] : memref<1x13xf32> to memref<10xf32, strided<[1]>>
  // CHECK-NEXT: %[[GB:.+]] = memref.subview %[[GROW]][0, 10] [1, 3] [1, 1] : memref<1x13xf32> to memref<3xf32, strided<[1], offset: 10>>
  // CHECK-NEXT: %[[PROW:.+]] = memref.alloc() : memref<1x13xf32>
  // CHECK-NEXT: %[[FLATW:.+]] = memref.collapse_shape %[[W]] {{\[\[}}0, 1]] : memref<4x5xf32> into memref<20xf32>
  // CHECK-NEXT: %[[SLOTW:.+]] = memref.subview %[[PROW]][0, 0] [1, 10]
  // CHECK-NEXT: rt.kernel "slice_block" ins(%[[FLATW]], %[[INDEX]] : memref<20xf32>, memref<i32>) outs(%[[SLOTW]] : memref<10xf32, strided<[1]>>) ints = [0, 2]
  // CHECK-NEXT: %[[SLOTB:.+]] = memref.subview %[[PROW]][0, 10] [1, 3]
  // CHECK-NEXT: rt.kernel "slice_block" ins(%[[B]], %[[INDEX]] : memref<6xf32>, memref<i32>) outs(%[[SLOTB]] : memref<3xf32, strided<[1], offset: 10>>) ints = [0, 2]
  // CHECK-NEXT: %[[PW:.+]] = memref.subview %[[PROW]][0, 0] [1, 10]
  // CHECK-NEXT: %[[PB:.+]] = memref.subview %[[PROW]][0, 10] [1, 3]
  // CHECK-NEXT: %[[NEW:.+]] = memref.alloc() : memref<1x13xf32>
  // CHECK-NEXT: %[[NEWW:.+]] = memref.subview %[[NEW]][0, 0] [1, 10]
  // CHECK-NEXT: rt.kernel "adamw" ins(%[[PW]], %[[GW]], {{.*}}) outs(%[[NEWW]], {{.*}})
  // CHECK-NEXT: %[[NEWB:.+]] = memref.subview %[[NEW]][0, 10] [1, 3]
  // CHECK-NEXT: rt.kernel "adamw" ins(%[[PB]], %[[GB]], {{.*}}) outs(%[[NEWB]], {{.*}})
  // CHECK-NEXT: %[[ALL:.+]] = memref.alloc() : memref<2x13xf32>
  // CHECK-NEXT: rt.all_gather %[[NEW]], %[[ALL]] on @mesh
  // CHECK-NEXT: rt.kernel "flat_unpack" ins(%[[ALL]] : memref<2x13xf32>) outs(%[[W]] : memref<4x5xf32>) ints = [0]
  // CHECK-NEXT: rt.kernel "flat_unpack" ins(%[[ALL]] : memref<2x13xf32>) outs(%[[B]] : memref<6xf32>) ints = [10]
  // CHECK-NOT:  flat_pack
  // CHECK:      return
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

// A [3, 5] weight (15 elements: chunk 8, padded by one): its chunk cannot be
// sliced from it; the parameters are packed into a bucket whose row is
// sliced (the padding written as zeros), then unpacked by views as before.
#plan = #dist.plan<mesh = @mesh, axes = [dp = data, pp = pipeline, tp = tensor], sequence_parallel = false, schedule = "1f1b", microbatches = 1, zero_stage = 1, recompute = none, precision = "fp32">
module attributes {dist.plan = #plan} {
  dist.mesh @mesh axes = [dp = 2, pp = 1, tp = 1]
  // CHECK-LABEL: func.func @train_step
  // CHECK:      rt.reduce_scatter
  // CHECK:      %[[PARAMS:.+]] = memref.alloc() : memref<2x11xf32>
  // CHECK-NEXT: rt.kernel "flat_pack" ins(%{{.+}} : memref<3x5xf32>) outs(%[[PARAMS]] : memref<2x11xf32>) ints = [0]
  // CHECK-NEXT: rt.kernel "flat_pack" ins(%{{.+}} : memref<5xf32>) outs(%[[PARAMS]] : memref<2x11xf32>) ints = [8]
  // CHECK-NEXT: %[[PROW:.+]] = memref.alloc() : memref<1x11xf32>
  // CHECK-NEXT: rt.kernel "slice_block" ins(%[[PARAMS]], %{{.+}} : memref<2x11xf32>, memref<i32>) outs(%[[PROW]] : memref<1x11xf32>) ints = [0, 2]
  // CHECK-NEXT: memref.subview %[[PROW]][0, 0] [1, 8]
  // CHECK-NEXT: memref.subview %[[PROW]][0, 8] [1, 3]
  // CHECK-NOT:  flat_pack
  // CHECK:      rt.all_gather
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
