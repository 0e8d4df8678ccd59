// --dist-shard reshards operands whose layouts disagree, in as many steps
// as it takes (all_gather the axes to drop, all_slice the axes to add).
// Layouts come from dist.sharding annotations on the arguments.
// RUN: partition-opt %s -split-input-file --dist-shard | FileCheck %s

// One dimension split over two axes: %b, split over dp only, is sliced
// further over tp to match %a.
module attributes {dist.plan = #dist.plan<mesh = @mesh, axes = [dp = data, pp = pipeline, tp = tensor], sequence_parallel = false, schedule = "1f1b", microbatches = 1, zero_stage = 0, recompute = none, precision = "fp32">} {
dist.mesh @mesh axes = [dp = 2, pp = 1, tp = 2]
// CHECK-LABEL: func.func @eval_step
// CHECK-SAME: %[[A:.*]]: tensor<2x4xf32> {dist.local_sharding = #dist.sharding<@mesh, {{\[\[}}dp, tp], []]>, xfmr.param = "a"}
// CHECK-SAME: %[[B:.*]]: tensor<4x4xf32> {dist.local_sharding = #dist.sharding<@mesh, {{\[\[}}dp], []]>, xfmr.param = "b"}
// CHECK-NEXT: %[[B2:.*]] = dist.all_slice %[[B]] on @mesh axes [tp] dim = 0 : tensor<4x4xf32> -> tensor<2x4xf32>
// CHECK-NEXT: xfmr.add %[[A]], %[[B2]] : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
func.func @eval_step(%a: tensor<8x4xf32> {xfmr.param = "a", dist.sharding = #dist.sharding<@mesh, [[dp, tp], []]>},
                     %b: tensor<8x4xf32> {xfmr.param = "b", dist.sharding = #dist.sharding<@mesh, [[dp], []]>})
    -> (tensor<8x4xf32> {xfmr.gradient = "a"}) attributes {xfmr.eval_step = {}} {
  %c = xfmr.add %a, %b : (tensor<8x4xf32>, tensor<8x4xf32>) -> tensor<8x4xf32>
  return %c : tensor<8x4xf32>
}
}

// -----

// And back: %b, split over dp and tp, is gathered over tp.
module attributes {dist.plan = #dist.plan<mesh = @mesh, axes = [dp = data, pp = pipeline, tp = tensor], sequence_parallel = false, schedule = "1f1b", microbatches = 1, zero_stage = 0, recompute = none, precision = "fp32">} {
dist.mesh @mesh axes = [dp = 2, pp = 1, tp = 2]
// CHECK-LABEL: func.func @eval_step
// CHECK-SAME: %[[A:.*]]: tensor<4x4xf32> {dist.local_sharding
// CHECK-SAME: %[[B:.*]]: tensor<2x4xf32> {dist.local_sharding
// CHECK-NEXT: %[[B2:.*]] = dist.all_gather %[[B]] on @mesh axes [tp] dim = 0 : tensor<2x4xf32> -> tensor<4x4xf32>
// CHECK-NEXT: xfmr.add %[[A]], %[[B2]] : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
func.func @eval_step(%a: tensor<8x4xf32> {xfmr.param = "a", dist.sharding = #dist.sharding<@mesh, [[dp], []]>},
                     %b: tensor<8x4xf32> {xfmr.param = "b", dist.sharding = #dist.sharding<@mesh, [[dp, tp], []]>})
    -> (tensor<8x4xf32> {xfmr.gradient = "a"}) attributes {xfmr.eval_step = {}} {
  %c = xfmr.add %a, %b : (tensor<8x4xf32>, tensor<8x4xf32>) -> tensor<8x4xf32>
  return %c : tensor<8x4xf32>
}
}

// -----

// Two dimensions swap their axes: every gather before any slice (a block
// must be whole along an axis before it is cut along it elsewhere).
module attributes {dist.plan = #dist.plan<mesh = @mesh, axes = [dp = data, pp = pipeline, tp = tensor], sequence_parallel = false, schedule = "1f1b", microbatches = 1, zero_stage = 0, recompute = none, precision = "fp32">} {
dist.mesh @mesh axes = [dp = 2, pp = 1, tp = 2]
// CHECK-LABEL: func.func @eval_step
// CHECK-SAME: %[[A:.*]]: tensor<4x4xf32> {dist.local_sharding = #dist.sharding<@mesh, {{\[\[}}dp], [tp]]>
// CHECK-SAME: %[[B:.*]]: tensor<4x4xf32> {dist.local_sharding = #dist.sharding<@mesh, {{\[\[}}tp], [dp]]>
// CHECK-NEXT: %[[G0:.*]] = dist.all_gather %[[B]] on @mesh axes [tp] dim = 0 : tensor<4x4xf32> -> tensor<8x4xf32>
// CHECK-NEXT: %[[G1:.*]] = dist.all_gather %[[G0]] on @mesh axes [dp] dim = 1 : tensor<8x4xf32> -> tensor<8x8xf32>
// CHECK-NEXT: %[[S0:.*]] = dist.all_slice %[[G1]] on @mesh axes [dp] dim = 0 : tensor<8x8xf32> -> tensor<4x8xf32>
// CHECK-NEXT: %[[S1:.*]] = dist.all_slice %[[S0]] on @mesh axes [tp] dim = 1 : tensor<4x8xf32> -> tensor<4x4xf32>
// CHECK-NEXT: xfmr.add %[[A]], %[[S1]] : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
func.func @eval_step(%a: tensor<8x8xf32> {xfmr.param = "a", dist.sharding = #dist.sharding<@mesh, [[dp], [tp]]>},
                     %b: tensor<8x8xf32> {xfmr.param = "b", dist.sharding = #dist.sharding<@mesh, [[tp], [dp]]>})
    -> (tensor<8x8xf32> {xfmr.gradient = "a"}) attributes {xfmr.eval_step = {}} {
  %c = xfmr.add %a, %b : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
  return %c : tensor<8x8xf32>
}
}

// -----

// Back to whole: a layernorm needs its features whole (an opaque factor),
// so a feature-split input is gathered.
module attributes {dist.plan = #dist.plan<mesh = @mesh, axes = [dp = data, pp = pipeline, tp = tensor], sequence_parallel = false, schedule = "1f1b", microbatches = 1, zero_stage = 0, recompute = none, precision = "fp32">} {
dist.mesh @mesh axes = [dp = 1, pp = 1, tp = 2]
// CHECK-LABEL: func.func @eval_step
// CHECK-SAME: %[[X:.*]]: tensor<2x4x4xf32>
// CHECK-NEXT: %[[XW:.*]] = dist.all_gather %[[X]] on @mesh axes [tp] dim = 2 : tensor<2x4x4xf32> -> tensor<2x4x8xf32>
// CHECK-NEXT: xfmr.layernorm %[[XW]], {{.*}} : (tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
func.func @eval_step(%x: tensor<2x4x8xf32> {dist.sharding = #dist.sharding<@mesh, [[], [], [tp]]>},
                     %g: tensor<8xf32> {xfmr.param = "g"}, %b: tensor<8xf32> {xfmr.param = "b"})
    -> tensor<2x4x8xf32> attributes {xfmr.eval_step = {}} {
  %y = xfmr.layernorm %x, %g, %b : (tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
  return %y : tensor<2x4x8xf32>
}
}
