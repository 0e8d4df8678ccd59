// RUN: partition-opt %s --lower-to-rt | FileCheck %s
// The output verifies and is stable under a round trip.
// RUN: partition-opt %s --lower-to-rt | partition-opt --verify-roundtrip > /dev/null

// --lower-to-rt on the ring attention ops: each becomes the kernel of its
// name (runtime/program/Kernels.def), operands as inputs in order (the i32
// positions among them; splat constants here, filled), results as
// outputs. attention_block and its
// gradient always take the attention_scaled parameters: ints = [heads,
// kv_heads, causal, window], floats = [theta, scaling kind, factor, three
// more]; the window is kept whatever the block's length, since positions,
// not the block, bound it.

// CHECK-LABEL: func.func @ring
// CHECK: rt.kernel "attention_block" ins({{.*}} : memref<2x8x16xf32>, memref<2x4x8xf32>, memref<2x4x8xf32>, memref<8xi32>, memref<4xi32>) outs({{.*}} : memref<2x8x16xf32>, memref<2x2x8xf32>) ints = [2, 1, 1, 0] floats = [1.000000e+04, 0.000000e+00, 1.000000e+00, 0.000000e+00, 0.000000e+00, 0.000000e+00]{{$}}
// CHECK: rt.kernel "attention_block" {{.*}} ints = [2, 1, 1, 16] floats = [5.000000e+05, 2.000000e+00, 3.200000e+01, 1.000000e+00, 4.000000e+00, 8.192000e+03]{{$}}
// CHECK: rt.kernel "attention_merge" ins({{.*}} : memref<2x8x16xf32>, memref<2x2x8xf32>, memref<2x8x16xf32>, memref<2x2x8xf32>) outs({{.*}} : memref<2x8x16xf32>, memref<2x2x8xf32>){{$}}
// CHECK: rt.kernel "attention_block_grad" ins({{.*}} : memref<2x8x16xf32>, memref<2x8x16xf32>, memref<2x4x8xf32>, memref<2x4x8xf32>, memref<8xi32>, memref<4xi32>, memref<2x8x16xf32>, memref<2x2x8xf32>) outs({{.*}} : memref<2x8x16xf32>, memref<2x4x8xf32>, memref<2x4x8xf32>) ints = [2, 1, 0, 0] floats = [0.000000e+00, 0.000000e+00, 1.000000e+00, 0.000000e+00, 0.000000e+00, 0.000000e+00]{{$}}
func.func @ring(%q: tensor<2x8x16xf32> {xfmr.param = "q"}, %k: tensor<2x4x8xf32> {xfmr.param = "k"},
                %v: tensor<2x4x8xf32> {xfmr.param = "v"}, %do: tensor<2x8x16xf32> {xfmr.param = "do"})
    -> (tensor<f32> {xfmr.output = "loss"}) attributes {xfmr.train_step = {}} {
  %qpos = arith.constant dense<7> : tensor<8xi32>
  %kpos = arith.constant dense<3> : tensor<4xi32>
  %o1, %l1 = xfmr.attention_block %q, %k, %v, %qpos, %kpos {num_heads = 2 : i64, num_kv_heads = 1 : i64, rope_theta = 1.0e+04 : f32}
      : (tensor<2x8x16xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<8xi32>, tensor<4xi32>) -> (tensor<2x8x16xf32>, tensor<2x2x8xf32>)
  %o2, %l2 = xfmr.attention_block %q, %k, %v, %qpos, %kpos {num_heads = 2 : i64, num_kv_heads = 1 : i64,
      rope_theta = 5.0e+05 : f32, rope_scaling = "llama3", rope_scaling_factors = array<f64: 32.0, 1.0, 4.0, 8192.0>,
      sliding_window = 16 : i64}
      : (tensor<2x8x16xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<8xi32>, tensor<4xi32>) -> (tensor<2x8x16xf32>, tensor<2x2x8xf32>)
  %o, %l = xfmr.attention_merge %o1, %l1, %o2, %l2
      : (tensor<2x8x16xf32>, tensor<2x2x8xf32>, tensor<2x8x16xf32>, tensor<2x2x8xf32>) -> (tensor<2x8x16xf32>, tensor<2x2x8xf32>)
  %dq, %dk, %dv = xfmr.attention_block_grad %do, %q, %k, %v, %qpos, %kpos, %o, %l {num_heads = 2 : i64, num_kv_heads = 1 : i64, causal = false}
      : (tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<8xi32>, tensor<4xi32>, tensor<2x8x16xf32>, tensor<2x2x8xf32>)
      -> (tensor<2x8x16xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>)
  %loss = arith.constant dense<0.0> : tensor<f32>
  return %loss : tensor<f32>
}
