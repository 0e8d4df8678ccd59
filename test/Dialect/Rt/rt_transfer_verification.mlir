// RUN: partition-opt %s -split-input-file -verify-diagnostics

// One case per error of the rt.send / rt.recv verifiers (RtOps.cpp).

dist.mesh @mesh axes = [dp = 2, pp = 2]
func.func @strided(%x: memref<4x8xf32, strided<[16, 1]>>) {
  // expected-error @+1 {{'rt.send' op buffer 'memref<4x8xf32, strided<[16, 1]>>' must be f32, bf16 or i32 with a static shape and the identity layout}}
  rt.send %x to @mesh [pp = 1] label = "x" : memref<4x8xf32, strided<[16, 1]>>
  return
}

// -----

dist.mesh @mesh axes = [dp = 2, pp = 2]
func.func @f16(%x: memref<4xf16>) {
  // expected-error @+1 {{'rt.recv' op buffer 'memref<4xf16>' must be f32, bf16 or i32}}
  rt.recv %x from @mesh [pp = 0] label = "x" : memref<4xf16>
  return
}

// -----

dist.mesh @mesh axes = [dp = 2, pp = 2]
func.func @two_coordinates(%x: memref<4xf32>) {
  // expected-error @+1 {{'rt.send' op must give the peer by one coordinate, on the pipeline axis, but has 2}}
  rt.send %x to @mesh [pp = 1, dp = 0] label = "x" : memref<4xf32>
  return
}

// -----

dist.mesh @mesh axes = [dp = 2, pp = 2]
func.func @negative(%x: memref<4xf32>) {
  // expected-error @+1 {{'rt.recv' op peer coordinate -1 is negative}}
  rt.recv %x from @mesh [pp = -1] label = "x" : memref<4xf32>
  return
}

// -----

dist.mesh @mesh axes = [dp = 2, pp = 2]
func.func @no_label(%x: memref<4xf32>) {
  // expected-error @+1 {{'rt.send' op must have a non-empty label}}
  rt.send %x to @mesh [pp = 1] label = "" : memref<4xf32>
  return
}

// -----

dist.mesh @mesh axes = [dp = 2, pp = 2]
func.func @unknown_axis(%x: memref<4xf32>) {
  // expected-error @+1 {{'rt.send' op axis 'stage' is not an axis of @mesh}}
  rt.send %x to @mesh [stage = 1] label = "x" : memref<4xf32>
  return
}

// -----

dist.mesh @mesh axes = [dp = 2, pp = 2]
func.func @out_of_range(%x: memref<4xf32>) {
  // expected-error @+1 {{'rt.recv' op peer coordinate 2 of axis 'pp' is out of range: the axis has size 2}}
  rt.recv %x from @mesh [pp = 2] label = "x" : memref<4xf32>
  return
}

// -----

func.func @no_mesh(%x: memref<4xf32>) {
  // expected-error @+1 {{'rt.send' op}}
  rt.send %x to @nowhere [pp = 1] label = "x" : memref<4xf32>
  return
}
