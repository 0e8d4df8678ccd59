// RUN: partition-opt %s -split-input-file -verify-diagnostics

// One case per error of rt.all_gather and rt.reduce_scatter (RtOps.cpp and
// their ODS constraints).

dist.mesh @mesh axes = [dp = 2, tp = 2]
func.func @not_f32(%x: memref<4x8xf16>, %y: memref<4x16xf16>) {
  // expected-error @+1 {{'rt.all_gather' op input 'memref<4x8xf16>' must be f32 or bf16 (or i32 for an all_gather, ring_shift or all_to_all) with a static shape and the identity layout}}
  rt.all_gather %x, %y on @mesh axes [tp] dim = 1 label = "g" : memref<4x8xf16>, memref<4x16xf16>
  return
}

// -----

dist.mesh @mesh axes = [dp = 2, tp = 2]
func.func @dynamic_output(%x: memref<4x8xf32>, %y: memref<?x16xf32>) {
  // expected-error @+1 {{'rt.all_gather' op output 'memref<?x16xf32>' must be f32 or bf16 (or i32 for an all_gather, ring_shift or all_to_all) with a static shape and the identity layout}}
  rt.all_gather %x, %y on @mesh axes [tp] dim = 1 label = "g" : memref<4x8xf32>, memref<?x16xf32>
  return
}

// -----

dist.mesh @mesh axes = [dp = 2, tp = 2]
func.func @strided(%x: memref<8x16xf32>, %y: memref<4x16xf32, strided<[16, 1], offset: 64>>) {
  // expected-error @+1 {{'rt.reduce_scatter' op output 'memref<4x16xf32, strided<[16, 1], offset: 64>>' must be f32 or bf16 (or i32 for an all_gather, ring_shift or all_to_all) with a static shape and the identity layout}}
  rt.reduce_scatter %x, %y on @mesh axes [tp] dim = 0 reduce = sum label = "s" : memref<8x16xf32>, memref<4x16xf32, strided<[16, 1], offset: 64>>
  return
}

// -----

dist.mesh @mesh axes = [dp = 1, tp = 1]
func.func @in_place(%x: memref<4x8xf32>) {
  // expected-error @+1 {{'rt.all_gather' op cannot write its input: it runs out of place}}
  rt.all_gather %x, %x on @mesh axes [tp] dim = 1 label = "g" : memref<4x8xf32>, memref<4x8xf32>
  return
}

// -----

dist.mesh @mesh axes = [dp = 2, tp = 2]
func.func @negative_dim(%x: memref<4x8xf32>, %y: memref<4x16xf32>) {
  // expected-error @+1 {{'rt.all_gather' op attribute 'dim' failed to satisfy constraint: 64-bit signless integer attribute whose value is non-negative}}
  rt.all_gather %x, %y on @mesh axes [tp] dim = -1 label = "g" : memref<4x8xf32>, memref<4x16xf32>
  return
}

// -----

dist.mesh @mesh axes = [dp = 2, tp = 2]
func.func @dim_out_of_range(%x: memref<4x8xf32>, %y: memref<4x16xf32>) {
  // expected-error @+1 {{'rt.all_gather' op dim 2 is not a dimension of the input 'memref<4x8xf32>'}}
  rt.all_gather %x, %y on @mesh axes [tp] dim = 2 label = "g" : memref<4x8xf32>, memref<4x16xf32>
  return
}

// -----

dist.mesh @mesh axes = [dp = 2, tp = 2]
func.func @rank(%x: memref<4x8xf32>, %y: memref<64xf32>) {
  // expected-error @+1 {{'rt.all_gather' op output 'memref<64xf32>' must have the rank of the input 'memref<4x8xf32>'}}
  rt.all_gather %x, %y on @mesh axes [tp] dim = 0 label = "g" : memref<4x8xf32>, memref<64xf32>
  return
}

// -----

dist.mesh @mesh axes = [dp = 2, tp = 2]
func.func @empty_label(%x: memref<8x16xf32>, %y: memref<4x16xf32>) {
  // expected-error @+1 {{'rt.reduce_scatter' op must have a non-empty label}}
  rt.reduce_scatter %x, %y on @mesh axes [tp] dim = 0 reduce = sum label = "" : memref<8x16xf32>, memref<4x16xf32>
  return
}

// -----

dist.mesh @mesh axes = [dp = 2, tp = 2]
func.func @no_axes(%x: memref<8x16xf32>, %y: memref<4x16xf32>) {
  // expected-error @+1 {{'rt.reduce_scatter' op must name at least one mesh axis}}
  rt.reduce_scatter %x, %y on @mesh axes [] dim = 0 reduce = sum label = "s" : memref<8x16xf32>, memref<4x16xf32>
  return
}

// -----

dist.mesh @mesh axes = [dp = 2, tp = 2]
func.func @repeated_axis(%x: memref<8x16xf32>, %y: memref<4x16xf32>) {
  // expected-error @+1 {{'rt.reduce_scatter' op axis 'tp' is listed twice in axes ["tp", "tp"]}}
  rt.reduce_scatter %x, %y on @mesh axes [tp, tp] dim = 0 reduce = sum label = "s" : memref<8x16xf32>, memref<4x16xf32>
  return
}

// -----

func.func @no_mesh(%x: memref<8x16xf32>, %y: memref<4x16xf32>) {
  // expected-error @+1 {{'rt.reduce_scatter' op @mesh does not name a dist.mesh}}
  rt.reduce_scatter %x, %y on @mesh axes [tp] dim = 0 reduce = sum label = "s" : memref<8x16xf32>, memref<4x16xf32>
  return
}

// -----

dist.mesh @mesh axes = [dp = 2, tp = 2]
func.func @unknown_axis(%x: memref<4x8xf32>, %y: memref<4x16xf32>) {
  // expected-error @+1 {{'rt.all_gather' op axis 'pp' is not an axis of @mesh}}
  rt.all_gather %x, %y on @mesh axes [pp] dim = 1 label = "g" : memref<4x8xf32>, memref<4x16xf32>
  return
}

// -----

dist.mesh @mesh axes = [dp = 2, tp = 2]
func.func @axes_out_of_order(%x: memref<4x8xf32>, %y: memref<4x32xf32>) {
  // expected-error @+1 {{'rt.all_gather' op axes ["tp", "dp"] must be listed in the order of the axes of @mesh}}
  rt.all_gather %x, %y on @mesh axes [tp, dp] dim = 1 label = "g" : memref<4x8xf32>, memref<4x32xf32>
  return
}

// -----

dist.mesh @mesh axes = [dp = 2, tp = 2]
func.func @gather_shape(%x: memref<4x8xf32>, %y: memref<8x8xf32>) {
  // expected-error @+1 {{'rt.all_gather' op output must be 'memref<4x16xf32>' (the input times 2 along dimension 1), but is 'memref<8x8xf32>'}}
  rt.all_gather %x, %y on @mesh axes [tp] dim = 1 label = "g" : memref<4x8xf32>, memref<8x8xf32>
  return
}

// -----

dist.mesh @mesh axes = [dp = 2, tp = 4]
func.func @not_divisible(%x: memref<6x16xf32>, %y: memref<1x16xf32>) {
  // expected-error @+1 {{'rt.reduce_scatter' op dimension 0 of size 6 is not divisible by 4, the size of axes ["tp"]}}
  rt.reduce_scatter %x, %y on @mesh axes [tp] dim = 0 reduce = sum label = "s" : memref<6x16xf32>, memref<1x16xf32>
  return
}

// -----

dist.mesh @mesh axes = [dp = 2, tp = 4]
func.func @scatter_shape(%x: memref<8x16xf32>, %y: memref<8x8xf32>) {
  // expected-error @+1 {{'rt.reduce_scatter' op output must be 'memref<8x2xf32>' (the input divided by 8 along dimension 1), but is 'memref<8x8xf32>'}}
  rt.reduce_scatter %x, %y on @mesh axes [dp, tp] dim = 1 reduce = sum label = "s" : memref<8x16xf32>, memref<8x8xf32>
  return
}

// -----

dist.mesh @mesh axes = [dp = 2]
func.func @empty_bucket(%g: memref<16xf32>, %c: memref<8xf32>) {
  // expected-error @+1 {{'rt.reduce_scatter' op must name a non-empty bucket, or none}}
  rt.reduce_scatter %g, %c on @mesh axes [dp] dim = 0 reduce = sum label = "g #0" bucket = "" : memref<16xf32>, memref<8xf32>
  return
}

// -----

dist.mesh @mesh axes = [dp = 2]
func.func @empty_gather_bucket(%c: memref<8xf32>, %g: memref<16xf32>) {
  // expected-error @+1 {{'rt.all_gather' op must name a non-empty bucket, or none}}
  rt.all_gather %c, %g on @mesh axes [dp] dim = 0 label = "p #0" bucket = "" : memref<8xf32>, memref<16xf32>
  return
}

// -----

// expected-error @+1 {{'rt.role' on argument #0 must be one of param, moment1, moment2, step, lr, tokens, targets, loss, gradient, axis_index, but is "axis-index"}}
func.func @misspelled_role(%i: memref<i32> {rt.role = "axis-index", rt.name = "tp"}) {
  return
}
