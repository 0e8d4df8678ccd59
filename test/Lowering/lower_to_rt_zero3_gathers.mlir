// RUN: partition-opt %s --dist-zero --lower-to-rt | FileCheck %s
// RUN: partition-opt %s --dist-zero --lower-to-rt=gather-shards-per-tensor=false | FileCheck %s --check-prefix=BUCKET

// ZeRO-3: the gradient is reduce-scattered tensor by tensor as above, and
// each gather of the parameter shard (a state argument) moves straight
// from the shard into the whole parameter seen flat, once for the forward
// and once for the backward. With gather-shards-per-tensor=false (what
// partition-compile passes when the parameters are offloaded:
// --rt-offload-optimizer stages a tiered shard through its flat_pack) the
// gathers keep their one-row bucket.
#plan = #dist.plan<mesh = @mesh, axes = [dp = data, pp = pipeline, tp = tensor], sequence_parallel = false, schedule = "1f1b", microbatches = 1, zero_stage = 3, recompute = none, precision = "fp32">
module attributes {dist.plan = #plan} {
  dist.mesh @mesh axes = [dp = 2, pp = 1, tp = 1]
  // CHECK-LABEL: func.func @train_step
  // CHECK-SAME: (%[[W:[^:]+]]: memref<10xf32>
  // CHECK-NOT:  flat_pack
  // CHECK:      %[[WHOLE:.+]] = memref.alloc() : memref<4x5xf32>
  // CHECK-NEXT: %[[WFLAT:.+]] = memref.collapse_shape %[[WHOLE]] {{\[\[}}0, 1]] : memref<4x5xf32> into memref<20xf32>
  // CHECK-NEXT: rt.all_gather %[[W]], %[[WFLAT]] on @mesh axes [dp] dim = 0 label = "parameters from w (forward) #0" bucket = "parameters from w (forward)" : memref<10xf32>, memref<20xf32>
  // CHECK-NEXT: %[[AGAIN:.+]] = memref.alloc() : memref<4x5xf32>
  // CHECK-NEXT: %[[AFLAT:.+]] = memref.collapse_shape %[[AGAIN]] {{\[\[}}0, 1]] : memref<4x5xf32> into memref<20xf32>
  // CHECK-NEXT: rt.all_gather %[[W]], %[[AFLAT]] on @mesh axes [dp] dim = 0 label = "parameters from w (backward) #0" bucket = "parameters from w (backward)" : memref<10xf32>, memref<20xf32>
  // CHECK-NEXT: rt.kernel "linear" ins(%{{.+}}, %[[WHOLE]] : memref<3x5xf32>, memref<4x5xf32>)
  // CHECK:      rt.kernel "linear_grad_input" ins(%{{.+}}, %[[AGAIN]] : memref<3x4xf32>, memref<4x5xf32>)
  // CHECK:      rt.reduce_scatter
  // CHECK-NEXT: rt.kernel "adamw" ins(%[[W]],
  // CHECK-NOT:  rt.all_gather
  // CHECK-NOT:  flat_unpack
  // CHECK:      return
  // BUCKET-LABEL: func.func @train_step
  // BUCKET-SAME: (%[[W:[^:]+]]: memref<10xf32>
  // BUCKET:      %[[ROW:.+]] = memref.alloc() : memref<1x10xf32>
  // BUCKET-NEXT: rt.kernel "flat_pack" ins(%[[W]] : memref<10xf32>) outs(%[[ROW]] : memref<1x10xf32>) ints = [0]
  // BUCKET-NEXT: %[[ALL:.+]] = memref.alloc() : memref<2x10xf32>
  // BUCKET-NEXT: rt.all_gather %[[ROW]], %[[ALL]] on @mesh axes [dp] dim = 0 label = "parameters from w (forward)" : memref<1x10xf32>, memref<2x10xf32>
  // BUCKET-NEXT: %[[WHOLE:.+]] = memref.alloc() : memref<4x5xf32>
  // BUCKET-NEXT: rt.kernel "flat_unpack" ins(%[[ALL]] : memref<2x10xf32>) outs(%[[WHOLE]] : memref<4x5xf32>) ints = [0]
  // BUCKET:      rt.kernel "linear_grad_weight" {{.*}} outs(%[[GRAD:[^ ]+]] : memref<4x5xf32>)
  // BUCKET-NEXT: %[[FLAT:.+]] = memref.collapse_shape %[[GRAD]] {{\[\[}}0, 1]] : memref<4x5xf32> into memref<20xf32>
  // BUCKET-NEXT: %[[CHUNK:.+]] = memref.alloc() : memref<10xf32>
  // BUCKET-NEXT: rt.reduce_scatter %[[FLAT]], %[[CHUNK]] on @mesh axes [dp] dim = 0 reduce = sum label = "gradient bucket 0 (reduce-scatter) #0" bucket = "gradient bucket 0 (reduce-scatter)" : memref<20xf32>, memref<10xf32>
  // BUCKET-NEXT: rt.kernel "adamw" ins(%[[W]], %[[CHUNK]], {{.*}}) outs(%[[W]], {{.*}})
  // BUCKET-NOT:  rt.all_gather
  // BUCKET:      return
  func.func @train_step(%w: tensor<4x5xf32> {xfmr.param = "w", xfmr.layer = 0 : i64},
                        %mw: tensor<4x5xf32> {xfmr.moment1 = "w"}, %vw: tensor<4x5xf32> {xfmr.moment2 = "w"},
                        %x: tensor<3x5xf32> {xfmr.input = "tokens"},
                        %t: tensor<i32> {xfmr.input = "step"}, %lr: tensor<f32> {xfmr.input = "lr"})
      -> (tensor<3x4xf32> {xfmr.output = "loss"}, tensor<4x5xf32> {xfmr.param = "w"},
          tensor<4x5xf32> {xfmr.moment1 = "w"}, tensor<4x5xf32> {xfmr.moment2 = "w"})
      attributes {xfmr.train_step = {}} {
    %y = xfmr.linear %x, %w : (tensor<3x5xf32>, tensor<4x5xf32>) -> tensor<3x4xf32>
    %dx = xfmr.linear_grad_input %y, %w : (tensor<3x4xf32>, tensor<4x5xf32>) -> tensor<3x5xf32>
    %dw = xfmr.linear_grad_weight %y, %dx : (tensor<3x4xf32>, tensor<3x5xf32>) -> tensor<4x5xf32>
    %g = dist.all_reduce %dw on @mesh axes [dp] reduce = sum {dist.label = "gradient bucket 0"} : tensor<4x5xf32>
    %w2, %m2, %v2 = xfmr.adamw %w, %g, %mw, %vw, %t, %lr : (tensor<4x5xf32>, tensor<4x5xf32>, tensor<4x5xf32>, tensor<4x5xf32>, tensor<i32>, tensor<f32>) -> (tensor<4x5xf32>, tensor<4x5xf32>, tensor<4x5xf32>)
    return %y, %w2, %m2, %v2 : tensor<3x4xf32>, tensor<4x5xf32>, tensor<4x5xf32>, tensor<4x5xf32>
  }
}
