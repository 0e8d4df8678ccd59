// RUN: partition-opt %s -split-input-file --dist-zero --lower-to-rt | FileCheck %s

// ZeRO's flat buckets lowered with few copies (lowering/FlatBuckets.h).
// When every tensor splits into whole chunks, the gradients are
// reduce-scattered and the updated parameters all-gathered tensor by
// tensor, each seen flat, with no bucket at all; this rank's parameter
// chunks are sliced from each parameter seen flat straight into their row.
// A bucket with padding keeps the bucket: the gradients' pack and the
// gathered bucket's unpack copy; the reduce-scattered row is unpacked by
// views, and AdamW writes each updated chunk in its slot of the row that is
// all-gathered.

// A [4, 5] weight and a [6] bias over dp = 2: chunks of 10 and 3, no
// padding. Each gradient (the weight's seen flat) is reduce-scattered into
// a chunk of its own, read by AdamW; each updated chunk is all-gathered
// straight into its parameter (seen flat): no flat_pack, no flat_unpack.
#plan = #dist.plan<mesh = @mesh, axes = [dp = data, pp = pipeline, tp = tensor], sequence_parallel = false, schedule = "1f1b", microbatches = 1, zero_stage = 1, recompute = none, precision = "fp32">
module attributes {dist.plan = #plan} {
  dist.mesh @mesh axes = [dp = 2, pp = 1, tp = 1]
  // CHECK-LABEL: func.func @train_step
  // CHECK-SAME: (%[[W:[^:]+]]: memref<4x5xf32> {{[^%]*}}, %[[B:[^:]+]]: memref<6xf32>
  // CHECK-SAME: %[[INDEX:[^:]+]]: memref<i32> {rt.name = "dp", rt.role = "axis_index"}
  // CHECK-NOT:  flat_pack
  // CHECK:      %[[GWALL:.+]] = memref.alloc() : memref<4x5xf32>
  // CHECK-NEXT: rt.kernel "scale" {{.*}} outs(%[[GWALL]] : memref<4x5xf32>)
  // CHECK-NEXT: %[[GBALL:.+]] = memref.alloc() : memref<6xf32>
  // CHECK-NEXT: rt.kernel "scale" {{.*}} outs(%[[GBALL]] : memref<6xf32>)
  // CHECK-NEXT: %[[GWFLAT:.+]] = memref.collapse_shape %[[GWALL]] {{\[\[}}0, 1]] : memref<4x5xf32> into memref<20xf32>
  // CHECK-NEXT: %[[GW:.+]] = memref.alloc() : memref<10xf32>
  // CHECK-NEXT: rt.reduce_scatter %[[GWFLAT]], %[[GW]] on @mesh axes [dp] dim = 0 reduce = sum label = "gradient bucket 0 (reduce-scatter) #0" bucket = "gradient bucket 0 (reduce-scatter)" : memref<20xf32>, memref<10xf32>
  // CHECK-NEXT: %[[GB:.+]] = memref.alloc() : memref<3xf32>
  // CHECK-NEXT: rt.reduce_scatter %[[GBALL]], %[[GB]] on @mesh axes [dp] dim = 0 reduce = sum label = "gradient bucket 0 (reduce-scatter) #1" bucket = "gradient bucket 0 (reduce-scatter)" : memref<6xf32>, memref<3xf32>
  // CHECK-NEXT: %[[PROW:.+]] = memref.alloc() : memref<1x13xf32>
  // CHECK-NEXT: %[[FLATW:.+]] = memref.collapse_shape %[[W]] {{\[\[}}0, 1]] : memref<4x5xf32> into memref<20xf32>
  // CHECK-NEXT: %[[SLOTW:.+]] = memref.subview %[[PROW]][0, 0] [1, 10]
  // CHECK-NEXT: rt.kernel "slice_block" ins(%[[FLATW]], %[[INDEX]] : memref<20xf32>, memref<i32>) outs(%[[SLOTW]] : memref<10xf32, strided<[1]>>) ints = [0, 2]
  // CHECK-NEXT: %[[SLOTB:.+]] = memref.subview %[[PROW]][0, 10] [1, 3]
  // CHECK-NEXT: rt.kernel "slice_block" ins(%[[B]], %[[INDEX]] : memref<6xf32>, memref<i32>) outs(%[[SLOTB]] : memref<3xf32, strided<[1], offset: 10>>) ints = [0, 2]
  // CHECK-NEXT: %[[PW:.+]] = memref.subview %[[PROW]][0, 0] [1, 10]
  // CHECK-NEXT: %[[PB:.+]] = memref.subview %[[PROW]][0, 10] [1, 3]
  // CHECK-NEXT: %[[NEWW:.+]] = memref.alloc() : memref<10xf32>
  // CHECK-NEXT: rt.kernel "adamw" ins(%[[PW]], %[[GW]], {{.*}}) outs(%[[NEWW]], {{.*}})
  // CHECK-NEXT: %[[NEWB:.+]] = memref.alloc() : memref<3xf32>
  // CHECK-NEXT: rt.kernel "adamw" ins(%[[PB]], %[[GB]], {{.*}}) outs(%[[NEWB]], {{.*}})
  // CHECK-NEXT: %[[OUTW:.+]] = memref.collapse_shape %[[W]] {{\[\[}}0, 1]] : memref<4x5xf32> into memref<20xf32>
  // CHECK-NEXT: rt.all_gather %[[NEWW]], %[[OUTW]] on @mesh axes [dp] dim = 0 label = "gradient bucket 0 (updated parameters) #0" bucket = "gradient bucket 0 (updated parameters)" : memref<10xf32>, memref<20xf32>
  // CHECK-NEXT: rt.all_gather %[[NEWB]], %[[B]] on @mesh axes [dp] dim = 0 label = "gradient bucket 0 (updated parameters) #1" bucket = "gradient bucket 0 (updated parameters)" : memref<3xf32>, memref<6xf32>
  // CHECK-NOT:  flat_pack
  // CHECK-NOT:  flat_unpack
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
// sliced from it, nor reduce-scattered or gathered by itself; the
// gradients are packed into a bucket whose row is reduce-scattered, and
// the parameters into one whose row is sliced (the padding written as
// zeros), both rows unpacked by views; AdamW writes each updated chunk in
// its slot of the row, which is all-gathered and unpacked.
#plan = #dist.plan<mesh = @mesh, axes = [dp = data, pp = pipeline, tp = tensor], sequence_parallel = false, schedule = "1f1b", microbatches = 1, zero_stage = 1, recompute = none, precision = "fp32">
module attributes {dist.plan = #plan} {
  dist.mesh @mesh axes = [dp = 2, pp = 1, tp = 1]
  // CHECK-LABEL: func.func @train_step
  // CHECK:      %[[GRADS:.+]] = memref.alloc() : memref<2x11xf32>
  // CHECK-NEXT: rt.kernel "flat_pack" {{.*}} outs(%[[GRADS]] : memref<2x11xf32>) ints = [0]
  // CHECK-NEXT: rt.kernel "flat_pack" {{.*}} outs(%[[GRADS]] : memref<2x11xf32>) ints = [8]
  // CHECK-NEXT: %[[GROW:.+]] = memref.alloc() : memref<1x11xf32>
  // CHECK-NEXT: rt.reduce_scatter %[[GRADS]], %[[GROW]] on @mesh axes [dp] dim = 0 reduce = sum label = "gradient bucket 0 (reduce-scatter)" : memref<2x11xf32>, memref<1x11xf32>
  // CHECK:      %[[PARAMS:.+]] = memref.alloc() : memref<2x11xf32>
  // CHECK-NEXT: rt.kernel "flat_pack" ins(%{{.+}} : memref<3x5xf32>) outs(%[[PARAMS]] : memref<2x11xf32>) ints = [0]
  // CHECK-NEXT: rt.kernel "flat_pack" ins(%{{.+}} : memref<5xf32>) outs(%[[PARAMS]] : memref<2x11xf32>) ints = [8]
  // CHECK-NEXT: %[[PROW:.+]] = memref.alloc() : memref<1x11xf32>
  // CHECK-NEXT: rt.kernel "slice_block" ins(%[[PARAMS]], %{{.+}} : memref<2x11xf32>, memref<i32>) outs(%[[PROW]] : memref<1x11xf32>) ints = [0, 2]
  // CHECK-NEXT: memref.subview %[[PROW]][0, 0] [1, 8]
  // CHECK-NEXT: memref.subview %[[PROW]][0, 8] [1, 3]
  // CHECK-NOT:  flat_pack
  // CHECK:      %[[NEW:.+]] = memref.alloc() : memref<1x11xf32>
  // CHECK:      rt.kernel "adamw" {{.*}} outs(%{{[^,]+}}, {{.*}})
  // CHECK:      %[[ALL:.+]] = memref.alloc() : memref<2x11xf32>
  // CHECK-NEXT: rt.all_gather %[[NEW]], %[[ALL]] on @mesh axes [dp] dim = 0 label = "gradient bucket 0 (updated parameters)" : memref<1x11xf32>, memref<2x11xf32>
  // CHECK-NEXT: rt.kernel "flat_unpack" ins(%[[ALL]] : memref<2x11xf32>) outs(%{{.+}} : memref<3x5xf32>) ints = [0]
  // CHECK-NEXT: rt.kernel "flat_unpack" ins(%[[ALL]] : memref<2x11xf32>) outs(%{{.+}} : memref<5xf32>) ints = [8]
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
