// RUN: partition-opt %s -split-input-file -verify-diagnostics

// One case per error of dist.all_to_all and rt.all_to_all.

dist.mesh @m axes = [dp = 2, tp = 2]
func.func @same_dims(%x: tensor<2x4xf32>) {
  // expected-error @+1 {{'dist.all_to_all' op split_dim and concat_dim are both 1; an all_to_all moves a split between two dimensions}}
  %a = dist.all_to_all %x on @m axes [dp] split_dim = 1 concat_dim = 1 : tensor<2x4xf32> -> tensor<2x4xf32>
  return
}

// -----

dist.mesh @m axes = [dp = 2, tp = 2]
func.func @dim_range(%x: tensor<2x4xf32>) {
  // expected-error @+1 {{'dist.all_to_all' op concat_dim 2 is not a dimension of the input 'tensor<2x4xf32>' of rank 2}}
  %a = dist.all_to_all %x on @m axes [dp] split_dim = 1 concat_dim = 2 : tensor<2x4xf32> -> tensor<2x4xf32>
  return
}

// -----

dist.mesh @m axes = [dp = 2, tp = 2]
func.func @indivisible(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{'dist.all_to_all' op split_dim 1 of size 3 is not divisible by 2, the size of axes [dp]}}
  %a = dist.all_to_all %x on @m axes [dp] split_dim = 1 concat_dim = 0 : tensor<2x3xf32> -> tensor<4x1xf32>
  return
}

// -----

dist.mesh @m axes = [dp = 2, tp = 2]
func.func @result(%x: tensor<2x4xf32>) {
  // expected-error @+1 {{'dist.all_to_all' op result must be}}
  %a = dist.all_to_all %x on @m axes [dp] split_dim = 1 concat_dim = 0 : tensor<2x4xf32> -> tensor<2x4xf32>
  return
}

// -----

dist.mesh @m axes = [dp = 2, tp = 2]
func.func @no_axes(%x: tensor<2x4xf32>) {
  // expected-error @+1 {{'dist.all_to_all' op must name at least one mesh axis}}
  %a = dist.all_to_all %x on @m axes [] split_dim = 1 concat_dim = 0 : tensor<2x4xf32> -> tensor<2x4xf32>
  return
}

// -----

dist.mesh @m axes = [dp = 2, tp = 2]
func.func @rt_output(%x: memref<2x4xf32>, %y: memref<2x4xf32>) {
  // expected-error @+1 {{'rt.all_to_all' op output must be 'memref<4x2xf32>' (the input divided by 2 along split_dim 1 and multiplied by it along concat_dim 0), but is 'memref<2x4xf32>'}}
  rt.all_to_all %x, %y on @m axes [dp] split_dim = 1 concat_dim = 0 label = "a" : memref<2x4xf32>, memref<2x4xf32>
  return
}

// -----

dist.mesh @m axes = [dp = 2, tp = 2]
func.func @rt_same_dims(%x: memref<2x4xf32>, %y: memref<2x4xf32>) {
  // expected-error @+1 {{'rt.all_to_all' op split_dim and concat_dim are both 0; they must differ}}
  rt.all_to_all %x, %y on @m axes [dp] split_dim = 0 concat_dim = 0 label = "a" : memref<2x4xf32>, memref<2x4xf32>
  return
}

// -----

dist.mesh @m axes = [dp = 2, tp = 2]
func.func @rt_indivisible(%x: memref<2x3xf32>, %y: memref<4x1xf32>) {
  // expected-error @+1 {{'rt.all_to_all' op split_dim 1 of size 3 is not divisible by 2, the size of axes ["dp"]}}
  rt.all_to_all %x, %y on @m axes [dp] split_dim = 1 concat_dim = 0 label = "a" : memref<2x3xf32>, memref<4x1xf32>
  return
}

// -----

dist.mesh @m axes = [dp = 2, tp = 2]
func.func @rt_in_place(%x: memref<4x4xf32>) {
  // expected-error @+1 {{'rt.all_to_all' op cannot write its input: it runs out of place}}
  rt.all_to_all %x, %x on @m axes [dp] split_dim = 1 concat_dim = 0 label = "a" : memref<4x4xf32>, memref<4x4xf32>
  return
}

// -----

dist.mesh @m axes = [dp = 2, tp = 2]
func.func @rt_f16(%x: memref<2x4xf16>, %y: memref<4x2xf16>) {
  // expected-error @+1 {{'rt.all_to_all' op input 'memref<2x4xf16>' must be f32 or bf16 (or i32 for an all_gather, ring_shift or all_to_all) with a static shape and the identity layout}}
  rt.all_to_all %x, %y on @m axes [dp] split_dim = 1 concat_dim = 0 label = "a" : memref<2x4xf16>, memref<4x2xf16>
  return
}

// -----

dist.mesh @m axes = [dp = 2, tp = 2]
func.func @rt_order(%x: memref<2x8xf32>, %y: memref<8x2xf32>) {
  // expected-error @+1 {{'rt.all_to_all' op axes ["tp", "dp"] must be listed in the order of the axes of @m}}
  rt.all_to_all %x, %y on @m axes [tp, dp] split_dim = 1 concat_dim = 0 label = "a" : memref<2x8xf32>, memref<8x2xf32>
  return
}

// -----

dist.mesh @m axes = [dp = 2]
func.func @rt_counts_without_rows(%x: memref<1x4x8x16xf32>, %y: memref<2x2x8x16xf32>) {
  // expected-error @+1 {{'rt.all_to_all' op takes counts and rows_dim together: the filled rows of the input's and the output's cells}}
  "rt.all_to_all"(%x, %y) <{axes = ["dp"], concat_dim = 0 : i64, label = "a", mesh = @m, split_dim = 1 : i64, rows_dim = 2 : i64}> : (memref<1x4x8x16xf32>, memref<2x2x8x16xf32>) -> ()
  return
}

// -----

dist.mesh @m axes = [dp = 2]
func.func @rt_one_count(%x: memref<1x4x8x16xf32>, %y: memref<2x2x8x16xf32>, %c: memref<1x4xi32>) {
  // expected-error @+1 {{'rt.all_to_all' op takes two counts (the input's and the output's cells), not 1}}
  rt.all_to_all %x, %y on @m axes [dp] split_dim = 1 concat_dim = 0 label = "a" counts(%c) rows_dim = 2 : memref<1x4x8x16xf32>, memref<2x2x8x16xf32>, memref<1x4xi32>
  return
}

// -----

dist.mesh @m axes = [dp = 2]
func.func @rt_rows_dim(%x: memref<1x4x8x16xf32>, %y: memref<2x2x8x16xf32>, %c: memref<1xi32>, %d: memref<2xi32>) {
  // expected-error @+1 {{'rt.all_to_all' op rows_dim 1 must come after split_dim and concat_dim and before the last dimension of 'memref<1x4x8x16xf32>'}}
  rt.all_to_all %x, %y on @m axes [dp] split_dim = 1 concat_dim = 0 label = "a" counts(%c, %d) rows_dim = 1 : memref<1x4x8x16xf32>, memref<2x2x8x16xf32>, memref<1xi32>, memref<2xi32>
  return
}

// -----

dist.mesh @m axes = [dp = 2]
func.func @rt_counts_shape(%x: memref<1x4x8x16xf32>, %y: memref<2x2x8x16xf32>, %c: memref<1x4xi32>, %d: memref<2x4xi32>) {
  // expected-error @+1 {{'rt.all_to_all' op the output's counts 'memref<2x4xi32>' must be i32 of the output's cells (its dimensions before rows_dim 2) with the identity layout}}
  rt.all_to_all %x, %y on @m axes [dp] split_dim = 1 concat_dim = 0 label = "a" counts(%c, %d) rows_dim = 2 : memref<1x4x8x16xf32>, memref<2x2x8x16xf32>, memref<1x4xi32>, memref<2x4xi32>
  return
}
