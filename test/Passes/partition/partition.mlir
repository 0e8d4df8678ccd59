// --dist-partition: the recorded layouts made real (local types, the
// collectives that convert a value where it is consumed differently).
// RUN: partition-opt %s -split-input-file --dist-partition | FileCheck %s

// A partial sum over tp consumed whole is all-reduced right after it is
// made; a dimension split otherwise is gathered, then sliced (every gather
// before any slice); state and returned blocks get dist.local_sharding;
// the recorded layouts are gone.

#plan = #dist.plan<mesh = @mesh, axes = [dp = data, pp = pipeline, tp = tensor], sequence_parallel = false, schedule = "1f1b", microbatches = 1, zero_stage = 0, recompute = none, precision = "fp32">
module attributes {dist.plan = #plan} {
  dist.mesh @mesh axes = [dp = 2, pp = 1, tp = 2]
  // CHECK-LABEL: func.func @eval_step
  // CHECK-SAME: %[[W:.*]]: tensor<8x8xf32> {dist.local_sharding = #dist.sharding<@mesh, {{\[\[}}], [tp]]>, xfmr.param = "proj.weight"}, %[[X:.*]]: tensor<2x4x8xf32>, %[[V:.*]]: tensor<4x4x4xf32>)
  // CHECK-NEXT: %[[Y:.*]] = xfmr.linear %[[X]], %[[W]] : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
  // CHECK-NEXT: %[[SUM:.*]] = dist.all_reduce %[[Y]] on @mesh axes [tp] reduce = sum {dist.label = "partial sum 0 over [tp]"} : tensor<2x4x8xf32>
  // CHECK-NEXT: %[[G:.*]] = xfmr.gelu %[[SUM]] : (tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  // CHECK-NEXT: %[[WHOLE:.*]] = dist.all_gather %[[V]] on @mesh axes [tp] dim = 2 : tensor<4x4x4xf32> -> tensor<4x4x8xf32>
  // CHECK-NEXT: %[[ROWS:.*]] = dist.all_slice %[[WHOLE]] on @mesh axes [dp] dim = 0 : tensor<4x4x8xf32> -> tensor<2x4x8xf32>
  // CHECK-NEXT: %[[H:.*]] = xfmr.gelu %[[ROWS]]
  // CHECK-NEXT: return %[[G]], %[[H]] : tensor<2x4x8xf32>, tensor<2x4x8xf32>
  // CHECK-NOT: dist.operand_shardings
  func.func @eval_step(%w: tensor<8x16xf32> {dist.sharding = #dist.sharding<@mesh, [[], [tp]]>, xfmr.param = "proj.weight"},
                       %x: tensor<4x4x16xf32> {dist.sharding = #dist.sharding<@mesh, [[dp], [], [tp]]>},
                       %v: tensor<4x4x8xf32> {dist.sharding = #dist.sharding<@mesh, [[], [], [tp]]>})
      -> (tensor<4x4x8xf32>, tensor<4x4x8xf32>) attributes {xfmr.eval_step = {}} {
    %y = xfmr.linear %x, %w {dist.operand_shardings = [#dist.sharding<@mesh, [[dp], [], [tp]]>, #dist.sharding<@mesh, [[], [tp]]>], dist.sharding = #dist.sharding<@mesh, [[dp], [], []], partial = [tp]>} : (tensor<4x4x16xf32>, tensor<8x16xf32>) -> tensor<4x4x8xf32>
    %g = xfmr.gelu %y {dist.operand_shardings = [#dist.sharding<@mesh, [[dp], [], []]>], dist.sharding = #dist.sharding<@mesh, [[dp], [], []]>} : (tensor<4x4x8xf32>) -> tensor<4x4x8xf32>
    %h = xfmr.gelu %v {dist.operand_shardings = [#dist.sharding<@mesh, [[dp], [], []]>], dist.sharding = #dist.sharding<@mesh, [[dp], [], []]>} : (tensor<4x4x8xf32>) -> tensor<4x4x8xf32>
    return {dist.operand_shardings = [#dist.sharding<@mesh, [[dp], [], []]>, #dist.sharding<@mesh, [[dp], [], []]>]} %g, %h : tensor<4x4x8xf32>, tensor<4x4x8xf32>
  }
}

// -----

// A sum over the data axis alone (a weight gradient) gets an all_reduce of
// its own, labelled for --dist-bucket-gradients; a mean over a split batch
// (the loss) becomes this device's share of a sum (scaled by 1/dp).

#plan = #dist.plan<mesh = @mesh, axes = [dp = data, pp = pipeline, tp = tensor], sequence_parallel = false, schedule = "1f1b", microbatches = 1, zero_stage = 0, recompute = none, precision = "fp32">
module attributes {dist.plan = #plan} {
  dist.mesh @mesh axes = [dp = 2, pp = 1, tp = 1]
  // CHECK-LABEL: func.func @train_step
  // CHECK: %[[DW:.*]] = xfmr.linear_grad_weight {{.*}} -> tensor<16x8xf32>
  // CHECK-NEXT: %[[SUM:.*]] = dist.all_reduce %[[DW]] on @mesh axes [dp] reduce = sum {dist.label = "data-parallel sum (to bucket)"} : tensor<16x8xf32>
  // CHECK: %[[MEAN:.*]] = xfmr.softmax_cross_entropy {{.*}} : (tensor<2x8x16xf32>, tensor<2x8xi32>) -> tensor<f32>
  // CHECK-NEXT: %[[SHARE:.*]] = xfmr.scale %[[MEAN]] {factor = 5.000000e-01 : f32}
  // CHECK-NEXT: %[[LOSS:.*]] = dist.all_reduce %[[SHARE]] on @mesh axes [dp] reduce = sum {dist.label = "data-parallel sum (to bucket)"} : tensor<f32>
  // CHECK-NEXT: return %[[LOSS]], %[[SUM]]
  func.func @train_step(%dy: tensor<4x8x16xf32> {dist.sharding = #dist.sharding<@mesh, [[dp], [], []]>},
                        %x: tensor<4x8x8xf32> {dist.sharding = #dist.sharding<@mesh, [[dp], [], []]>},
                        %targets: tensor<4x8xi32> {dist.sharding = #dist.sharding<@mesh, [[dp], []]>, xfmr.input = "targets"})
      -> (tensor<f32> {xfmr.output = "loss"}, tensor<16x8xf32>) attributes {xfmr.train_step = {}} {
    %dw = xfmr.linear_grad_weight %dy, %x {dist.operand_shardings = [#dist.sharding<@mesh, [[dp], [], []]>, #dist.sharding<@mesh, [[dp], [], []]>], dist.sharding = #dist.sharding<@mesh, [[], []], partial = [dp]>} : (tensor<4x8x16xf32>, tensor<4x8x8xf32>) -> tensor<16x8xf32>
    %loss = xfmr.softmax_cross_entropy %dy, %targets {dist.operand_shardings = [#dist.sharding<@mesh, [[dp], [], []]>, #dist.sharding<@mesh, [[dp], []]>], dist.sharding = #dist.sharding<@mesh, [], partial = [dp]>} : (tensor<4x8x16xf32>, tensor<4x8xi32>) -> tensor<f32>
    return {dist.operand_shardings = [#dist.sharding<@mesh, []>, #dist.sharding<@mesh, [[], []]>]} %loss, %dw : tensor<f32>, tensor<16x8xf32>
  }
}
