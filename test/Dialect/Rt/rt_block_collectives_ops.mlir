// RUN: partition-opt %s -split-input-file | partition-opt -split-input-file | FileCheck %s
// RUN: partition-opt %s -split-input-file --mlir-print-op-generic | partition-opt -split-input-file | FileCheck %s
// RUN: partition-opt %s -split-input-file --mlir-print-op-generic | FileCheck %s --check-prefix=GENERIC

// Round trip of rt.all_gather and rt.reduce_scatter (dims, reductions,
// groups of one and two axes, a second mesh) and of an axis_index argument, in
// the custom and the generic form.

dist.mesh @mesh axes = [dp = 2, pp = 1, tp = 2]
dist.mesh @r0 axes = [pp = 1, tp = 2]

// CHECK-LABEL: func.func @all_gather
// CHECK-SAME:    (%[[X:.*]]: memref<4x8xf32>, %[[Y:.*]]: memref<4x16xf32>, %[[Z:.*]]: memref<16x8xf32>)
func.func @all_gather(%x: memref<4x8xf32>, %y: memref<4x16xf32>, %z: memref<16x8xf32>) {
  // CHECK: rt.all_gather %[[X]], %[[Y]] on @mesh axes [tp] dim = 1 label = "gather h" : memref<4x8xf32>, memref<4x16xf32>{{$}}
  rt.all_gather %x, %y on @mesh axes [tp] dim = 1 label = "gather h" : memref<4x8xf32>, memref<4x16xf32>
  // CHECK: rt.all_gather %[[X]], %[[Z]] on @mesh axes [dp, tp] dim = 0 label = "all" : memref<4x8xf32>, memref<16x8xf32>{{$}}
  rt.all_gather %x, %z on @mesh axes [dp, tp] dim = 0 label = "all" : memref<4x8xf32>, memref<16x8xf32>
  // CHECK: rt.all_gather %[[X]], %[[Y]] on @r0 axes [tp] dim = 1 label = "sub" : memref<4x8xf32>, memref<4x16xf32>{{$}}
  rt.all_gather %x, %y on @r0 axes [tp] dim = 1 label = "sub" : memref<4x8xf32>, memref<4x16xf32>
  return
}
// GENERIC-LABEL: sym_name = "all_gather"
// GENERIC: "rt.all_gather"(%{{.*}}, %{{.*}}) <{axes = ["tp"], dim = 1 : i64, label = "gather h", mesh = @mesh}> : (memref<4x8xf32>, memref<4x16xf32>) -> ()

// CHECK-LABEL: func.func @reduce_scatter
// CHECK-SAME:    (%[[X:.*]]: memref<8x16xf32>, %[[Y:.*]]: memref<4x16xf32>, %[[Z:.*]]: memref<8x4xf32>)
func.func @reduce_scatter(%x: memref<8x16xf32>, %y: memref<4x16xf32>, %z: memref<8x4xf32>) {
  // CHECK: rt.reduce_scatter %[[X]], %[[Y]] on @mesh axes [tp] dim = 0 reduce = sum label = "scatter h" : memref<8x16xf32>, memref<4x16xf32>{{$}}
  rt.reduce_scatter %x, %y on @mesh axes [tp] dim = 0 reduce = sum label = "scatter h" : memref<8x16xf32>, memref<4x16xf32>
  // CHECK: rt.reduce_scatter %[[X]], %[[Z]] on @mesh axes [dp, tp] dim = 1 reduce = avg label = "avg" : memref<8x16xf32>, memref<8x4xf32>{{$}}
  rt.reduce_scatter %x, %z on @mesh axes [dp, tp] dim = 1 reduce = avg label = "avg" : memref<8x16xf32>, memref<8x4xf32>
  // CHECK: rt.reduce_scatter %[[X]], %[[Y]] on @mesh axes [dp] dim = 0 reduce = max label = "max" : memref<8x16xf32>, memref<4x16xf32>{{$}}
  rt.reduce_scatter %x, %y on @mesh axes [dp] dim = 0 reduce = max label = "max" : memref<8x16xf32>, memref<4x16xf32>
  return
}
// GENERIC-LABEL: sym_name = "reduce_scatter"
// GENERIC: "rt.reduce_scatter"(%{{.*}}, %{{.*}}) <{axes = ["tp"], dim = 0 : i64, label = "scatter h", mesh = @mesh, reduce = #dist.reduce<sum>}> : (memref<8x16xf32>, memref<4x16xf32>) -> ()

// The axis-index buffer of all_slice, and slice_block reading it.
// CHECK-LABEL: func.func @axis_index
// CHECK-SAME:    (%[[I:.*]]: memref<i32> {rt.name = "dp,tp", rt.role = "axis_index"}, %[[X:.*]]: memref<8x16xf32>, %[[Y:.*]]: memref<8x4xf32>)
func.func @axis_index(%i: memref<i32> {rt.role = "axis_index", rt.name = "dp,tp"}, %x: memref<8x16xf32>, %y: memref<8x4xf32>) {
  // CHECK: rt.kernel "slice_block" ins(%[[X]], %[[I]] : memref<8x16xf32>, memref<i32>) outs(%[[Y]] : memref<8x4xf32>) ints = [1, 4]{{$}}
  rt.kernel "slice_block" ins(%x, %i : memref<8x16xf32>, memref<i32>) outs(%y : memref<8x4xf32>) ints = [1, 4]
  return
}

// -----

// One tensor of a ZeRO bucket each: `bucket` names the bucket.
dist.mesh @mesh axes = [dp = 2, pp = 1, tp = 1]

// CHECK-LABEL: func.func @bucket_tensor
func.func @bucket_tensor(%g: memref<16xf32>, %c: memref<8xf32>) {
  // CHECK: rt.reduce_scatter %{{.*}}, %{{.*}} on @mesh axes [dp] dim = 0 reduce = avg label = "gradient bucket 0 #1" bucket = "gradient bucket 0" : memref<16xf32>, memref<8xf32>{{$}}
  rt.reduce_scatter %g, %c on @mesh axes [dp] dim = 0 reduce = avg label = "gradient bucket 0 #1" bucket = "gradient bucket 0" : memref<16xf32>, memref<8xf32>
  // CHECK: rt.all_gather %{{.*}}, %{{.*}} on @mesh axes [dp] dim = 0 label = "parameter bucket 0 #1" bucket = "parameter bucket 0" : memref<8xf32>, memref<16xf32>{{$}}
  rt.all_gather %c, %g on @mesh axes [dp] dim = 0 label = "parameter bucket 0 #1" bucket = "parameter bucket 0" : memref<8xf32>, memref<16xf32>
  return
}
// GENERIC-LABEL: sym_name = "bucket_tensor"
// GENERIC: "rt.reduce_scatter"(%{{.*}}, %{{.*}}) <{axes = ["dp"], bucket = "gradient bucket 0", dim = 0 : i64
