// Parameter, token and matmul-FLOP counts. Expected values are computed by
// hand from the shapes (see the formulas below); a training step counts its
// backward ops as they are, a forward function predicts 3x its own FLOPs, and
// the two agree on whole models.

// gpt2-tiny: L=2, C=64, V=256, T=64, B=4, FFN=4C; M = B*T = 256 tokens.
//   parameters = V*C + T*C + L*(12*C*C + 13*C) + 2*C          = 120576
//   forward    = L*(2*M*12*C*C + 4*B*T*T*C) + 2*M*C*V         = 67108864
//   step       = 3 * forward                                  = 201326592
// RUN: partition-gen --preset gpt2-tiny -o %t.gpt2.mlir
// RUN: partition-opt %t.gpt2.mlir --xfmr-stats -o %t.stats.mlir | FileCheck %s --check-prefix=GPT2-FWD
// RUN: partition-opt %t.gpt2.mlir --xfmr-train-step --xfmr-stats -o %t.step.mlir | FileCheck %s --check-prefix=GPT2-STEP
// GPT2-FWD:       function: forward
// GPT2-FWD-NEXT:  parameters: 120576
// GPT2-FWD-NEXT:  tokens_per_step: 256
// GPT2-FWD-NEXT:  flops_per_step: 201326592
// GPT2-FWD-NOT:   function:
// GPT2-STEP:      function: train_step
// GPT2-STEP-NEXT: parameters: 120576
// GPT2-STEP-NEXT: tokens_per_step: 256
// GPT2-STEP-NEXT: flops_per_step: 201326592
// GPT2-STEP-NOT:  function:

// --xfmr-stats leaves the IR unchanged (and prints it nowhere but -o).
// RUN: partition-opt %t.gpt2.mlir -o %t.plain.mlir
// RUN: diff %t.plain.mlir %t.stats.mlir
// RUN: partition-opt %t.gpt2.mlir --xfmr-train-step -o %t.plain-step.mlir
// RUN: diff %t.plain-step.mlir %t.step.mlir
// RUN: partition-opt %t.gpt2.mlir --xfmr-stats | FileCheck %s --check-prefix=IR
// IR:      function: forward
// IR:      module {
// IR-NEXT:   func.func @forward(

// llama-tiny: L=2, C=64, H=4, Hkv=2 (D=16), FFN=176, V=256, T=64, B=4.
//   parameters = 2*V*C + L*(2*C*C + 2*C*Hkv*D + 3*C*FFN + 2*C) + C = 125248
//   forward    = L*(2*M*(2*C*C + 2*C*Hkv*D + 3*C*FFN) + 4*B*T*T*C)
//                + 2*M*C*V                                       = 63963136
//   step       = 3 * forward                                     = 191889408
// RUN: partition-gen --preset llama-tiny | partition-opt --xfmr-stats -o /dev/null | FileCheck %s --check-prefix=LLAMA
// RUN: partition-gen --preset llama-tiny | partition-opt --xfmr-train-step --xfmr-stats -o /dev/null | FileCheck %s --check-prefix=LLAMA
// LLAMA:      parameters: 125248
// LLAMA-NEXT: tokens_per_step: 256
// LLAMA-NEXT: flops_per_step: 191889408

// With gradient accumulation the step processes k micro-batches: k times the
// tokens and FLOPs of the forward function (which describes one micro-batch).
// RUN: partition-gen --preset gpt2-tiny | partition-opt --xfmr-train-step="microbatches=4" --xfmr-stats -o /dev/null | FileCheck %s --check-prefix=ACCUM
// ACCUM:      function: train_step
// ACCUM-NEXT: parameters: 120576
// ACCUM-NEXT: tokens_per_step: 1024
// ACCUM-NEXT: flops_per_step: 805306368

// Published parameter counts of the full-size presets (GPT-2 124M with its
// tied head; Llama 2 7B and 70B).
// RUN: partition-gen --preset gpt2-124m | partition-opt --xfmr-stats -o /dev/null | FileCheck %s --check-prefix=GPT2-124M
// GPT2-124M:      parameters: 124439808
// GPT2-124M-NEXT: tokens_per_step: 8192
// GPT2-124M-NEXT: flops_per_step: 6999559372800
// RUN: partition-gen --preset llama-7b | partition-opt --xfmr-stats -o /dev/null | FileCheck %s --check-prefix=LLAMA-7B
// LLAMA-7B:      parameters: 6738415616
// LLAMA-7B-NEXT: tokens_per_step: 4096
// LLAMA-7B-NEXT: flops_per_step: 188763812659200
// RUN: partition-gen --preset llama-70b | partition-opt --xfmr-stats -o /dev/null | FileCheck %s --check-prefix=LLAMA-70B
// LLAMA-70B:      parameters: 68976648192
// LLAMA-70B-NEXT: tokens_per_step: 4096
// LLAMA-70B-NEXT: flops_per_step: 1820636636774400

// Hand-written functions, one per split.
// RUN: partition-opt %s --split-input-file --xfmr-stats -verify-diagnostics -o /dev/null | FileCheck %s

// A single linear: 2*M*K*N = 2*6*8*4 = 384 forward FLOPs, predicted step
// 3*384 = 1152. A function without parameters is not reported.
// CHECK-NOT:  function: helper
// CHECK:      function: single
// CHECK-NEXT: parameters: 36
// CHECK-NEXT: tokens_per_step: 6
// CHECK-NEXT: flops_per_step: 1152
// CHECK-NOT:  function: helper

func.func @helper(%x: tensor<4xf32>) -> tensor<4xf32> {
  return %x : tensor<4xf32>
}

func.func @single(%w: tensor<4x8xf32> {xfmr.param = "w"},
                  %b: tensor<4xf32> {xfmr.param = "b"},
                  %x: tensor<2x3x8xf32>,
                  %tokens: tensor<2x3xi32> {xfmr.input = "tokens"},
                  %targets: tensor<2x3xi32> {xfmr.input = "targets"}) -> tensor<f32> {
  %y = xfmr.linear %x, %w, %b : (tensor<2x3x8xf32>, tensor<4x8xf32>, tensor<4xf32>) -> tensor<2x3x4xf32>
  %loss = xfmr.softmax_cross_entropy %y, %targets : (tensor<2x3x4xf32>, tensor<2x3xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// A training step counts the ops it has: forward linear (384), input
// gradient (384) and weight gradient (384); attention (4*B*T*T*F =
// 4*2*3*3*8 = 576) and its gradient (1152). Moments, step and lr are not
// counted as parameters. Every function with parameters is reported.
// CHECK:      function: step
// CHECK-NEXT: parameters: 32
// CHECK-NEXT: tokens_per_step: 6
// CHECK-NEXT: flops_per_step: 2880
// CHECK:      function: another
// CHECK-NEXT: parameters: 1
// CHECK-NEXT: tokens_per_step: 10
// CHECK-NEXT: flops_per_step: 0

func.func @step(%w: tensor<4x8xf32> {xfmr.param = "w"},
                %m: tensor<4x8xf32> {xfmr.moment1 = "w"},
                %v: tensor<4x8xf32> {xfmr.moment2 = "w"},
                %t: tensor<i32> {xfmr.input = "step"},
                %lr: tensor<f32> {xfmr.input = "lr"},
                %tokens: tensor<2x3xi32> {xfmr.input = "tokens"},
                %x: tensor<2x3x8xf32>, %dy: tensor<2x3x4xf32>,
                %q: tensor<2x3x8xf32>, %do: tensor<2x3x8xf32>)
    attributes {xfmr.train_step = {}} {
  %y = xfmr.linear %x, %w : (tensor<2x3x8xf32>, tensor<4x8xf32>) -> tensor<2x3x4xf32>
  %dx = xfmr.linear_grad_input %dy, %w : (tensor<2x3x4xf32>, tensor<4x8xf32>) -> tensor<2x3x8xf32>
  %dw = xfmr.linear_grad_weight %dy, %x : (tensor<2x3x4xf32>, tensor<2x3x8xf32>) -> tensor<4x8xf32>
  %o = xfmr.attention %q, %q, %q {num_heads = 2 : i64, num_kv_heads = 2 : i64} : (tensor<2x3x8xf32>, tensor<2x3x8xf32>, tensor<2x3x8xf32>) -> tensor<2x3x8xf32>
  %dq, %dk, %dv = xfmr.attention_grad %do, %q, %q, %q {num_heads = 2 : i64, num_kv_heads = 2 : i64} : (tensor<2x3x8xf32>, tensor<2x3x8xf32>, tensor<2x3x8xf32>, tensor<2x3x8xf32>) -> (tensor<2x3x8xf32>, tensor<2x3x8xf32>, tensor<2x3x8xf32>)
  return
}

func.func @another(%s: tensor<f32> {xfmr.param = "s"},
                   %tokens: tensor<2x5xi32> {xfmr.input = "tokens"}) {
  return
}

// -----

// Ring attention counts each block's products at full Tq x Tk, as
// attention: the block (4*B*Tq*Tk*F = 4*2*3*2*8 = 384) and its gradient
// (768); the merge multiplies no matrices.
// CHECK:      function: ring
// CHECK-NEXT: parameters: 64
// CHECK-NEXT: tokens_per_step: 6
// CHECK-NEXT: flops_per_step: 1152

func.func @ring(%q: tensor<2x3x8xf32> {xfmr.param = "q"},
                %k: tensor<2x2x4xf32> {xfmr.param = "k"},
                %tokens: tensor<2x3xi32> {xfmr.input = "tokens"},
                %qpos: tensor<3xi32>, %kpos: tensor<2xi32>)
    attributes {xfmr.train_step = {}} {
  %o, %l = xfmr.attention_block %q, %k, %k, %qpos, %kpos {num_heads = 2 : i64, num_kv_heads = 1 : i64}
      : (tensor<2x3x8xf32>, tensor<2x2x4xf32>, tensor<2x2x4xf32>, tensor<3xi32>, tensor<2xi32>) -> (tensor<2x3x8xf32>, tensor<2x2x3xf32>)
  %m, %ml = xfmr.attention_merge %o, %l, %o, %l
      : (tensor<2x3x8xf32>, tensor<2x2x3xf32>, tensor<2x3x8xf32>, tensor<2x2x3xf32>) -> (tensor<2x3x8xf32>, tensor<2x2x3xf32>)
  %dq, %dk, %dv = xfmr.attention_block_grad %m, %q, %k, %k, %qpos, %kpos, %m, %ml {num_heads = 2 : i64, num_kv_heads = 1 : i64}
      : (tensor<2x3x8xf32>, tensor<2x3x8xf32>, tensor<2x2x4xf32>, tensor<2x2x4xf32>, tensor<3xi32>, tensor<2xi32>, tensor<2x3x8xf32>, tensor<2x2x3xf32>)
      -> (tensor<2x3x8xf32>, tensor<2x2x4xf32>, tensor<2x2x4xf32>)
  return
}

// -----

// expected-error@+1 {{has no argument with xfmr.input = "tokens"}}
func.func @no_tokens(%w: tensor<4x8xf32> {xfmr.param = "w"}) {
  return
}

// -----

// expected-error@+1 {{argument #0 (a parameter) must have a static shape to be counted, but is 'tensor<?x8xf32>'}}
func.func @dynamic_param(%w: tensor<?x8xf32> {xfmr.param = "w"},
                         %tokens: tensor<2x3xi32> {xfmr.input = "tokens"}) {
  return
}

// -----

// expected-error@+1 {{argument #1 (the tokens) must have a static shape to be counted, but is 'i32'}}
func.func @scalar_tokens(%w: tensor<4x8xf32> {xfmr.param = "w"},
                         %tokens: i32 {xfmr.input = "tokens"}) {
  return
}
