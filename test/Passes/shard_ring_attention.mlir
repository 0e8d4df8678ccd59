// --dist-shard through the ring attention ops: their rules split the heads
// (the log-sum-exp's with the packed query heads) so the Megatron-LM layout
// propagates through them as through xfmr.attention; partitionLocally
// divides the head counts. H = 4 query heads and Hkv = 2 key-value heads of
// D = 4 over tp = 2.
// RUN: partition-opt %s --dist-shard | FileCheck %s

// CHECK-LABEL: func.func @eval_step
// CHECK: %[[O1:.*]], %[[L1:.*]] = xfmr.attention_block %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {num_heads = 2 : i64, num_kv_heads = 1 : i64, rope_theta = 1.000000e+04 : f32} : (tensor<2x4x8xf32>, tensor<2x4x4xf32>, tensor<2x4x4xf32>, tensor<4xi32>, tensor<4xi32>) -> (tensor<2x4x8xf32>, tensor<2x2x4xf32>)
// CHECK-NEXT: %[[O2:.*]], %[[L2:.*]] = xfmr.attention_block {{.*}} {causal = false, num_heads = 2 : i64, num_kv_heads = 1 : i64} : {{.*}} -> (tensor<2x4x8xf32>, tensor<2x2x4xf32>)
// CHECK-NEXT: %[[M:.*]], %[[ML:.*]] = xfmr.attention_merge %[[O1]], %[[L1]], %[[O2]], %[[L2]] : (tensor<2x4x8xf32>, tensor<2x2x4xf32>, tensor<2x4x8xf32>, tensor<2x2x4xf32>) -> (tensor<2x4x8xf32>, tensor<2x2x4xf32>)
// CHECK-NEXT: %[[DQ:.*]], %{{.*}}, %{{.*}} = xfmr.attention_block_grad %[[M]], {{.*}}, %[[M]], %[[ML]] {num_heads = 2 : i64, num_kv_heads = 1 : i64} : {{.*}} -> (tensor<2x4x8xf32>, tensor<2x4x4xf32>, tensor<2x4x4xf32>)
// CHECK-NEXT: xfmr.linear %[[M]], %{{.*}} : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
// CHECK-NEXT: xfmr.linear %[[DQ]], %{{.*}} : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
// CHECK-NEXT: %[[R:.*]] = xfmr.add
// CHECK-NEXT: dist.all_reduce %[[R]] on @mesh axes [tp] reduce = sum
module attributes {dist.plan = #dist.plan<mesh = @mesh, axes = [dp = data, pp = pipeline, tp = tensor], sequence_parallel = false, schedule = "1f1b", microbatches = 1, zero_stage = 0, recompute = none, precision = "fp32">} {
dist.mesh @mesh axes = [dp = 1, pp = 1, tp = 2]
func.func @eval_step(%wq: tensor<16x8xf32> {xfmr.param = "q.weight"},
                     %wk: tensor<8x8xf32> {xfmr.param = "k.weight"},
                     %wv: tensor<8x8xf32> {xfmr.param = "v.weight"},
                     %wo: tensor<8x16xf32> {xfmr.param = "o.weight"},
                     %x: tensor<2x4x8xf32>, %qpos: tensor<4xi32>, %kpos: tensor<4xi32>)
    -> tensor<2x4x8xf32> attributes {xfmr.eval_step = {}} {
  %q = xfmr.linear %x, %wq : (tensor<2x4x8xf32>, tensor<16x8xf32>) -> tensor<2x4x16xf32>
  %k = xfmr.linear %x, %wk : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
  %v = xfmr.linear %x, %wv : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
  %o1, %l1 = xfmr.attention_block %q, %k, %v, %qpos, %kpos {num_heads = 4 : i64, num_kv_heads = 2 : i64, rope_theta = 1.0e+04 : f32}
      : (tensor<2x4x16xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<4xi32>, tensor<4xi32>) -> (tensor<2x4x16xf32>, tensor<2x4x4xf32>)
  %o2, %l2 = xfmr.attention_block %q, %k, %v, %qpos, %kpos {num_heads = 4 : i64, num_kv_heads = 2 : i64, causal = false}
      : (tensor<2x4x16xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<4xi32>, tensor<4xi32>) -> (tensor<2x4x16xf32>, tensor<2x4x4xf32>)
  %o, %l = xfmr.attention_merge %o1, %l1, %o2, %l2
      : (tensor<2x4x16xf32>, tensor<2x4x4xf32>, tensor<2x4x16xf32>, tensor<2x4x4xf32>) -> (tensor<2x4x16xf32>, tensor<2x4x4xf32>)
  %dq, %dk, %dv = xfmr.attention_block_grad %o, %q, %k, %v, %qpos, %kpos, %o, %l {num_heads = 4 : i64, num_kv_heads = 2 : i64}
      : (tensor<2x4x16xf32>, tensor<2x4x16xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<4xi32>, tensor<4xi32>, tensor<2x4x16xf32>, tensor<2x4x4xf32>)
      -> (tensor<2x4x16xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>)
  %y = xfmr.linear %o, %wo : (tensor<2x4x16xf32>, tensor<8x16xf32>) -> tensor<2x4x8xf32>
  %z = xfmr.linear %dq, %wo : (tensor<2x4x16xf32>, tensor<8x16xf32>) -> tensor<2x4x8xf32>
  %r = xfmr.add %y, %z : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  return %r : tensor<2x4x8xf32>
}
}
