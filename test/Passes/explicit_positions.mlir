// RUN: partition-opt %s -split-input-file --xfmr-explicit-positions="chunks=4" | FileCheck %s
// RUN: partition-opt %s -split-input-file --xfmr-explicit-positions="chunks=4" --xfmr-explicit-positions="chunks=2" | FileCheck %s --check-prefix=AGAIN
// RUN: partition-opt %S/Inputs/explicit_positions_forward.mlir --xfmr-train-step="eval=true" --xfmr-explicit-positions="chunks=2" | FileCheck %s --check-prefix=STEP

// One xfmr.sequence_positions per sequence length at the function's entry;
// attention gets it as query and key positions, the position embedding as
// its positions; tokens and targets are marked with the layout's chunks.

// CHECK-LABEL: func.func @forward
// CHECK-SAME: %{{.*}}: tensor<2x8xi32> {xfmr.input = "tokens", xfmr.sequence_chunks = 4 : i64}
// CHECK-SAME: %{{.*}}: tensor<2x8xi32> {xfmr.input = "targets", xfmr.sequence_chunks = 4 : i64}
// CHECK-NEXT: %[[POS:.*]] = xfmr.sequence_positions {chunks = 4 : i64, length = 8 : i64} : () -> tensor<8xi32>
// CHECK-NOT: xfmr.sequence_positions
// CHECK: xfmr.position_embedding %{{.*}}, %{{.*}} positions %[[POS]]
// CHECK: xfmr.attention %{{.*}}, %{{.*}}, %{{.*}} positions %[[POS]], %[[POS]]
// After autodiff: the backward ops get the same positions, and so does each
// step entry (@eval_step has its own). The forward is
// Inputs/explicit_positions_forward.mlir, the function below.
// STEP-LABEL: func.func @train_step
// STEP-SAME: {xfmr.input = "tokens", xfmr.sequence_chunks = 2 : i64}
// STEP: %[[POS:.*]] = xfmr.sequence_positions {chunks = 2 : i64, length = 8 : i64}
// STEP-NOT: xfmr.sequence_positions
// STEP: xfmr.position_embedding %{{.*}}, %{{.*}} positions %[[POS]]
// STEP: xfmr.attention %{{.*}}, %{{.*}}, %{{.*}} positions %[[POS]], %[[POS]]
// STEP: xfmr.attention_grad %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} positions %[[POS]], %[[POS]]
// STEP: xfmr.position_embedding_grad %{{.*}} positions %[[POS]]
// STEP-LABEL: func.func @eval_step
// STEP: xfmr.sequence_positions {chunks = 2 : i64, length = 8 : i64}
// A second run changes nothing: every op already has positions.
// AGAIN-LABEL: func.func @forward
// AGAIN: xfmr.sequence_positions {chunks = 4 : i64, length = 8 : i64}
// AGAIN-NOT: chunks = 2
func.func @forward(%wte: tensor<16x8xf32> {xfmr.param = "wte"},
                   %wpe: tensor<8x8xf32> {xfmr.param = "wpe"},
                   %tokens: tensor<2x8xi32> {xfmr.input = "tokens"},
                   %targets: tensor<2x8xi32> {xfmr.input = "targets"}) -> tensor<f32> {
  %x = xfmr.embedding %tokens, %wte : (tensor<2x8xi32>, tensor<16x8xf32>) -> tensor<2x8x8xf32>
  %h = xfmr.position_embedding %x, %wpe : (tensor<2x8x8xf32>, tensor<8x8xf32>) -> tensor<2x8x8xf32>
  %a = xfmr.attention %h, %h, %h {num_heads = 2 : i64, num_kv_heads = 2 : i64, rope_theta = 1.0e+04 : f32}
      : (tensor<2x8x8xf32>, tensor<2x8x8xf32>, tensor<2x8x8xf32>) -> tensor<2x8x8xf32>
  %l = xfmr.linear %a, %wte : (tensor<2x8x8xf32>, tensor<16x8xf32>) -> tensor<2x8x16xf32>
  %loss = xfmr.softmax_cross_entropy %l, %targets : (tensor<2x8x16xf32>, tensor<2x8xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// Two sequence lengths: one positions value each. An op that already has
// positions keeps them.

// CHECK-LABEL: func.func @lengths
// CHECK-DAG: %[[P8:.*]] = xfmr.sequence_positions {chunks = 4 : i64, length = 8 : i64}
// CHECK-DAG: %[[P4:.*]] = xfmr.sequence_positions {chunks = 4 : i64, length = 4 : i64}
// CHECK: xfmr.attention %{{.*}} positions %[[P8]], %[[P8]]
// CHECK: xfmr.attention %{{.*}} positions %[[P4]], %[[P4]]
// CHECK: xfmr.attention %{{.*}} positions %arg2, %arg3
func.func @lengths(%a: tensor<1x8x8xf32>, %b: tensor<1x4x8xf32>, %qp: tensor<4xi32>, %kp: tensor<8xi32>)
    -> (tensor<1x8x8xf32>, tensor<1x4x8xf32>, tensor<1x4x8xf32>) {
  %x = xfmr.attention %a, %a, %a {num_heads = 2 : i64, num_kv_heads = 2 : i64}
      : (tensor<1x8x8xf32>, tensor<1x8x8xf32>, tensor<1x8x8xf32>) -> tensor<1x8x8xf32>
  %y = xfmr.attention %b, %b, %b {num_heads = 2 : i64, num_kv_heads = 2 : i64}
      : (tensor<1x4x8xf32>, tensor<1x4x8xf32>, tensor<1x4x8xf32>) -> tensor<1x4x8xf32>
  %z = xfmr.attention %b, %a, %a positions %qp, %kp {num_heads = 2 : i64, num_kv_heads = 2 : i64}
      : (tensor<1x4x8xf32>, tensor<1x8x8xf32>, tensor<1x8x8xf32>, tensor<4xi32>, tensor<8xi32>) -> tensor<1x4x8xf32>
  return %x, %y, %z : tensor<1x8x8xf32>, tensor<1x4x8xf32>, tensor<1x4x8xf32>
}

// -----

// A function without position-dependent ops is left alone (no positions,
// no marks).

// CHECK-LABEL: func.func @no_positions
// CHECK-SAME: (%{{.*}}: tensor<2x8xi32> {xfmr.input = "tokens"})
// CHECK-NOT: xfmr.sequence_positions
func.func @no_positions(%tokens: tensor<2x8xi32> {xfmr.input = "tokens"}) -> tensor<2x8xi32> {
  return %tokens : tensor<2x8xi32>
}
