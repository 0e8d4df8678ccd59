// RUN: partition-opt %s -split-input-file --xfmr-mixed-precision | FileCheck %s
// RUN: partition-opt %s -split-input-file --xfmr-mixed-precision --xfmr-train-step | FileCheck %s --check-prefix=STEP

// Every use of a parameter reads a bf16 cast of it, placed before its user;
// activations and logits become bf16; the loss stays f32. A token embedding
// is the exception: it looks its rows up in the fp32 table and casts the
// rows (the same values, without casting the whole table).

// CHECK-LABEL: func.func @forward
// CHECK-SAME: (%[[WTE:[^:]*]]: tensor<16x8xf32> {xfmr.param = "wte"}, %[[LN:[^:]*]]: tensor<8xf32> {xfmr.param = "ln"}, %[[TOK:[^:]*]]: tensor<2x4xi32> {xfmr.input = "tokens"}, %[[TGT:[^:]*]]: tensor<2x4xi32> {xfmr.input = "targets"})
// CHECK-NEXT: %[[ROWS:.*]] = xfmr.embedding %[[TOK]], %[[WTE]] : (tensor<2x4xi32>, tensor<16x8xf32>) -> tensor<2x4x8xf32>
// CHECK-NEXT: %[[X:.*]] = xfmr.cast %[[ROWS]] : (tensor<2x4x8xf32>) -> tensor<2x4x8xbf16>
// CHECK-NEXT: %[[G:.*]] = xfmr.cast %[[LN]] : (tensor<8xf32>) -> tensor<8xbf16>
// CHECK-NEXT: %[[N:.*]] = xfmr.rmsnorm %[[X]], %[[G]] {{.*}}: (tensor<2x4x8xbf16>, tensor<8xbf16>) -> tensor<2x4x8xbf16>
// The tied LM head casts the table: its two gradients meet in fp32.
// CHECK-NEXT: %[[T1:.*]] = xfmr.cast %[[WTE]] : (tensor<16x8xf32>) -> tensor<16x8xbf16>
// CHECK-NEXT: %[[L:.*]] = xfmr.linear %[[N]], %[[T1]] : (tensor<2x4x8xbf16>, tensor<16x8xbf16>) -> tensor<2x4x16xbf16>
// CHECK-NEXT: %[[LOSS:.*]] = xfmr.softmax_cross_entropy %[[L]], %[[TGT]] : (tensor<2x4x16xbf16>, tensor<2x4xi32>) -> tensor<f32>
// CHECK-NEXT: return %[[LOSS]] : tensor<f32>

// After autodiff the backward pass is bf16 and each cast's backward casts
// the gradient back: AdamW sees fp32 gradients of the fp32 parameters. The
// embedding's rows' gradients are cast back and scattered in fp32.
// STEP-LABEL: func.func @train_step
// STEP: %[[DW1:.*]] = xfmr.cast %{{.*}} : (tensor<16x8xbf16>) -> tensor<16x8xf32>
// STEP: %[[DROWS:.*]] = xfmr.cast %{{.*}} : (tensor<2x4x8xbf16>) -> tensor<2x4x8xf32>
// STEP: %[[DW0:.*]] = xfmr.embedding_grad %[[DROWS]], %{{.*}} : (tensor<2x4x8xf32>, tensor<2x4xi32>) -> tensor<16x8xf32>
// STEP: %[[DW:.*]] = xfmr.add %[[DW1]], %[[DW0]] : (tensor<16x8xf32>, tensor<16x8xf32>) -> tensor<16x8xf32>
// STEP: xfmr.adamw %{{.*}}, %[[DW]], {{.*}} : (tensor<16x8xf32>, tensor<16x8xf32>, tensor<16x8xf32>, tensor<16x8xf32>, tensor<i32>, tensor<f32>)
func.func @forward(%wte: tensor<16x8xf32> {xfmr.param = "wte"},
                   %ln: tensor<8xf32> {xfmr.param = "ln"},
                   %tokens: tensor<2x4xi32> {xfmr.input = "tokens"},
                   %targets: tensor<2x4xi32> {xfmr.input = "targets"}) -> tensor<f32> {
  %x = xfmr.embedding %tokens, %wte : (tensor<2x4xi32>, tensor<16x8xf32>) -> tensor<2x4x8xf32>
  %n = xfmr.rmsnorm %x, %ln : (tensor<2x4x8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
  %l = xfmr.linear %n, %wte : (tensor<2x4x8xf32>, tensor<16x8xf32>) -> tensor<2x4x16xf32>
  %loss = xfmr.softmax_cross_entropy %l, %targets : (tensor<2x4x16xf32>, tensor<2x4xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// Functions without parameters (helpers, already-built steps) are left
// alone: only the forward function is converted.
// CHECK-LABEL: func.func @helper
// CHECK: xfmr.gelu %{{.*}} : (tensor<4xf32>) -> tensor<4xf32>
func.func @helper(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = xfmr.gelu %x : (tensor<4xf32>) -> tensor<4xf32>
  return %y : tensor<4xf32>
}
// CHECK-LABEL: func.func @forward
// CHECK: xfmr.gelu %{{.*}} : (tensor<2x4x8xbf16>) -> tensor<2x4x8xbf16>
func.func @forward(%w: tensor<8x8xf32> {xfmr.param = "w"},
                   %tokens: tensor<2x4xi32> {xfmr.input = "tokens"},
                   %targets: tensor<2x4xi32> {xfmr.input = "targets"}) -> tensor<f32> {
  %x = xfmr.embedding %tokens, %w : (tensor<2x4xi32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
  %g = xfmr.gelu %x : (tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %loss = xfmr.softmax_cross_entropy %g, %targets : (tensor<2x4x8xf32>, tensor<2x4xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}
