// RUN: partition-opt %s -split-input-file -verify-diagnostics

// One case per error of the mixture-of-experts ops' verifiers
// (XfmrMoe.cpp): B = 2 sequences of S = 4 tokens of H = 8 features, E = 3
// experts, top-2, capacity 4, experts of F = 6, unless a case says
// otherwise.

//===----------------------------------------------------------------------===//
// xfmr.moe_route and its gradient
//===----------------------------------------------------------------------===//

func.func @route_scoring(%l: tensor<2x4x3xf32>) {
  // expected-error @+1 {{'xfmr.moe_route' op scoring must be "softmax", "softmax_topk" or "sigmoid", got "relu"}}
  %g, %e, %s, %n = xfmr.moe_route %l {top_k = 2 : i64, capacity = 4 : i64, scoring = "relu"}
      : (tensor<2x4x3xf32>) -> (tensor<2x4x2xf32>, tensor<2x4x2xi32>, tensor<2x4x2xi32>, tensor<2x3xi32>)
  return
}

// -----

func.func @route_logits_rank(%l: tensor<8x3xf32>) {
  // expected-error @+1 {{'xfmr.moe_route' op logits must have rank 3 ([batch, seq, experts]), but has rank 2}}
  %g, %e, %s, %n = xfmr.moe_route %l {top_k = 2 : i64, capacity = 4 : i64}
      : (tensor<8x3xf32>) -> (tensor<2x4x2xf32>, tensor<2x4x2xi32>, tensor<2x4x2xi32>, tensor<2x3xi32>)
  return
}

// -----

func.func @route_top_k(%l: tensor<2x4x3xf32>) {
  // expected-error @+1 {{'xfmr.moe_route' op top_k must be in [1, 3] (the experts), got 4}}
  %g, %e, %s, %n = xfmr.moe_route %l {top_k = 4 : i64, capacity = 4 : i64}
      : (tensor<2x4x3xf32>) -> (tensor<2x4x4xf32>, tensor<2x4x4xi32>, tensor<2x4x4xi32>, tensor<2x3xi32>)
  return
}

// -----

func.func @route_capacity(%l: tensor<2x4x3xf32>) {
  // expected-error @+1 {{'xfmr.moe_route' op capacity must be in [1, 4] (the sequence length), got 5}}
  %g, %e, %s, %n = xfmr.moe_route %l {top_k = 2 : i64, capacity = 5 : i64}
      : (tensor<2x4x3xf32>) -> (tensor<2x4x2xf32>, tensor<2x4x2xi32>, tensor<2x4x2xi32>, tensor<2x3xi32>)
  return
}

// -----

func.func @route_bias(%l: tensor<2x4x3xf32>, %b: tensor<4xf32>) {
  // expected-error @+1 {{'xfmr.moe_route' op bias must be 'tensor<3xf32>' ([E], the logits' experts), but is 'tensor<4xf32>'}}
  %g, %e, %s, %n = xfmr.moe_route %l, %b {top_k = 2 : i64, capacity = 4 : i64}
      : (tensor<2x4x3xf32>, tensor<4xf32>) -> (tensor<2x4x2xf32>, tensor<2x4x2xi32>, tensor<2x4x2xi32>, tensor<2x3xi32>)
  return
}

// -----

func.func @route_gates(%l: tensor<2x4x3xf32>) {
  // expected-error @+1 {{'xfmr.moe_route' op gates must be 'tensor<2x4x2xf32>' ([B, S, k], B and S the tokens', k top_k), but is 'tensor<2x4x1xf32>'}}
  %g, %e, %s, %n = xfmr.moe_route %l {top_k = 2 : i64, capacity = 4 : i64}
      : (tensor<2x4x3xf32>) -> (tensor<2x4x1xf32>, tensor<2x4x2xi32>, tensor<2x4x2xi32>, tensor<2x3xi32>)
  return
}

// -----

func.func @route_counts(%l: tensor<2x4x3xf32>) {
  // expected-error @+1 {{'xfmr.moe_route' op counts must be 'tensor<2x3xi32>' ([B, E], the logits' batch and experts), but is 'tensor<3x2xi32>'}}
  %g, %e, %s, %n = xfmr.moe_route %l {top_k = 2 : i64, capacity = 4 : i64}
      : (tensor<2x4x3xf32>) -> (tensor<2x4x2xf32>, tensor<2x4x2xi32>, tensor<2x4x2xi32>, tensor<3x2xi32>)
  return
}

// -----

func.func @route_grad_top_k(%dg: tensor<2x4x2xf32>, %l: tensor<2x4x3xf32>, %e: tensor<2x4x2xi32>) {
  // expected-error @+1 {{'xfmr.moe_route_grad' op top_k must be in [1, 3] (the experts), got 0}}
  %dl = xfmr.moe_route_grad %dg, %l, %e {top_k = 0 : i64} : (tensor<2x4x2xf32>, tensor<2x4x3xf32>, tensor<2x4x2xi32>) -> tensor<2x4x3xf32>
  return
}

// -----

func.func @route_grad_result(%dg: tensor<2x4x2xf32>, %l: tensor<2x4x3xf32>, %e: tensor<2x4x2xi32>) {
  // expected-error @+1 {{'xfmr.moe_route_grad' op result must have the type of the logits}}
  %dl = xfmr.moe_route_grad %dg, %l, %e {top_k = 2 : i64} : (tensor<2x4x2xf32>, tensor<2x4x3xf32>, tensor<2x4x2xi32>) -> tensor<2x4x3xbf16>
  return
}

//===----------------------------------------------------------------------===//
// xfmr.moe_dispatch, moe_combine and their gradients
//===----------------------------------------------------------------------===//

// -----

func.func @dispatch_experts_rank(%x: tensor<2x4x8xf32>, %e: tensor<8x2xi32>, %s: tensor<8x2xi32>) {
  // expected-error @+1 {{'xfmr.moe_dispatch' op experts must have rank 3 ([batch, seq, top_k]), but has rank 2}}
  %xe = xfmr.moe_dispatch %x, %e, %s : (tensor<2x4x8xf32>, tensor<8x2xi32>, tensor<8x2xi32>) -> tensor<2x3x4x8xf32>
  return
}

// -----

func.func @dispatch_slots(%x: tensor<2x4x8xf32>, %e: tensor<2x4x2xi32>, %s: tensor<2x4x1xi32>) {
  // expected-error @+1 {{'xfmr.moe_dispatch' op slots must be 'tensor<2x4x2xi32>' ([B, S, k], B and S the tokens', k top_k), but is 'tensor<2x4x1xi32>'}}
  %xe = xfmr.moe_dispatch %x, %e, %s : (tensor<2x4x8xf32>, tensor<2x4x2xi32>, tensor<2x4x1xi32>) -> tensor<2x3x4x8xf32>
  return
}

// -----

func.func @dispatch_buffer_rank(%x: tensor<2x4x8xf32>, %e: tensor<2x4x2xi32>, %s: tensor<2x4x2xi32>) {
  // expected-error @+1 {{'xfmr.moe_dispatch' op result must have rank 4 ([batch, experts, capacity, features]), but has rank 3}}
  %xe = xfmr.moe_dispatch %x, %e, %s : (tensor<2x4x8xf32>, tensor<2x4x2xi32>, tensor<2x4x2xi32>) -> tensor<6x4x8xf32>
  return
}

// -----

func.func @dispatch_buffer_type(%x: tensor<2x4x8xf32>, %e: tensor<2x4x2xi32>, %s: tensor<2x4x2xi32>) {
  // expected-error @+1 {{'xfmr.moe_dispatch' op result element type 'bf16' differs from the tokens' 'f32'}}
  %xe = xfmr.moe_dispatch %x, %e, %s : (tensor<2x4x8xf32>, tensor<2x4x2xi32>, tensor<2x4x2xi32>) -> tensor<2x3x4x8xbf16>
  return
}

// -----

func.func @dispatch_buffer_features(%x: tensor<2x4x8xf32>, %e: tensor<2x4x2xi32>, %s: tensor<2x4x2xi32>) {
  // expected-error @+1 {{'xfmr.moe_dispatch' op result is [2, E, C, 6] but the tokens are [2, S, 8]: batch and features must agree}}
  %xe = xfmr.moe_dispatch %x, %e, %s : (tensor<2x4x8xf32>, tensor<2x4x2xi32>, tensor<2x4x2xi32>) -> tensor<2x3x4x6xf32>
  return
}

// -----

func.func @dispatch_capacity(%x: tensor<2x4x8xf32>, %e: tensor<2x4x2xi32>, %s: tensor<2x4x2xi32>) {
  // expected-error @+1 {{'xfmr.moe_dispatch' op result capacity 5 exceeds the sequence length 4}}
  %xe = xfmr.moe_dispatch %x, %e, %s : (tensor<2x4x8xf32>, tensor<2x4x2xi32>, tensor<2x4x2xi32>) -> tensor<2x3x5x8xf32>
  return
}

// -----

func.func @dispatch_grad_buffer(%dxe: tensor<2x3x4x6xf32>, %e: tensor<2x4x2xi32>, %s: tensor<2x4x2xi32>) {
  // expected-error @+1 {{'xfmr.moe_dispatch_grad' op grad is [2, E, C, 6] but the tokens are [2, S, 8]: batch and features must agree}}
  %dx = xfmr.moe_dispatch_grad %dxe, %e, %s : (tensor<2x3x4x6xf32>, tensor<2x4x2xi32>, tensor<2x4x2xi32>) -> tensor<2x4x8xf32>
  return
}

// -----

func.func @combine_gates(%ye: tensor<2x3x4x8xf32>, %g: tensor<2x4x2xbf16>, %e: tensor<2x4x2xi32>, %s: tensor<2x4x2xi32>) {
  // expected-error @+1 {{'xfmr.moe_combine' op gates must be 'tensor<2x4x2xf32>' ([B, S, k], B and S the tokens', k top_k), but is 'tensor<2x4x2xbf16>'}}
  %y = xfmr.moe_combine %ye, %g, %e, %s : (tensor<2x3x4x8xf32>, tensor<2x4x2xbf16>, tensor<2x4x2xi32>, tensor<2x4x2xi32>) -> tensor<2x4x8xf32>
  return
}

// -----

func.func @combine_grad_result(%dy: tensor<2x4x8xf32>, %ye: tensor<2x3x4x8xf32>, %g: tensor<2x4x2xf32>, %e: tensor<2x4x2xi32>, %s: tensor<2x4x2xi32>) {
  // expected-error @+1 {{'xfmr.moe_combine_grad' op expert_output_grad must have the type of the expert output}}
  %dye, %dg = xfmr.moe_combine_grad %dy, %ye, %g, %e, %s
      : (tensor<2x4x8xf32>, tensor<2x3x4x8xf32>, tensor<2x4x2xf32>, tensor<2x4x2xi32>, tensor<2x4x2xi32>) -> (tensor<2x3x2x8xf32>, tensor<2x4x2xf32>)
  return
}

//===----------------------------------------------------------------------===//
// xfmr.expert_linear and its gradients
//===----------------------------------------------------------------------===//

// -----

func.func @expert_linear_weight_rank(%x: tensor<2x3x4x8xf32>, %w: tensor<6x8xf32>, %n: tensor<2x3xi32>) {
  // expected-error @+1 {{'xfmr.expert_linear' op weight must have rank 3 ([experts, out_features, in_features]), but has rank 2}}
  %h = xfmr.expert_linear %x, %w, %n : (tensor<2x3x4x8xf32>, tensor<6x8xf32>, tensor<2x3xi32>) -> tensor<2x3x4x6xf32>
  return
}

// -----

func.func @expert_linear_weight_type(%x: tensor<2x3x4x8xf32>, %w: tensor<3x6x8xbf16>, %n: tensor<2x3xi32>) {
  // expected-error @+1 {{'xfmr.expert_linear' op weight element type 'bf16' differs from the input's 'f32'}}
  %h = xfmr.expert_linear %x, %w, %n : (tensor<2x3x4x8xf32>, tensor<3x6x8xbf16>, tensor<2x3xi32>) -> tensor<2x3x4x6xf32>
  return
}

// -----

func.func @expert_linear_experts(%x: tensor<2x3x4x8xf32>, %w: tensor<4x6x8xf32>, %n: tensor<2x3xi32>) {
  // expected-error @+1 {{'xfmr.expert_linear' op weight has 4 experts but the input has 3}}
  %h = xfmr.expert_linear %x, %w, %n : (tensor<2x3x4x8xf32>, tensor<4x6x8xf32>, tensor<2x3xi32>) -> tensor<2x3x4x6xf32>
  return
}

// -----

func.func @expert_linear_features(%x: tensor<2x3x4x8xf32>, %w: tensor<3x6x7xf32>, %n: tensor<2x3xi32>) {
  // expected-error @+1 {{'xfmr.expert_linear' op weight dimension 2 is 7 but the input's features are 8}}
  %h = xfmr.expert_linear %x, %w, %n : (tensor<2x3x4x8xf32>, tensor<3x6x7xf32>, tensor<2x3xi32>) -> tensor<2x3x4x6xf32>
  return
}

// -----

func.func @expert_linear_counts(%x: tensor<2x3x4x8xf32>, %w: tensor<3x6x8xf32>, %n: tensor<3x2xi32>) {
  // expected-error @+1 {{'xfmr.expert_linear' op counts must be 'tensor<2x3xi32>' ([B, E], the input's batch and experts), but is 'tensor<3x2xi32>'}}
  %h = xfmr.expert_linear %x, %w, %n : (tensor<2x3x4x8xf32>, tensor<3x6x8xf32>, tensor<3x2xi32>) -> tensor<2x3x4x6xf32>
  return
}

// -----

func.func @expert_linear_result(%x: tensor<2x3x4x8xf32>, %w: tensor<3x6x8xf32>, %n: tensor<2x3xi32>) {
  // expected-error @+1 {{'xfmr.expert_linear' op result must be 'tensor<2x3x4x6xf32>' ([B, E, C, N], N the weight's out_features), but is 'tensor<2x3x4x8xf32>'}}
  %h = xfmr.expert_linear %x, %w, %n : (tensor<2x3x4x8xf32>, tensor<3x6x8xf32>, tensor<2x3xi32>) -> tensor<2x3x4x8xf32>
  return
}

// -----

func.func @expert_linear_grad_input_result(%dy: tensor<2x3x4x6xf32>, %w: tensor<3x6x8xf32>, %n: tensor<2x3xi32>) {
  // expected-error @+1 {{'xfmr.expert_linear_grad_input' op result must be 'tensor<2x3x4x8xf32>' ([B, E, C, K], K the weight's in_features), but is 'tensor<2x3x4x6xf32>'}}
  %dx = xfmr.expert_linear_grad_input %dy, %w, %n : (tensor<2x3x4x6xf32>, tensor<3x6x8xf32>, tensor<2x3xi32>) -> tensor<2x3x4x6xf32>
  return
}

// -----

func.func @expert_linear_grad_weight_input(%dy: tensor<2x3x4x6xf32>, %x: tensor<2x3x4x7xf32>, %n: tensor<2x3xi32>) {
  // expected-error @+1 {{'xfmr.expert_linear_grad_weight' op input must be 'tensor<2x3x4x8xf32>' ([B, E, C, K], K the result's in_features), but is 'tensor<2x3x4x7xf32>'}}
  %dw = xfmr.expert_linear_grad_weight %dy, %x, %n : (tensor<2x3x4x6xf32>, tensor<2x3x4x7xf32>, tensor<2x3xi32>) -> tensor<3x6x8xf32>
  return
}

//===----------------------------------------------------------------------===//
// xfmr.moe_aux_loss and its gradient
//===----------------------------------------------------------------------===//

// -----

func.func @aux_coefficient(%l: tensor<2x4x3xf32>, %e: tensor<2x4x2xi32>) {
  // expected-error @+1 {{'xfmr.moe_aux_loss' op aux_coef must be finite and not negative, got -1}}
  %aux = xfmr.moe_aux_loss %l, %e {aux_coef = -1.0 : f32, z_coef = 0.0 : f32} : (tensor<2x4x3xf32>, tensor<2x4x2xi32>) -> tensor<f32>
  return
}

// -----

func.func @aux_z_coefficient(%l: tensor<2x4x3xf32>, %e: tensor<2x4x2xi32>) {
  // expected-error @+1 {{'xfmr.moe_aux_loss' op z_coef must be finite and not negative, got INF}}
  %aux = xfmr.moe_aux_loss %l, %e {aux_coef = 1.0 : f32, z_coef = 0x7F800000 : f32} : (tensor<2x4x3xf32>, tensor<2x4x2xi32>) -> tensor<f32>
  return
}

// -----

func.func @aux_choices(%l: tensor<2x4x3xf32>, %e: tensor<2x4x4xi32>) {
  // expected-error @+1 {{'xfmr.moe_aux_loss' op experts has 4 choices per token but there are 3 experts}}
  %aux = xfmr.moe_aux_loss %l, %e {aux_coef = 1.0 : f32, z_coef = 0.0 : f32} : (tensor<2x4x3xf32>, tensor<2x4x4xi32>) -> tensor<f32>
  return
}

// -----

func.func @aux_grad_result(%d: tensor<f32>, %l: tensor<2x4x3xf32>, %e: tensor<2x4x2xi32>) {
  // expected-error @+1 {{'xfmr.moe_aux_loss_grad' op result must have the type of the logits}}
  %dl = xfmr.moe_aux_loss_grad %d, %l, %e {aux_coef = 1.0 : f32, z_coef = 0.0 : f32} : (tensor<f32>, tensor<2x4x3xf32>, tensor<2x4x2xi32>) -> tensor<2x4x2xf32>
  return
}

//===----------------------------------------------------------------------===//
// xfmr.moe_expert_load and xfmr.moe_bias_update
//===----------------------------------------------------------------------===//

// -----

func.func @load_counts_rank(%n: tensor<2x3x1xi32>) {
  // expected-error @+1 {{'xfmr.moe_expert_load' op counts must have rank 2 ([batch, experts]), but has rank 3}}
  %l = xfmr.moe_expert_load %n : (tensor<2x3x1xi32>) -> tensor<3xf32>
  return
}

// -----

func.func @load_experts(%n: tensor<2x3xi32>) {
  // expected-error @+1 {{'xfmr.moe_expert_load' op result must be 'tensor<3xf32>' ([E], the counts' experts), but is 'tensor<4xf32>'}}
  %l = xfmr.moe_expert_load %n : (tensor<2x3xi32>) -> tensor<4xf32>
  return
}

// -----

func.func @bias_update_rate(%b: tensor<3xf32>, %l: tensor<3xf32>) {
  // expected-error @+1 {{'xfmr.moe_bias_update' op rate must be finite and not negative, got -1.000000e-03}}
  %n = xfmr.moe_bias_update %b, %l {rate = -1.0e-03 : f32} : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  return
}

// -----

func.func @bias_update_load(%b: tensor<3xf32>, %l: tensor<4xf32>) {
  // expected-error @+1 {{'xfmr.moe_bias_update' op load must have the type of the bias, 'tensor<3xf32>', but is 'tensor<4xf32>'}}
  %n = xfmr.moe_bias_update %b, %l {rate = 1.0e-03 : f32} : (tensor<3xf32>, tensor<4xf32>) -> tensor<3xf32>
  return
}

// -----

func.func @bias_update_result(%b: tensor<3xf32>, %l: tensor<3xf32>) {
  // expected-error @+1 {{'xfmr.moe_bias_update' op result must have the type of the bias, 'tensor<3xf32>', but is 'tensor<4xf32>'}}
  %n = xfmr.moe_bias_update %b, %l {rate = 1.0e-03 : f32} : (tensor<3xf32>, tensor<3xf32>) -> tensor<4xf32>
  return
}
