// RUN: partition-opt %s | partition-opt | FileCheck %s
// RUN: partition-opt %s --mlir-print-op-generic | partition-opt | FileCheck %s
// RUN: partition-opt %s --mlir-print-op-generic | FileCheck %s --check-prefix=GENERIC

// Round trip of rt.send and rt.recv, the transfers between pipeline stages:
// the peer's coordinate on the pipeline axis and the label, on buffers of
// every type the runtime moves.

dist.mesh @mesh axes = [dp = 2, pp = 4]

// CHECK-LABEL: func.func @transfers
// CHECK-SAME:    (%[[X:.*]]: memref<2x8x16xf32>, %[[Y:.*]]: memref<2x8x16xbf16>, %[[T:.*]]: memref<2x8xi32>)
func.func @transfers(%x: memref<2x8x16xf32>, %y: memref<2x8x16xbf16>, %t: memref<2x8xi32>) {
  // CHECK: rt.send %[[X]] to @mesh [pp = 1] label = "F mb0 stage0->1" : memref<2x8x16xf32>{{$}}
  rt.send %x to @mesh [pp = 1] label = "F mb0 stage0->1" : memref<2x8x16xf32>
  // CHECK: rt.recv %[[Y]] from @mesh [pp = 3] label = "B mb0 stage3->0" : memref<2x8x16xbf16>{{$}}
  rt.recv %y from @mesh [pp = 3] label = "B mb0 stage3->0" : memref<2x8x16xbf16>
  // CHECK: rt.send %[[T]] to @mesh [pp = 2] label = "tokens" : memref<2x8xi32>{{$}}
  rt.send %t to @mesh [pp = 2] label = "tokens" : memref<2x8xi32>
  return
}
// GENERIC: "rt.send"(%{{.*}}) <{label = "F mb0 stage0->1", mesh = @mesh, peer_axes = ["pp"], peer_coords = array<i64: 1>}> : (memref<2x8x16xf32>) -> ()
// GENERIC: "rt.recv"(%{{.*}}) <{label = "B mb0 stage3->0", mesh = @mesh, peer_axes = ["pp"], peer_coords = array<i64: 3>}> : (memref<2x8x16xbf16>) -> ()
