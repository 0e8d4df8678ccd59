// The budget policy's errors on steps it cannot choose for.
// RUN: partition-opt %s --dist-recompute="policy=budget budget-bytes=100000" -verify-diagnostics
// The passes it measures its choices with must parse.
// RUN: not partition-opt %s --dist-recompute="policy=budget budget-bytes=100000 measure-pipeline=no-such-pass" 2>&1 | FileCheck %s --check-prefix=MEASURE
// MEASURE: error: recompute measure-pipeline 'no-such-pass' is not a pass pipeline: {{.*}}'no-such-pass' does not refer to a registered pass or pass pipeline

// Every micro-batch gets the same choice, so each must run the same forward
// ops: here micro-batch 1 applies one more GELU than micro-batch 0. (The
// constant both loss gradients read is shared, not a micro-batch's op.)
module {
  // expected-error @below {{recompute policy 'budget' needs every micro-batch to run the same forward ops, but micro-batch 1 differs from micro-batch 0 at its forward op 1 ('xfmr.gelu' against none): use recompute policy 'selective' or 'full' for this step, or one micro-batch}}
  func.func @train_step(%x0: tensor<2x4x8xf32>, %x1: tensor<2x4x8xf32>, %t0: tensor<2x4xi32>, %t1: tensor<2x4xi32>) -> (tensor<f32>, tensor<f32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>) {
    %seed = arith.constant dense<5.000000e-01> : tensor<f32>
    %a0 = xfmr.gelu %x0 : (tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
    %l0 = xfmr.softmax_cross_entropy %a0, %t0 : (tensor<2x4x8xf32>, tensor<2x4xi32>) -> tensor<f32>
    %g0 = xfmr.softmax_cross_entropy_grad %seed, %a0, %t0 : (tensor<f32>, tensor<2x4x8xf32>, tensor<2x4xi32>) -> tensor<2x4x8xf32>
    %d0 = xfmr.gelu_grad %g0, %x0 : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
    %b1 = xfmr.gelu %x1 : (tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
    %a1 = xfmr.gelu %b1 : (tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
    %l1 = xfmr.softmax_cross_entropy %a1, %t1 : (tensor<2x4x8xf32>, tensor<2x4xi32>) -> tensor<f32>
    %g1 = xfmr.softmax_cross_entropy_grad %seed, %a1, %t1 : (tensor<f32>, tensor<2x4x8xf32>, tensor<2x4xi32>) -> tensor<2x4x8xf32>
    %d1 = xfmr.gelu_grad %g1, %b1 : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
    return %l0, %l1, %d0, %d1 : tensor<f32>, tensor<f32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>
  }
}
