// RUN: partition-opt %s -split-input-file | partition-opt -split-input-file | FileCheck %s
// RUN: partition-opt %s -split-input-file --mlir-print-op-generic | partition-opt -split-input-file | FileCheck %s

// Round trip of the ring attention ops (context parallelism), in the custom
// and in the generic form: B = 2, H = 4 query heads and Hkv = 2 key-value
// heads of D = 8, Tq = 8 queries over a block of Tk = 4 keys.

// CHECK-LABEL: func.func @attention_block
// CHECK-SAME:    (%[[Q:.*]]: tensor<2x8x32xf32>, %[[K:.*]]: tensor<2x4x16xf32>, %[[V:.*]]: tensor<2x4x16xf32>, %[[QP:.*]]: tensor<8xi32>, %[[KP:.*]]: tensor<4xi32>)
func.func @attention_block(%q: tensor<2x8x32xf32>, %k: tensor<2x4x16xf32>, %v: tensor<2x4x16xf32>,
                           %qpos: tensor<8xi32>, %kpos: tensor<4xi32>) -> (tensor<2x8x32xf32>, tensor<2x4x8xf32>) {
  // CHECK: %[[O:.*]], %[[L:.*]] = xfmr.attention_block %[[Q]], %[[K]], %[[V]], %[[QP]], %[[KP]] {num_heads = 4 : i64, num_kv_heads = 2 : i64, rope_theta = 1.000000e+04 : f32} : (tensor<2x8x32xf32>, tensor<2x4x16xf32>, tensor<2x4x16xf32>, tensor<8xi32>, tensor<4xi32>) -> (tensor<2x8x32xf32>, tensor<2x4x8xf32>)
  %o, %lse = xfmr.attention_block %q, %k, %v, %qpos, %kpos {num_heads = 4 : i64, num_kv_heads = 2 : i64, rope_theta = 1.0e+04 : f32}
      : (tensor<2x8x32xf32>, tensor<2x4x16xf32>, tensor<2x4x16xf32>, tensor<8xi32>, tensor<4xi32>) -> (tensor<2x8x32xf32>, tensor<2x4x8xf32>)
  // CHECK: return %[[O]], %[[L]]
  return %o, %lse : tensor<2x8x32xf32>, tensor<2x4x8xf32>
}

// -----

// Every attribute of xfmr.attention: scaled RoPE and a sliding window; bf16
// activations with an f32 log-sum-exp.
// CHECK-LABEL: func.func @attention_block_scaled_window_bf16
func.func @attention_block_scaled_window_bf16(%q: tensor<2x8x32xbf16>, %k: tensor<2x4x16xbf16>, %v: tensor<2x4x16xbf16>,
                                              %qpos: tensor<8xi32>, %kpos: tensor<4xi32>) -> (tensor<2x8x32xbf16>, tensor<2x4x8xf32>) {
  // CHECK: xfmr.attention_block {{.*}} {num_heads = 4 : i64, num_kv_heads = 2 : i64, rope_scaling = "llama3", rope_scaling_factors = array<f64: 3.200000e+01, 1.000000e+00, 4.000000e+00, 8.192000e+03>, rope_theta = 5.000000e+05 : f32, sliding_window = 16 : i64} : (tensor<2x8x32xbf16>, tensor<2x4x16xbf16>, tensor<2x4x16xbf16>, tensor<8xi32>, tensor<4xi32>) -> (tensor<2x8x32xbf16>, tensor<2x4x8xf32>)
  %o, %lse = xfmr.attention_block %q, %k, %v, %qpos, %kpos {num_heads = 4 : i64, num_kv_heads = 2 : i64,
      rope_theta = 5.0e+05 : f32, rope_scaling = "llama3", rope_scaling_factors = array<f64: 32.0, 1.0, 4.0, 8192.0>,
      sliding_window = 16 : i64}
      : (tensor<2x8x32xbf16>, tensor<2x4x16xbf16>, tensor<2x4x16xbf16>, tensor<8xi32>, tensor<4xi32>) -> (tensor<2x8x32xbf16>, tensor<2x4x8xf32>)
  return %o, %lse : tensor<2x8x32xbf16>, tensor<2x4x8xf32>
}

// -----

// CHECK-LABEL: func.func @attention_block_full
func.func @attention_block_full(%q: tensor<2x8x32xf32>, %k: tensor<2x4x32xf32>, %v: tensor<2x4x32xf32>,
                                %qpos: tensor<8xi32>, %kpos: tensor<4xi32>) -> (tensor<2x8x32xf32>, tensor<2x4x8xf32>) {
  // CHECK: xfmr.attention_block {{.*}} {causal = false, num_heads = 4 : i64, num_kv_heads = 4 : i64}
  %o, %lse = xfmr.attention_block %q, %k, %v, %qpos, %kpos {num_heads = 4 : i64, num_kv_heads = 4 : i64, causal = false}
      : (tensor<2x8x32xf32>, tensor<2x4x32xf32>, tensor<2x4x32xf32>, tensor<8xi32>, tensor<4xi32>) -> (tensor<2x8x32xf32>, tensor<2x4x8xf32>)
  return %o, %lse : tensor<2x8x32xf32>, tensor<2x4x8xf32>
}

// -----

// CHECK-LABEL: func.func @attention_merge
// CHECK-SAME:    (%[[OA:.*]]: tensor<2x8x32xf32>, %[[LA:.*]]: tensor<2x4x8xf32>, %[[OB:.*]]: tensor<2x8x32xf32>, %[[LB:.*]]: tensor<2x4x8xf32>)
func.func @attention_merge(%oa: tensor<2x8x32xf32>, %la: tensor<2x4x8xf32>, %ob: tensor<2x8x32xf32>, %lb: tensor<2x4x8xf32>)
    -> (tensor<2x8x32xf32>, tensor<2x4x8xf32>) {
  // CHECK: %[[M:.*]], %[[ML:.*]] = xfmr.attention_merge %[[OA]], %[[LA]], %[[OB]], %[[LB]] : (tensor<2x8x32xf32>, tensor<2x4x8xf32>, tensor<2x8x32xf32>, tensor<2x4x8xf32>) -> (tensor<2x8x32xf32>, tensor<2x4x8xf32>)
  %o, %lse = xfmr.attention_merge %oa, %la, %ob, %lb
      : (tensor<2x8x32xf32>, tensor<2x4x8xf32>, tensor<2x8x32xf32>, tensor<2x4x8xf32>) -> (tensor<2x8x32xf32>, tensor<2x4x8xf32>)
  // CHECK: return %[[M]], %[[ML]]
  return %o, %lse : tensor<2x8x32xf32>, tensor<2x4x8xf32>
}

// -----

// CHECK-LABEL: func.func @attention_block_grad
// CHECK-SAME:    (%[[DO:.*]]: tensor<2x8x32xf32>, %[[Q:.*]]: tensor<2x8x32xf32>, %[[K:.*]]: tensor<2x4x16xf32>, %[[V:.*]]: tensor<2x4x16xf32>, %[[QP:.*]]: tensor<8xi32>, %[[KP:.*]]: tensor<4xi32>, %[[O:.*]]: tensor<2x8x32xf32>, %[[L:.*]]: tensor<2x4x8xf32>)
func.func @attention_block_grad(%do: tensor<2x8x32xf32>, %q: tensor<2x8x32xf32>, %k: tensor<2x4x16xf32>, %v: tensor<2x4x16xf32>,
                                %qpos: tensor<8xi32>, %kpos: tensor<4xi32>, %o: tensor<2x8x32xf32>, %lse: tensor<2x4x8xf32>)
    -> (tensor<2x8x32xf32>, tensor<2x4x16xf32>, tensor<2x4x16xf32>) {
  // CHECK: %[[GQ:.*]], %[[GK:.*]], %[[GV:.*]] = xfmr.attention_block_grad %[[DO]], %[[Q]], %[[K]], %[[V]], %[[QP]], %[[KP]], %[[O]], %[[L]] {num_heads = 4 : i64, num_kv_heads = 2 : i64, rope_theta = 1.000000e+04 : f32, sliding_window = 3 : i64} : (tensor<2x8x32xf32>, tensor<2x8x32xf32>, tensor<2x4x16xf32>, tensor<2x4x16xf32>, tensor<8xi32>, tensor<4xi32>, tensor<2x8x32xf32>, tensor<2x4x8xf32>) -> (tensor<2x8x32xf32>, tensor<2x4x16xf32>, tensor<2x4x16xf32>)
  %dq, %dk, %dv = xfmr.attention_block_grad %do, %q, %k, %v, %qpos, %kpos, %o, %lse
      {num_heads = 4 : i64, num_kv_heads = 2 : i64, rope_theta = 1.0e+04 : f32, sliding_window = 3 : i64}
      : (tensor<2x8x32xf32>, tensor<2x8x32xf32>, tensor<2x4x16xf32>, tensor<2x4x16xf32>, tensor<8xi32>, tensor<4xi32>, tensor<2x8x32xf32>, tensor<2x4x8xf32>)
      -> (tensor<2x8x32xf32>, tensor<2x4x16xf32>, tensor<2x4x16xf32>)
  // CHECK: return %[[GQ]], %[[GK]], %[[GV]]
  return %dq, %dk, %dv : tensor<2x8x32xf32>, tensor<2x4x16xf32>, tensor<2x4x16xf32>
}
