// --dist-bucket-gradients: the one-value data-parallel sums that
// --dist-partition makes become DDP buckets.
// RUN: partition-opt %s -split-input-file --dist-bucket-gradients | FileCheck %s
// RUN: partition-opt %s -split-input-file --dist-bucket-gradients="bucket-bytes=2048" | FileCheck %s --check-prefix=SMALL

// Three gradients fit one bucket, placed right after the last of them; the
// loss is reduced on its own. With 2 KiB buckets each gradient (2 KiB, 2
// KiB, 256 B) closes its bucket.

#plan = #dist.plan<mesh = @mesh, axes = [dp = data, pp = pipeline, tp = tensor], sequence_parallel = false, schedule = "1f1b", microbatches = 1, zero_stage = 0, recompute = none, precision = "fp32">
module attributes {dist.plan = #plan} {
  dist.mesh @mesh axes = [dp = 2, pp = 1, tp = 1]
  // CHECK-LABEL: func.func @train_step
  // CHECK: %[[A:.*]] = xfmr.scale %arg0
  // CHECK-NEXT: %[[B:.*]] = xfmr.scale %arg1
  // CHECK-NEXT: %[[C:.*]] = xfmr.scale %arg2
  // CHECK-NEXT: %[[SUMS:.*]]:3 = dist.all_reduce %[[A]], %[[B]], %[[C]] on @mesh axes [dp] reduce = sum {dist.label = "gradient bucket 0"} : tensor<64x8xf32>, tensor<64x8xf32>, tensor<64xf32>
  // CHECK-NEXT: %[[L:.*]] = xfmr.scale %arg3
  // CHECK-NEXT: %[[LOSS:.*]] = dist.all_reduce %[[L]] on @mesh axes [dp] reduce = sum {dist.label = "loss"} : tensor<f32>
  // CHECK-NEXT: return %[[LOSS]], %[[SUMS]]#0, %[[SUMS]]#1, %[[SUMS]]#2
  // SMALL-LABEL: func.func @train_step
  // SMALL: dist.all_reduce {{.*}} {dist.label = "gradient bucket 0"} : tensor<64x8xf32>
  // SMALL: dist.all_reduce {{.*}} {dist.label = "gradient bucket 1"} : tensor<64x8xf32>
  // SMALL: dist.all_reduce {{.*}} {dist.label = "gradient bucket 2"} : tensor<64xf32>
  // SMALL: dist.all_reduce {{.*}} {dist.label = "loss"} : tensor<f32>
  func.func @train_step(%a: tensor<64x8xf32>, %b: tensor<64x8xf32>, %c: tensor<64xf32>, %l: tensor<f32>)
      -> (tensor<f32> {xfmr.output = "loss"}, tensor<64x8xf32>, tensor<64x8xf32>, tensor<64xf32>)
      attributes {xfmr.train_step = {}} {
    %ga = xfmr.scale %a {factor = 2.0 : f32} : (tensor<64x8xf32>) -> tensor<64x8xf32>
    %sa = dist.all_reduce %ga on @mesh axes [dp] reduce = sum {dist.label = "data-parallel sum (to bucket)"} : tensor<64x8xf32>
    %gb = xfmr.scale %b {factor = 2.0 : f32} : (tensor<64x8xf32>) -> tensor<64x8xf32>
    %sb = dist.all_reduce %gb on @mesh axes [dp] reduce = sum {dist.label = "data-parallel sum (to bucket)"} : tensor<64x8xf32>
    %gc = xfmr.scale %c {factor = 2.0 : f32} : (tensor<64xf32>) -> tensor<64xf32>
    %sc = dist.all_reduce %gc on @mesh axes [dp] reduce = sum {dist.label = "data-parallel sum (to bucket)"} : tensor<64xf32>
    %ll = xfmr.scale %l {factor = 0.5 : f32} : (tensor<f32>) -> tensor<f32>
    %sl = dist.all_reduce %ll on @mesh axes [dp] reduce = sum {dist.label = "data-parallel sum (to bucket)"} : tensor<f32>
    return %sl, %sa, %sb, %sc : tensor<f32>, tensor<64x8xf32>, tensor<64x8xf32>, tensor<64xf32>
  }
}

// -----

// A bucket closes before a gradient it cannot wait for: the second
// gradient is computed from the first one's sum, so the first is reduced
// alone before it. Other all_reduces (tensor-parallel sums) are left alone.

#plan = #dist.plan<mesh = @mesh, axes = [dp = data, pp = pipeline, tp = tensor], sequence_parallel = false, schedule = "1f1b", microbatches = 1, zero_stage = 0, recompute = none, precision = "fp32">
module attributes {dist.plan = #plan} {
  dist.mesh @mesh axes = [dp = 2, pp = 1, tp = 2]
  // CHECK-LABEL: func.func @train_step
  // CHECK: %[[SA:.*]] = dist.all_reduce %{{.*}} {dist.label = "gradient bucket 0"} : tensor<8xf32>
  // CHECK: %[[GB:.*]] = xfmr.scale %[[SA]]
  // CHECK-NEXT: dist.all_reduce %[[GB]] on @mesh axes [dp] reduce = sum {dist.label = "gradient bucket 1"}
  // CHECK-NEXT: dist.all_reduce %[[GB]] on @mesh axes [tp] reduce = sum {dist.label = "partial sum 0 over [tp]"}
  func.func @train_step(%a: tensor<8xf32>)
      -> (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>)
      attributes {xfmr.train_step = {}} {
    %ga = xfmr.scale %a {factor = 2.0 : f32} : (tensor<8xf32>) -> tensor<8xf32>
    %sa = dist.all_reduce %ga on @mesh axes [dp] reduce = sum {dist.label = "data-parallel sum (to bucket)"} : tensor<8xf32>
    %gb = xfmr.scale %sa {factor = 2.0 : f32} : (tensor<8xf32>) -> tensor<8xf32>
    %tb = dist.all_reduce %gb on @mesh axes [tp] reduce = sum {dist.label = "partial sum 0 over [tp]"} : tensor<8xf32>
    %sb = dist.all_reduce %gb on @mesh axes [dp] reduce = sum {dist.label = "data-parallel sum (to bucket)"} : tensor<8xf32>
    return %sa, %tb, %sb : tensor<8xf32>, tensor<8xf32>, tensor<8xf32>
  }
}
