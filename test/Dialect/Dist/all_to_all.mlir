// RUN: partition-opt %s -split-input-file | partition-opt -split-input-file | FileCheck %s
// RUN: partition-opt %s -split-input-file --mlir-print-op-generic | FileCheck %s --check-prefix=GENERIC

// dist.all_to_all: round trip (f32, bf16 and i32; one and two axes; the
// split moving either way); and rt.all_to_all's (started too).

dist.mesh @m axes = [dp = 2, tp = 2]
// CHECK-LABEL: func.func @all_to_all
func.func @all_to_all(%x: tensor<2x4x8x16xf32>, %n: tensor<2x4xi32>, %h: tensor<4x2x8x16xbf16>)
    -> (tensor<4x2x8x16xf32>, tensor<4x2xi32>, tensor<2x4x8x16xbf16>, tensor<8x1x8x16xf32>) {
  // CHECK: dist.all_to_all %{{.*}} on @m axes [dp] split_dim = 1 concat_dim = 0 : tensor<2x4x8x16xf32> -> tensor<4x2x8x16xf32>
  %a = dist.all_to_all %x on @m axes [dp] split_dim = 1 concat_dim = 0 : tensor<2x4x8x16xf32> -> tensor<4x2x8x16xf32>
  // CHECK: dist.all_to_all %{{.*}} on @m axes [dp] split_dim = 1 concat_dim = 0 : tensor<2x4xi32> -> tensor<4x2xi32>
  %b = dist.all_to_all %n on @m axes [dp] split_dim = 1 concat_dim = 0 : tensor<2x4xi32> -> tensor<4x2xi32>
  // CHECK: dist.all_to_all %{{.*}} on @m axes [dp] split_dim = 0 concat_dim = 1 : tensor<4x2x8x16xbf16> -> tensor<2x4x8x16xbf16>
  %c = dist.all_to_all %h on @m axes [dp] split_dim = 0 concat_dim = 1 : tensor<4x2x8x16xbf16> -> tensor<2x4x8x16xbf16>
  // CHECK: dist.all_to_all %{{.*}} on @m axes [dp, tp] split_dim = 1 concat_dim = 0 : tensor<2x4x8x16xf32> -> tensor<8x1x8x16xf32>
  %d = dist.all_to_all %x on @m axes [dp, tp] split_dim = 1 concat_dim = 0 : tensor<2x4x8x16xf32> -> tensor<8x1x8x16xf32>
  return %a, %b, %c, %d : tensor<4x2x8x16xf32>, tensor<4x2xi32>, tensor<2x4x8x16xbf16>, tensor<8x1x8x16xf32>
}
// GENERIC: "dist.all_to_all"(%{{.*}}) <{axes = ["dp"], concat_dim = 0 : i64, mesh = @m, split_dim = 1 : i64}> : (tensor<2x4x8x16xf32>) -> tensor<4x2x8x16xf32>

// -----

dist.mesh @m axes = [dp = 2]
// CHECK-LABEL: func.func @rt_all_to_all
func.func @rt_all_to_all(%x: memref<2x4x8xf32>, %y: memref<4x2x8xf32>, %n: memref<2x4xi32>, %k: memref<4x2xi32>) {
  // CHECK: rt.all_to_all %{{.*}}, %{{.*}} on @m axes [dp] split_dim = 1 concat_dim = 0 label = "dispatch" : memref<2x4x8xf32>, memref<4x2x8xf32>{{$}}
  rt.all_to_all %x, %y on @m axes [dp] split_dim = 1 concat_dim = 0 label = "dispatch" : memref<2x4x8xf32>, memref<4x2x8xf32>
  // CHECK: %[[T:.*]] = rt.all_to_all async %{{.*}}, %{{.*}} on @m axes [dp] split_dim = 1 concat_dim = 0 label = "counts" : memref<2x4xi32>, memref<4x2xi32>
  %t = rt.all_to_all async %n, %k on @m axes [dp] split_dim = 1 concat_dim = 0 label = "counts" : memref<2x4xi32>, memref<4x2xi32>
  // CHECK: rt.wait %[[T]]
  rt.wait %t, %n, %k : memref<2x4xi32>, memref<4x2xi32>
  return
}

// -----

// Counted rows: only the filled rows of each [B, E] cell of a [B, E, C, H]
// buffer move.
dist.mesh @m axes = [dp = 2]
// CHECK-LABEL: func.func @rt_all_to_all_counted
func.func @rt_all_to_all_counted(%x: memref<1x4x8x16xf32>, %y: memref<2x2x8x16xf32>, %c: memref<1x4xi32>, %d: memref<2x2xi32>) {
  // CHECK: rt.all_to_all %{{.*}}, %{{.*}} on @m axes [dp] split_dim = 1 concat_dim = 0 label = "dispatch" counts(%{{.*}}, %{{.*}}) rows_dim = 2 : memref<1x4x8x16xf32>, memref<2x2x8x16xf32>, memref<1x4xi32>, memref<2x2xi32>
  rt.all_to_all %x, %y on @m axes [dp] split_dim = 1 concat_dim = 0 label = "dispatch" counts(%c, %d) rows_dim = 2 : memref<1x4x8x16xf32>, memref<2x2x8x16xf32>, memref<1x4xi32>, memref<2x2xi32>
  // CHECK: rt.all_to_all %{{.*}}, %{{.*}} on @m axes [dp] split_dim = 0 concat_dim = 1 label = "combine" counts(%{{.*}}, %{{.*}}) rows_dim = 2
  rt.all_to_all %y, %x on @m axes [dp] split_dim = 0 concat_dim = 1 label = "combine" counts(%d, %c) rows_dim = 2 : memref<2x2x8x16xf32>, memref<1x4x8x16xf32>, memref<2x2xi32>, memref<1x4xi32>
  return
}
