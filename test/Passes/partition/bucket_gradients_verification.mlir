// Every error of --dist-bucket-gradients.
// RUN: partition-opt %s -split-input-file -verify-diagnostics --dist-bucket-gradients
// RUN: not partition-opt %s --dist-bucket-gradients="bucket-bytes=0" 2>&1 | FileCheck %s --check-prefix=ZERO
// ZERO: --dist-bucket-gradients: bucket-bytes must be positive, got 0

#plan = #dist.plan<mesh = @mesh, axes = [dp = data, pp = pipeline, tp = tensor], sequence_parallel = false, schedule = "1f1b", microbatches = 1, zero_stage = 0, recompute = none, precision = "fp32">
module attributes {dist.plan = #plan} {
  dist.mesh @mesh axes = [dp = 2, pp = 1, tp = 1]
  func.func @train_step(%a: tensor<8xf32>, %b: tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>) attributes {xfmr.train_step = {}} {
    // expected-error @+1 {{'dist.all_reduce' op is labelled 'data-parallel sum (to bucket)' but reduces 2 values; --dist-partition makes one per value}}
    %s:2 = dist.all_reduce %a, %b on @mesh axes [dp] reduce = sum {dist.label = "data-parallel sum (to bucket)"} : tensor<8xf32>, tensor<8xf32>
    return %s#0, %s#1 : tensor<8xf32>, tensor<8xf32>
  }
}
