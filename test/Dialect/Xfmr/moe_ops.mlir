// RUN: partition-opt %s -split-input-file | partition-opt -split-input-file | FileCheck %s
// RUN: partition-opt %s -split-input-file --mlir-print-op-generic | partition-opt -split-input-file | FileCheck %s

// Round trip of the mixture-of-experts ops, in the custom and in the
// generic form: B = 2 sequences of S = 4 tokens of H = 8 features, E = 3
// experts, top-2, a capacity of C = 4 rows (dropless), experts of F = 6.

// CHECK-LABEL: func.func @route
// CHECK-SAME:    (%[[L:.*]]: tensor<2x4x3xf32>)
func.func @route(%logits: tensor<2x4x3xf32>) -> (tensor<2x4x2xf32>, tensor<2x4x2xi32>, tensor<2x4x2xi32>, tensor<2x3xi32>) {
  // CHECK: %[[G:.*]], %[[E:.*]], %[[S:.*]], %[[N:.*]] = xfmr.moe_route %[[L]] {capacity = 4 : i64, top_k = 2 : i64} : (tensor<2x4x3xf32>) -> (tensor<2x4x2xf32>, tensor<2x4x2xi32>, tensor<2x4x2xi32>, tensor<2x3xi32>)
  %g, %e, %s, %n = xfmr.moe_route %logits {top_k = 2 : i64, capacity = 4 : i64}
      : (tensor<2x4x3xf32>) -> (tensor<2x4x2xf32>, tensor<2x4x2xi32>, tensor<2x4x2xi32>, tensor<2x3xi32>)
  // CHECK: return %[[G]], %[[E]], %[[S]], %[[N]]
  return %g, %e, %s, %n : tensor<2x4x2xf32>, tensor<2x4x2xi32>, tensor<2x4x2xi32>, tensor<2x3xi32>
}

// -----

// DeepSeek-V3's routing: sigmoid scores and a selection bias; bf16 logits
// give bf16 gates.
// CHECK-LABEL: func.func @route_sigmoid_bias_bf16
func.func @route_sigmoid_bias_bf16(%logits: tensor<2x4x3xbf16>, %bias: tensor<3xf32>) -> tensor<2x4x2xbf16> {
  // CHECK: xfmr.moe_route %{{.*}}, %{{.*}} {capacity = 2 : i64, scoring = "sigmoid", top_k = 2 : i64} : (tensor<2x4x3xbf16>, tensor<3xf32>) -> (tensor<2x4x2xbf16>, tensor<2x4x2xi32>, tensor<2x4x2xi32>, tensor<2x3xi32>)
  %g, %e, %s, %n = xfmr.moe_route %logits, %bias {top_k = 2 : i64, capacity = 2 : i64, scoring = "sigmoid"}
      : (tensor<2x4x3xbf16>, tensor<3xf32>) -> (tensor<2x4x2xbf16>, tensor<2x4x2xi32>, tensor<2x4x2xi32>, tensor<2x3xi32>)
  return %g : tensor<2x4x2xbf16>
}

// -----

// CHECK-LABEL: func.func @route_grad
func.func @route_grad(%dg: tensor<2x4x2xf32>, %logits: tensor<2x4x3xf32>, %e: tensor<2x4x2xi32>) -> tensor<2x4x3xf32> {
  // CHECK: xfmr.moe_route_grad %{{.*}}, %{{.*}}, %{{.*}} {scoring = "softmax_topk", top_k = 2 : i64} : (tensor<2x4x2xf32>, tensor<2x4x3xf32>, tensor<2x4x2xi32>) -> tensor<2x4x3xf32>
  %dl = xfmr.moe_route_grad %dg, %logits, %e {top_k = 2 : i64, scoring = "softmax_topk"}
      : (tensor<2x4x2xf32>, tensor<2x4x3xf32>, tensor<2x4x2xi32>) -> tensor<2x4x3xf32>
  return %dl : tensor<2x4x3xf32>
}

// -----

// CHECK-LABEL: func.func @dispatch_experts_combine
// CHECK-SAME:    (%[[X:.*]]: tensor<2x4x8xf32>, %[[G:.*]]: tensor<2x4x2xf32>, %[[E:.*]]: tensor<2x4x2xi32>, %[[S:.*]]: tensor<2x4x2xi32>, %[[N:.*]]: tensor<2x3xi32>, %[[W1:.*]]: tensor<3x6x8xf32>, %[[W2:.*]]: tensor<3x8x6xf32>)
func.func @dispatch_experts_combine(%x: tensor<2x4x8xf32>, %g: tensor<2x4x2xf32>, %e: tensor<2x4x2xi32>, %s: tensor<2x4x2xi32>,
                                    %n: tensor<2x3xi32>, %w1: tensor<3x6x8xf32>, %w2: tensor<3x8x6xf32>) -> tensor<2x4x8xf32> {
  // CHECK: %[[XE:.*]] = xfmr.moe_dispatch %[[X]], %[[E]], %[[S]] : (tensor<2x4x8xf32>, tensor<2x4x2xi32>, tensor<2x4x2xi32>) -> tensor<2x3x4x8xf32>
  %xe = xfmr.moe_dispatch %x, %e, %s : (tensor<2x4x8xf32>, tensor<2x4x2xi32>, tensor<2x4x2xi32>) -> tensor<2x3x4x8xf32>
  // CHECK: %[[H:.*]] = xfmr.expert_linear %[[XE]], %[[W1]], %[[N]] {routed_rows = 8 : i64} : (tensor<2x3x4x8xf32>, tensor<3x6x8xf32>, tensor<2x3xi32>) -> tensor<2x3x4x6xf32>
  %h = xfmr.expert_linear %xe, %w1, %n {routed_rows = 8 : i64} : (tensor<2x3x4x8xf32>, tensor<3x6x8xf32>, tensor<2x3xi32>) -> tensor<2x3x4x6xf32>
  // CHECK: %[[YE:.*]] = xfmr.expert_linear %[[H]], %[[W2]], %[[N]] : (tensor<2x3x4x6xf32>, tensor<3x8x6xf32>, tensor<2x3xi32>) -> tensor<2x3x4x8xf32>
  %ye = xfmr.expert_linear %h, %w2, %n : (tensor<2x3x4x6xf32>, tensor<3x8x6xf32>, tensor<2x3xi32>) -> tensor<2x3x4x8xf32>
  // CHECK: %[[Y:.*]] = xfmr.moe_combine %[[YE]], %[[G]], %[[E]], %[[S]] : (tensor<2x3x4x8xf32>, tensor<2x4x2xf32>, tensor<2x4x2xi32>, tensor<2x4x2xi32>) -> tensor<2x4x8xf32>
  %y = xfmr.moe_combine %ye, %g, %e, %s : (tensor<2x3x4x8xf32>, tensor<2x4x2xf32>, tensor<2x4x2xi32>, tensor<2x4x2xi32>) -> tensor<2x4x8xf32>
  // CHECK: return %[[Y]]
  return %y : tensor<2x4x8xf32>
}

// -----

// CHECK-LABEL: func.func @gradients
func.func @gradients(%dy: tensor<2x4x8xf32>, %ye: tensor<2x3x4x8xf32>, %g: tensor<2x4x2xf32>, %e: tensor<2x4x2xi32>, %s: tensor<2x4x2xi32>,
                     %n: tensor<2x3xi32>, %w2: tensor<3x8x6xf32>, %h: tensor<2x3x4x6xf32>) -> (tensor<2x4x8xf32>, tensor<2x4x2xf32>, tensor<3x8x6xf32>) {
  // CHECK: %[[DYE:.*]], %[[DG:.*]] = xfmr.moe_combine_grad %{{.*}} : (tensor<2x4x8xf32>, tensor<2x3x4x8xf32>, tensor<2x4x2xf32>, tensor<2x4x2xi32>, tensor<2x4x2xi32>) -> (tensor<2x3x4x8xf32>, tensor<2x4x2xf32>)
  %dye, %dg = xfmr.moe_combine_grad %dy, %ye, %g, %e, %s
      : (tensor<2x4x8xf32>, tensor<2x3x4x8xf32>, tensor<2x4x2xf32>, tensor<2x4x2xi32>, tensor<2x4x2xi32>) -> (tensor<2x3x4x8xf32>, tensor<2x4x2xf32>)
  // CHECK: xfmr.expert_linear_grad_input %[[DYE]], %{{.*}}, %{{.*}} : (tensor<2x3x4x8xf32>, tensor<3x8x6xf32>, tensor<2x3xi32>) -> tensor<2x3x4x6xf32>
  %dh = xfmr.expert_linear_grad_input %dye, %w2, %n : (tensor<2x3x4x8xf32>, tensor<3x8x6xf32>, tensor<2x3xi32>) -> tensor<2x3x4x6xf32>
  // CHECK: %[[DW:.*]] = xfmr.expert_linear_grad_weight %[[DYE]], %{{.*}}, %{{.*}} {routed_rows = 8 : i64} : (tensor<2x3x4x8xf32>, tensor<2x3x4x6xf32>, tensor<2x3xi32>) -> tensor<3x8x6xf32>
  %dw = xfmr.expert_linear_grad_weight %dye, %h, %n {routed_rows = 8 : i64} : (tensor<2x3x4x8xf32>, tensor<2x3x4x6xf32>, tensor<2x3xi32>) -> tensor<3x8x6xf32>
  // CHECK: xfmr.moe_dispatch_grad %{{.*}}, %{{.*}}, %{{.*}} : (tensor<2x3x4x8xf32>, tensor<2x4x2xi32>, tensor<2x4x2xi32>) -> tensor<2x4x8xf32>
  %dx = xfmr.moe_dispatch_grad %dye, %e, %s : (tensor<2x3x4x8xf32>, tensor<2x4x2xi32>, tensor<2x4x2xi32>) -> tensor<2x4x8xf32>
  // CHECK: return %{{.*}}, %[[DG]], %[[DW]]
  return %dx, %dg, %dw : tensor<2x4x8xf32>, tensor<2x4x2xf32>, tensor<3x8x6xf32>
}

// -----

// CHECK-LABEL: func.func @aux_loss
func.func @aux_loss(%logits: tensor<2x4x3xf32>, %e: tensor<2x4x2xi32>, %d: tensor<f32>) -> (tensor<f32>, tensor<2x4x3xf32>) {
  // CHECK: xfmr.moe_aux_loss %{{.*}}, %{{.*}} {aux_coef = 2.000000e-02 : f32, z_coef = 1.000000e-03 : f32} : (tensor<2x4x3xf32>, tensor<2x4x2xi32>) -> tensor<f32>
  %aux = xfmr.moe_aux_loss %logits, %e {aux_coef = 2.0e-02 : f32, z_coef = 1.0e-03 : f32} : (tensor<2x4x3xf32>, tensor<2x4x2xi32>) -> tensor<f32>
  // CHECK: xfmr.moe_aux_loss_grad %{{.*}}, %{{.*}}, %{{.*}} {aux_coef = 2.000000e-02 : f32, scoring = "sigmoid", z_coef = 0.000000e+00 : f32} : (tensor<f32>, tensor<2x4x3xf32>, tensor<2x4x2xi32>) -> tensor<2x4x3xf32>
  %dl = xfmr.moe_aux_loss_grad %d, %logits, %e {aux_coef = 2.0e-02 : f32, z_coef = 0.0 : f32, scoring = "sigmoid"}
      : (tensor<f32>, tensor<2x4x3xf32>, tensor<2x4x2xi32>) -> tensor<2x4x3xf32>
  return %aux, %dl : tensor<f32>, tensor<2x4x3xf32>
}

// -----

// DeepSeek-V3's auxiliary-loss-free balancing: the load of each expert over
// the batch, and one bias update from it.
// CHECK-LABEL: func.func @bias_update
func.func @bias_update(%counts: tensor<2x3xi32>, %bias: tensor<3xf32>) -> tensor<3xf32> {
  // CHECK: %[[LOAD:.*]] = xfmr.moe_expert_load %{{.*}} : (tensor<2x3xi32>) -> tensor<3xf32>
  %load = xfmr.moe_expert_load %counts : (tensor<2x3xi32>) -> tensor<3xf32>
  // CHECK: xfmr.moe_bias_update %{{.*}}, %[[LOAD]] {rate = 1.250000e-01 : f32} : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  %new = xfmr.moe_bias_update %bias, %load {rate = 1.25e-01 : f32}
      : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  return %new : tensor<3xf32>
}
