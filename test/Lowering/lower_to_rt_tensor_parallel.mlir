// RUN: partition-opt %s --split-input-file --lower-to-rt | FileCheck %s
// The output verifies and is stable under a round trip.
// RUN: partition-opt %s --split-input-file --lower-to-rt | partition-opt --split-input-file --verify-roundtrip > /dev/null

// --lower-to-rt on the rank-dependent dist ops of tensor parallelism: each
// distinct axes list of dist.axis_index and dist.all_slice becomes one
// memref<i32> argument (rt.role = "axis_index", rt.name = the axes joined by
// ","), which the runtime fills before the first step; dist.all_slice is a
// slice_block kernel reading it; dist.all_gather and dist.reduce_scatter are
// out-of-place rt collectives.

// Two axis_index ops on [tp] and an all_slice on [tp] share one buffer;
// [dp, tp] gets its own. The slice keeps block `index` of 4 (dp x tp).
// CHECK:       dist.mesh @mesh axes = [dp = 2, pp = 1, tp = 2]
// CHECK-LABEL: func.func @axis_index
// CHECK-SAME:    (%[[X:.*]]: memref<8x6xf32> {rt.name = "x", rt.role = "param"}, %[[LOSS:.*]]: memref<f32> {rt.role = "loss"}, %[[G:.*]]: memref<8x3xf32> {rt.name = "x", rt.role = "gradient"},
// CHECK-SAME:     %[[TP:.*]]: memref<i32> {rt.name = "tp", rt.role = "axis_index"}, %[[DPTP:.*]]: memref<i32> {rt.name = "dp,tp", rt.role = "axis_index"})
// CHECK:         %[[SUM:.*]] = memref.alloc() : memref<i32>
// CHECK-NEXT:    rt.kernel "add_i32" ins(%[[TP]], %[[DPTP]] : memref<i32>, memref<i32>) outs(%[[SUM]] : memref<i32>)
// CHECK-NEXT:    rt.kernel "slice_block" ins(%[[X]], %[[TP]] : memref<8x6xf32>, memref<i32>) outs(%[[G]] : memref<8x3xf32>) ints = [1, 2]{{$}}
// CHECK-NEXT:    rt.kernel "fill" outs(%[[LOSS]] : memref<f32>)
// CHECK-NEXT:    return
dist.mesh @mesh axes = [dp = 2, pp = 1, tp = 2]
func.func @axis_index(%x: tensor<8x6xf32> {xfmr.param = "x"})
    -> (tensor<f32> {xfmr.output = "loss"}, tensor<8x3xf32> {xfmr.gradient = "x"})
    attributes {xfmr.train_step = {optimizer = "none"}} {
  %i = dist.axis_index on @mesh axes [tp] : tensor<i32>
  %j = dist.axis_index on @mesh axes [dp, tp] : tensor<i32>
  %k = dist.axis_index on @mesh axes [tp] : tensor<i32>
  %s = arith.addi %k, %j : tensor<i32>
  %y = dist.all_slice %x on @mesh axes [tp] dim = 1 : tensor<8x6xf32> -> tensor<8x3xf32>
  %loss = arith.constant dense<0.0> : tensor<f32>
  return %loss, %y : tensor<f32>, tensor<8x3xf32>
}

// -----

// Axes listed tp-major are another group order, so another buffer ("tp,dp");
// the slice cuts dimension 0 into dp x tp = 4 blocks.
// CHECK-LABEL: func.func @slice_axes_order
// CHECK-SAME:    %[[I:[^:]*]]: memref<i32> {rt.name = "tp,dp", rt.role = "axis_index"})
// CHECK:         rt.kernel "slice_block" ins(%{{.*}}, %[[I]] : memref<8x6xf32>, memref<i32>) outs(%{{.*}} : memref<2x6xf32>) ints = [0, 4]{{$}}
dist.mesh @mesh axes = [dp = 2, pp = 1, tp = 2]
func.func @slice_axes_order(%x: tensor<8x6xf32> {xfmr.param = "x"})
    -> (tensor<f32> {xfmr.output = "loss"}, tensor<2x6xf32> {xfmr.gradient = "x"})
    attributes {xfmr.train_step = {optimizer = "none"}} {
  %y = dist.all_slice %x on @mesh axes [tp, dp] dim = 0 : tensor<8x6xf32> -> tensor<2x6xf32>
  %loss = arith.constant dense<0.0> : tensor<f32>
  return %loss, %y : tensor<f32>, tensor<2x6xf32>
}

// -----

// all_gather writes straight into the returned buffer; reduce_scatter into a
// fresh one, which gelu reads. dist.label is the label; without one, the
// op's name.
// CHECK-LABEL: func.func @gather_and_scatter
// CHECK-SAME:    (%[[X:.*]]: memref<4x8xf32> {rt.name = "x", rt.role = "param"}, %[[LOSS:.*]]: memref<f32> {rt.role = "loss"}, %[[GW:.*]]: memref<4x16xf32> {rt.name = "w", rt.role = "gradient"}, %[[GB:.*]]: memref<2x8xf32> {rt.name = "b", rt.role = "gradient"})
// CHECK:         rt.all_gather %[[X]], %[[GW]] on @mesh axes [tp] dim = 1 label = "gather x" : memref<4x8xf32>, memref<4x16xf32>{{$}}
// CHECK-NEXT:    %[[S:.*]] = memref.alloc() : memref<2x8xf32>
// CHECK-NEXT:    rt.reduce_scatter %[[X]], %[[S]] on @mesh axes [tp] dim = 0 reduce = sum label = "reduce_scatter" : memref<4x8xf32>, memref<2x8xf32>{{$}}
// CHECK-NEXT:    rt.kernel "gelu" ins(%[[S]] : memref<2x8xf32>) outs(%[[GB]] : memref<2x8xf32>)
// CHECK-NEXT:    rt.kernel "fill" outs(%[[LOSS]] : memref<f32>)
// CHECK-NEXT:    return
dist.mesh @mesh axes = [dp = 2, pp = 1, tp = 2]
func.func @gather_and_scatter(%x: tensor<4x8xf32> {xfmr.param = "x"})
    -> (tensor<f32> {xfmr.output = "loss"}, tensor<4x16xf32> {xfmr.gradient = "w"}, tensor<2x8xf32> {xfmr.gradient = "b"})
    attributes {xfmr.train_step = {optimizer = "none"}} {
  %g = dist.all_gather %x on @mesh axes [tp] dim = 1 {dist.label = "gather x"} : tensor<4x8xf32> -> tensor<4x16xf32>
  %s = dist.reduce_scatter %x on @mesh axes [tp] dim = 0 reduce = sum : tensor<4x8xf32> -> tensor<2x8xf32>
  %t = xfmr.gelu %s : (tensor<2x8xf32>) -> tensor<2x8xf32>
  %loss = arith.constant dense<0.0> : tensor<f32>
  return %loss, %g, %t : tensor<f32>, tensor<4x16xf32>, tensor<2x8xf32>
}

// -----

// A micro-batch view is strided: it is copied into a buffer of its own,
// which the collective can move as whole blocks. Two axes in the mesh's
// order: a group of 4.
// CHECK-LABEL: func.func @gather_view
// CHECK:         %[[V:.*]] = memref.subview %{{.*}}[2, 0] [2, 8] [1, 1] : memref<4x8xf32> to memref<2x8xf32, strided<[8, 1], offset: 16>>
// CHECK-NEXT:    %[[C:.*]] = memref.alloc() : memref<2x8xf32>
// CHECK-NEXT:    rt.kernel "copy" ins(%[[V]] : memref<2x8xf32, strided<[8, 1], offset: 16>>) outs(%[[C]] : memref<2x8xf32>)
// CHECK-NEXT:    rt.all_gather %[[C]], %{{.*}} on @mesh axes [dp, tp] dim = 0 label = "all_gather" : memref<2x8xf32>, memref<8x8xf32>{{$}}
dist.mesh @mesh axes = [dp = 2, pp = 1, tp = 2]
func.func @gather_view(%x: tensor<4x8xf32> {xfmr.param = "x"})
    -> (tensor<f32> {xfmr.output = "loss"}, tensor<8x8xf32> {xfmr.gradient = "w"})
    attributes {xfmr.train_step = {optimizer = "none"}} {
  %v = tensor.extract_slice %x[2, 0] [2, 8] [1, 1] : tensor<4x8xf32> to tensor<2x8xf32>
  %g = dist.all_gather %v on @mesh axes [dp, tp] dim = 0 : tensor<2x8xf32> -> tensor<8x8xf32>
  %loss = arith.constant dense<0.0> : tensor<f32>
  return %loss, %g : tensor<f32>, tensor<8x8xf32>
}
