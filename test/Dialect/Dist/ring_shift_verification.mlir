// RUN: partition-opt %s -split-input-file -verify-diagnostics

// One case per error of dist.ring_shift and rt.ring_shift.

dist.mesh @m axes = [dp = 2, cp = 2]
func.func @result_type(%k: tensor<2x8xf32>) {
  // expected-error @+1 {{'dist.ring_shift' op failed to verify that all of {input, result} have same type}}
  %a = "dist.ring_shift"(%k) <{axes = ["cp"], mesh = @m}> : (tensor<2x8xf32>) -> tensor<2x4xf32>
  return
}

// -----

dist.mesh @m axes = [dp = 2, cp = 2]
func.func @no_axes(%k: tensor<2x8xf32>) {
  // expected-error @+1 {{'dist.ring_shift' op must name at least one mesh axis}}
  %a = dist.ring_shift %k on @m axes [] : tensor<2x8xf32>
  return
}

// -----

dist.mesh @m axes = [dp = 2, cp = 2]
func.func @unknown_axis(%k: tensor<2x8xf32>) {
  // expected-error @+1 {{'dist.ring_shift' op axis 'tp' is not an axis of @m, whose axes are [dp = 2, cp = 2]}}
  %a = dist.ring_shift %k on @m axes [tp] : tensor<2x8xf32>
  return
}

// -----

dist.mesh @m axes = [dp = 2, cp = 2]
func.func @rt_output(%x: memref<2x8xf32>, %y: memref<2x4xf32>) {
  // expected-error @+1 {{'rt.ring_shift' op output must be 'memref<2x8xf32>' (the input's type), but is 'memref<2x4xf32>'}}
  rt.ring_shift %x, %y on @m axes [cp] label = "r" : memref<2x8xf32>, memref<2x4xf32>
  return
}

// -----

dist.mesh @m axes = [dp = 2, cp = 2]
func.func @rt_in_place(%x: memref<2x8xf32>) {
  // expected-error @+1 {{'rt.ring_shift' op cannot write its input: it runs out of place}}
  rt.ring_shift %x, %x on @m axes [cp] label = "r" : memref<2x8xf32>, memref<2x8xf32>
  return
}

// -----

dist.mesh @m axes = [dp = 2, cp = 2]
func.func @rt_order(%x: memref<2x8xf32>, %y: memref<2x8xf32>) {
  // expected-error @+1 {{'rt.ring_shift' op axes ["cp", "dp"] must be listed in the order of the axes of @m}}
  rt.ring_shift %x, %y on @m axes [cp, dp] label = "r" : memref<2x8xf32>, memref<2x8xf32>
  return
}

// -----

dist.mesh @m axes = [dp = 2, cp = 2]
func.func @rt_f16(%x: memref<2x8xf16>, %y: memref<2x8xf16>) {
  // expected-error @+1 {{'rt.ring_shift' op input 'memref<2x8xf16>' must be f32 or bf16 (or i32 for an all_gather, ring_shift or all_to_all) with a static shape and the identity layout}}
  rt.ring_shift %x, %y on @m axes [cp] label = "r" : memref<2x8xf16>, memref<2x8xf16>
  return
}

// -----

dist.mesh @m axes = [cp = 2]
func.func @write_input_while_shifting(%k: memref<2x8xf32>, %next: memref<2x8xf32>, %x: memref<2x8xf32>) {
  // expected-note @+1 {{the collective starts here}}
  %t = rt.ring_shift async %k, %next on @m axes [cp] label = "r" : memref<2x8xf32>, memref<2x8xf32>
  // expected-error @+1 {{'rt.kernel' op uses a buffer of an async collective before its rt.wait}}
  rt.kernel "gelu" ins(%x : memref<2x8xf32>) outs(%k : memref<2x8xf32>)
  // expected-note @+1 {{and is waited for here}}
  rt.wait %t, %k, %next : memref<2x8xf32>, memref<2x8xf32>
  return
}

// -----

dist.mesh @m axes = [cp = 2]
func.func @read_output_while_shifting(%k: memref<2x8xf32>, %next: memref<2x8xf32>, %y: memref<2x8xf32>) {
  // expected-note @+1 {{the collective starts here}}
  %t = rt.ring_shift async %k, %next on @m axes [cp] label = "r" : memref<2x8xf32>, memref<2x8xf32>
  // expected-error @+1 {{'rt.kernel' op uses a buffer of an async collective before its rt.wait}}
  rt.kernel "gelu" ins(%next : memref<2x8xf32>) outs(%y : memref<2x8xf32>)
  // expected-note @+1 {{and is waited for here}}
  rt.wait %t, %k, %next : memref<2x8xf32>, memref<2x8xf32>
  return
}
