// RUN: partition-opt %s -split-input-file | partition-opt -split-input-file | FileCheck %s
// RUN: partition-opt %s -split-input-file --mlir-print-op-generic | partition-opt -split-input-file | FileCheck %s
// RUN: partition-opt %s -split-input-file --mlir-print-op-generic | FileCheck %s --check-prefix=GENERIC
// RUN: partition-opt %s -split-input-file -canonicalize | FileCheck %s --check-prefix=PURE

// Round trip of the rank-dependent dist ops of tensor parallelism,
// dist.axis_index and dist.all_slice, on one and several axes; both are
// pure, so unused ones fold away.

dist.mesh @m axes = [dp = 2, pp = 1, tp = 4]
dist.mesh @r0 axes = [pp = 1, tp = 4]

// CHECK-LABEL: func.func @axis_index
func.func @axis_index() -> (tensor<i32>, tensor<i32>, tensor<i32>) {
  // CHECK: dist.axis_index on @m axes [tp] : tensor<i32>{{$}}
  %a = dist.axis_index on @m axes [tp] : tensor<i32>
  // CHECK: dist.axis_index on @m axes [dp, tp] : tensor<i32>{{$}}
  %b = dist.axis_index on @m axes [dp, tp] : tensor<i32>
  // CHECK: dist.axis_index on @r0 axes [tp] : tensor<i32>{{$}}
  %c = dist.axis_index on @r0 axes [tp] : tensor<i32>
  return %a, %b, %c : tensor<i32>, tensor<i32>, tensor<i32>
}
// GENERIC-LABEL: sym_name = "axis_index"
// GENERIC: "dist.axis_index"() <{axes = ["tp"], mesh = @m}> : () -> tensor<i32>
// GENERIC: "dist.axis_index"() <{axes = ["dp", "tp"], mesh = @m}> : () -> tensor<i32>
// GENERIC: "dist.axis_index"() <{axes = ["tp"], mesh = @r0}> : () -> tensor<i32>

// CHECK-LABEL: func.func @all_slice
// CHECK-SAME: (%[[X:.*]]: tensor<256x64xf32>)
func.func @all_slice(%x: tensor<256x64xf32>) -> (tensor<64x64xf32>, tensor<256x8xf32>, tensor<256x16xf32>) {
  // CHECK: dist.all_slice %[[X]] on @m axes [tp] dim = 0 : tensor<256x64xf32> -> tensor<64x64xf32>{{$}}
  %a = dist.all_slice %x on @m axes [tp] dim = 0 : tensor<256x64xf32> -> tensor<64x64xf32>
  // CHECK: dist.all_slice %[[X]] on @m axes [tp, dp] dim = 1 : tensor<256x64xf32> -> tensor<256x8xf32>{{$}}
  %b = dist.all_slice %x on @m axes [tp, dp] dim = 1 : tensor<256x64xf32> -> tensor<256x8xf32>
  // CHECK: dist.all_slice %[[X]] on @r0 axes [tp] dim = 1 : tensor<256x64xf32> -> tensor<256x16xf32>{{$}}
  %c = dist.all_slice %x on @r0 axes [tp] dim = 1 : tensor<256x64xf32> -> tensor<256x16xf32>
  return %a, %b, %c : tensor<64x64xf32>, tensor<256x8xf32>, tensor<256x16xf32>
}
// GENERIC-LABEL: sym_name = "all_slice"
// GENERIC: "dist.all_slice"(%{{.*}}) <{axes = ["tp"], dim = 0 : i64, mesh = @m}> : (tensor<256x64xf32>) -> tensor<64x64xf32>
// GENERIC: "dist.all_slice"(%{{.*}}) <{axes = ["tp", "dp"], dim = 1 : i64, mesh = @m}> : (tensor<256x64xf32>) -> tensor<256x8xf32>

// PURE-LABEL: func.func @unused
// PURE-NEXT: return
func.func @unused(%x: tensor<8x4xf32>) {
  %i = dist.axis_index on @m axes [tp] : tensor<i32>
  %y = dist.all_slice %x on @m axes [tp] dim = 0 : tensor<8x4xf32> -> tensor<2x4xf32>
  return
}
