// RUN: partition-opt %s -split-input-file | partition-opt -split-input-file | FileCheck %s
// RUN: partition-opt %s -split-input-file --mlir-print-op-generic | partition-opt -split-input-file | FileCheck %s

// Round trip of started collectives (`async`, returning a !rt.token) and
// their rt.wait, for each collective kind, in the custom and the generic
// form.

dist.mesh @mesh axes = [dp = 2, pp = 1, tp = 2]

// CHECK-LABEL: func.func @all_reduce_started
// CHECK-SAME:    (%[[A:.*]]: memref<64x64xf32>, %[[B:.*]]: memref<64xf32>, %[[X:.*]]: memref<4xf32>, %[[Y:.*]]: memref<4xf32>)
func.func @all_reduce_started(%a: memref<64x64xf32>, %b: memref<64xf32>, %x: memref<4xf32>, %y: memref<4xf32>) {
  // CHECK: %[[T:.*]] = rt.all_reduce async %[[A]], %[[B]] on @mesh axes [dp] reduce = avg label = "gradient bucket 0" : memref<64x64xf32>, memref<64xf32>
  %t = rt.all_reduce async %a, %b on @mesh axes [dp] reduce = avg label = "gradient bucket 0" : memref<64x64xf32>, memref<64xf32>
  // CHECK-NEXT: rt.kernel "gelu" ins(%[[X]] : memref<4xf32>) outs(%[[Y]] : memref<4xf32>)
  rt.kernel "gelu" ins(%x : memref<4xf32>) outs(%y : memref<4xf32>)
  // CHECK-NEXT: rt.wait %[[T]], %[[A]], %[[B]] : memref<64x64xf32>, memref<64xf32>
  rt.wait %t, %a, %b : memref<64x64xf32>, memref<64xf32>
  // A synchronous one prints as before, without `async`.
  // CHECK-NEXT: rt.all_reduce %[[A]] on @mesh axes [dp] reduce = sum label = "sync" : memref<64x64xf32>
  rt.all_reduce %a on @mesh axes [dp] reduce = sum label = "sync" : memref<64x64xf32>
  return
}

// -----

dist.mesh @mesh axes = [dp = 2, pp = 1, tp = 2]

// CHECK-LABEL: func.func @gather_and_scatter_started
func.func @gather_and_scatter_started(%x: memref<4x8xf32>, %y: memref<8x8xf32>, %z: memref<4x8xf32>) {
  // CHECK: %[[G:.*]] = rt.all_gather async %{{.*}}, %{{.*}} on @mesh axes [dp] dim = 0 label = "gather" : memref<4x8xf32>, memref<8x8xf32>
  %g = rt.all_gather async %x, %y on @mesh axes [dp] dim = 0 label = "gather" : memref<4x8xf32>, memref<8x8xf32>
  // CHECK-NEXT: rt.wait %[[G]], %{{.*}}, %{{.*}} : memref<4x8xf32>, memref<8x8xf32>
  rt.wait %g, %x, %y : memref<4x8xf32>, memref<8x8xf32>
  // CHECK-NEXT: %[[S:.*]] = rt.reduce_scatter async %{{.*}}, %{{.*}} on @mesh axes [dp] dim = 0 reduce = sum label = "scatter" : memref<8x8xf32>, memref<4x8xf32>
  %s = rt.reduce_scatter async %y, %z on @mesh axes [dp] dim = 0 reduce = sum label = "scatter" : memref<8x8xf32>, memref<4x8xf32>
  // CHECK-NEXT: rt.wait %[[S]], %{{.*}}, %{{.*}} : memref<8x8xf32>, memref<4x8xf32>
  rt.wait %s, %y, %z : memref<8x8xf32>, memref<4x8xf32>
  return
}
