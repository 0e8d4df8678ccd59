// RUN: partition-opt %s -split-input-file -verify-diagnostics -allow-unregistered-dialect

// One case per error of the started collectives' token check and of the
// rt.wait verifier (RtOps.cpp).

dist.mesh @mesh axes = [dp = 2, pp = 1, tp = 1]

func.func @never_waited(%a: memref<4xf32>) {
  // expected-error @+1 {{'rt.all_reduce' op is async: its token must be waited for by exactly one rt.wait and used nowhere else, but has 0 rt.wait and 0 other uses}}
  %t = rt.all_reduce async %a on @mesh axes [dp] reduce = sum label = "b" : memref<4xf32>
  return
}

// -----

dist.mesh @mesh axes = [dp = 2, pp = 1, tp = 1]

func.func @waited_twice(%a: memref<4xf32>) {
  // expected-error @+1 {{'rt.all_reduce' op is async: its token must be waited for by exactly one rt.wait and used nowhere else, but has 2 rt.wait and 0 other uses}}
  %t = rt.all_reduce async %a on @mesh axes [dp] reduce = sum label = "b" : memref<4xf32>
  rt.wait %t, %a : memref<4xf32>
  rt.wait %t, %a : memref<4xf32>
  return
}

// -----

dist.mesh @mesh axes = [dp = 2, pp = 1, tp = 1]

func.func @token_returned(%a: memref<4x8xf32>, %b: memref<8x8xf32>) -> !rt.token {
  // expected-error @+1 {{'rt.all_gather' op is async: its token must be waited for by exactly one rt.wait and used nowhere else, but has 0 rt.wait and 1 other uses}}
  %t = rt.all_gather async %a, %b on @mesh axes [dp] dim = 0 label = "g" : memref<4x8xf32>, memref<8x8xf32>
  return %t : !rt.token
}

// -----

func.func @token_argument(%t: !rt.token, %a: memref<4xf32>) {
  // expected-error @+1 {{'rt.wait' op must wait for a token returned by an async rt collective or tier transfer of the same block}}
  rt.wait %t, %a : memref<4xf32>
  return
}

// -----

dist.mesh @mesh axes = [dp = 2, pp = 1, tp = 1]

func.func @other_buffers(%a: memref<4xf32>, %b: memref<4xf32>) {
  %t = rt.all_reduce async %a on @mesh axes [dp] reduce = sum label = "b" : memref<4xf32>
  // expected-error @+1 {{'rt.wait' op must name the buffers of the collective it waits for (1 buffers, in its order), but names 2}}
  rt.wait %t, %a, %b : memref<4xf32>, memref<4xf32>
  return
}

// -----

dist.mesh @mesh axes = [dp = 2, pp = 1, tp = 1]

func.func @touched_before_wait(%a: memref<4xf32>, %b: memref<4xf32>) {
  // expected-note @+1 {{the collective starts here}}
  %t = rt.all_reduce async %a on @mesh axes [dp] reduce = sum label = "b" : memref<4xf32>
  // expected-error @+1 {{'rt.kernel' op uses a buffer of an async collective before its rt.wait}}
  rt.kernel "gelu" ins(%b : memref<4xf32>) outs(%a : memref<4xf32>)
  // expected-note @+1 {{and is waited for here}}
  rt.wait %t, %a : memref<4xf32>
  return
}

// -----

dist.mesh @mesh axes = [dp = 2, pp = 1, tp = 1]

func.func @touched_through_a_subview(%a: memref<8xf32>, %b: memref<4xf32>) {
  // expected-note @+1 {{the collective starts here}}
  %t = rt.all_reduce async %a on @mesh axes [dp] reduce = sum label = "b" : memref<8xf32>
  %v = memref.subview %a[0] [4] [1] : memref<8xf32> to memref<4xf32, strided<[1]>>
  // expected-error @+1 {{'rt.kernel' op uses a buffer of an async collective before its rt.wait}}
  rt.kernel "gelu" ins(%v : memref<4xf32, strided<[1]>>) outs(%b : memref<4xf32>)
  // expected-note @+1 {{and is waited for here}}
  rt.wait %t, %a : memref<8xf32>
  return
}

// -----

dist.mesh @mesh axes = [dp = 2, pp = 1, tp = 1]

func.func @other_block(%a: memref<4xf32>, %c: i1) {
  %t = rt.all_reduce async %a on @mesh axes [dp] reduce = sum label = "b" : memref<4xf32>
  // A region of another block (an unregistered op stands for any).
  "test.region"() ({
    // expected-error @+1 {{'rt.wait' op must wait for a token returned by an async rt collective or tier transfer of the same block}}
    rt.wait %t, %a : memref<4xf32>
    "test.terminator"() : () -> ()
  }) : () -> ()
  return
}
