// RUN: partition-opt %s -split-input-file | partition-opt -split-input-file | FileCheck %s
// RUN: partition-opt %s -split-input-file --mlir-print-op-generic | FileCheck %s --check-prefix=GENERIC

// dist.ring_shift: round trip (f32 and i32, one and two axes); and
// rt.ring_shift's (started too).

dist.mesh @m axes = [dp = 2, cp = 4]
// CHECK-LABEL: func.func @ring_shift
func.func @ring_shift(%k: tensor<2x8x16xf32>, %p: tensor<8xi32>) -> (tensor<2x8x16xf32>, tensor<8xi32>, tensor<2x8x16xf32>) {
  // CHECK: dist.ring_shift %{{.*}} on @m axes [cp] : tensor<2x8x16xf32>{{$}}
  %a = dist.ring_shift %k on @m axes [cp] : tensor<2x8x16xf32>
  // CHECK: dist.ring_shift %{{.*}} on @m axes [cp] : tensor<8xi32>{{$}}
  %b = dist.ring_shift %p on @m axes [cp] : tensor<8xi32>
  // CHECK: dist.ring_shift %{{.*}} on @m axes [dp, cp] : tensor<2x8x16xf32>{{$}}
  %c = dist.ring_shift %k on @m axes [dp, cp] : tensor<2x8x16xf32>
  return %a, %b, %c : tensor<2x8x16xf32>, tensor<8xi32>, tensor<2x8x16xf32>
}
// GENERIC: "dist.ring_shift"(%{{.*}}) <{axes = ["cp"], mesh = @m}> : (tensor<2x8x16xf32>) -> tensor<2x8x16xf32>


// -----

dist.mesh @m axes = [dp = 2, cp = 4]
// CHECK-LABEL: func.func @rt_ring_shift
func.func @rt_ring_shift(%x: memref<2x8xf32>, %y: memref<2x8xf32>, %p: memref<8xi32>, %q: memref<8xi32>) {
  // CHECK: rt.ring_shift %{{.*}}, %{{.*}} on @m axes [cp] label = "ring k 1" : memref<2x8xf32>, memref<2x8xf32>{{$}}
  rt.ring_shift %x, %y on @m axes [cp] label = "ring k 1" : memref<2x8xf32>, memref<2x8xf32>
  // CHECK: %[[T:.*]] = rt.ring_shift async %{{.*}}, %{{.*}} on @m axes [cp] label = "ring p 1" : memref<8xi32>, memref<8xi32>
  %t = rt.ring_shift async %p, %q on @m axes [cp] label = "ring p 1" : memref<8xi32>, memref<8xi32>
  // CHECK: rt.wait %[[T]]
  rt.wait %t, %p, %q : memref<8xi32>, memref<8xi32>
  return
}

// -----

// A started ring shift's input may be read while it runs (the current
// block's attention reads the block being passed on).
dist.mesh @m axes = [cp = 2]
// CHECK-LABEL: func.func @read_while_shifting
func.func @read_while_shifting(%k: memref<2x8xf32>, %next: memref<2x8xf32>, %y: memref<2x8xf32>) {
  // CHECK: rt.ring_shift async
  %t = rt.ring_shift async %k, %next on @m axes [cp] label = "ring k 1" : memref<2x8xf32>, memref<2x8xf32>
  // CHECK-NEXT: rt.kernel "gelu" ins(%{{.*}} : memref<2x8xf32>) outs(%{{.*}} : memref<2x8xf32>)
  rt.kernel "gelu" ins(%k : memref<2x8xf32>) outs(%y : memref<2x8xf32>)
  // CHECK-NEXT: rt.wait
  rt.wait %t, %k, %next : memref<2x8xf32>, memref<2x8xf32>
  return
}
