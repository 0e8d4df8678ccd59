// RUN: partition-opt %s -split-input-file -verify-diagnostics

// One case per error of dist.axis_index and dist.all_slice (DistOps.cpp and
// their ODS constraints).

//===----------------------------------------------------------------------===//
// dist.axis_index
//===----------------------------------------------------------------------===//

dist.mesh @m axes = [dp = 2, tp = 2]
func.func @index_no_axes() -> tensor<i32> {
  // expected-error @+1 {{'dist.axis_index' op must name at least one mesh axis}}
  %i = dist.axis_index on @m axes [] : tensor<i32>
  return %i : tensor<i32>
}

// -----

dist.mesh @m axes = [dp = 2, tp = 2]
func.func @index_repeated_axis() -> tensor<i32> {
  // expected-error @+1 {{'dist.axis_index' op axis 'tp' is listed twice in axes [tp, tp]}}
  %i = dist.axis_index on @m axes [tp, tp] : tensor<i32>
  return %i : tensor<i32>
}

// -----

dist.mesh @m axes = [dp = 2, tp = 2]
func.func @index_unknown_axis() -> tensor<i32> {
  // expected-error @+1 {{'dist.axis_index' op axis 'pp' is not an axis of @m, whose axes are [dp = 2, tp = 2]}}
  %i = dist.axis_index on @m axes [pp] : tensor<i32>
  return %i : tensor<i32>
}

// -----

func.func @index_no_mesh() -> tensor<i32> {
  // expected-error @+1 {{'dist.axis_index' op @nowhere does not name a dist.mesh}}
  %i = dist.axis_index on @nowhere axes [tp] : tensor<i32>
  return %i : tensor<i32>
}

// -----

dist.mesh @m axes = [dp = 2, tp = 2]
func.func @index_type() -> tensor<i64> {
  // expected-error @+1 {{'dist.axis_index' op result #0 must be 0D tensor of 32-bit signless integer values, but got 'tensor<i64>'}}
  %i = dist.axis_index on @m axes [tp] : tensor<i64>
  return %i : tensor<i64>
}

// -----

dist.mesh @m axes = [dp = 2, tp = 2]
func.func @index_rank() -> tensor<1xi32> {
  // expected-error @+1 {{'dist.axis_index' op result #0 must be 0D tensor of 32-bit signless integer values, but got 'tensor<1xi32>'}}
  %i = dist.axis_index on @m axes [tp] : tensor<1xi32>
  return %i : tensor<1xi32>
}

//===----------------------------------------------------------------------===//
// dist.all_slice
//===----------------------------------------------------------------------===//

// -----

dist.mesh @m axes = [dp = 2, tp = 2]
func.func @slice_no_axes(%x: tensor<8x16xf32>) -> tensor<8x16xf32> {
  // expected-error @+1 {{'dist.all_slice' op must name at least one mesh axis}}
  %y = dist.all_slice %x on @m axes [] dim = 0 : tensor<8x16xf32> -> tensor<8x16xf32>
  return %y : tensor<8x16xf32>
}

// -----

dist.mesh @m axes = [dp = 2, tp = 2]
func.func @slice_repeated_axis(%x: tensor<8x16xf32>) -> tensor<2x16xf32> {
  // expected-error @+1 {{'dist.all_slice' op axis 'dp' is listed twice in axes [dp, tp, dp]}}
  %y = dist.all_slice %x on @m axes [dp, tp, dp] dim = 0 : tensor<8x16xf32> -> tensor<2x16xf32>
  return %y : tensor<2x16xf32>
}

// -----

dist.mesh @m axes = [dp = 2, tp = 2]
func.func @slice_negative_dim(%x: tensor<8x16xf32>) -> tensor<8x16xf32> {
  // expected-error @+1 {{'dist.all_slice' op attribute 'dim' failed to satisfy constraint: 64-bit signless integer attribute whose value is non-negative}}
  %y = dist.all_slice %x on @m axes [tp] dim = -1 : tensor<8x16xf32> -> tensor<8x16xf32>
  return %y : tensor<8x16xf32>
}

// -----

dist.mesh @m axes = [dp = 2, tp = 2]
func.func @slice_dim_out_of_range(%x: tensor<8x16xf32>) -> tensor<8x16xf32> {
  // expected-error @+1 {{'dist.all_slice' op dim 2 is not a dimension of the input 'tensor<8x16xf32>' of rank 2}}
  %y = dist.all_slice %x on @m axes [tp] dim = 2 : tensor<8x16xf32> -> tensor<8x16xf32>
  return %y : tensor<8x16xf32>
}

// -----

dist.mesh @m axes = [dp = 2, tp = 2]
func.func @slice_element_type(%x: tensor<8x16xf32>) -> tensor<4x16xf16> {
  // expected-error @+1 {{'dist.all_slice' op result 'tensor<4x16xf16>' must have the rank and element type of the input 'tensor<8x16xf32>'}}
  %y = dist.all_slice %x on @m axes [tp] dim = 0 : tensor<8x16xf32> -> tensor<4x16xf16>
  return %y : tensor<4x16xf16>
}

// -----

dist.mesh @m axes = [dp = 2, tp = 2]
func.func @slice_unknown_axis(%x: tensor<8x16xf32>) -> tensor<4x16xf32> {
  // expected-error @+1 {{'dist.all_slice' op axis 'ep' is not an axis of @m, whose axes are [dp = 2, tp = 2]}}
  %y = dist.all_slice %x on @m axes [ep] dim = 0 : tensor<8x16xf32> -> tensor<4x16xf32>
  return %y : tensor<4x16xf32>
}

// -----

func.func @slice_no_mesh(%x: tensor<8x16xf32>) -> tensor<4x16xf32> {
  // expected-error @+1 {{'dist.all_slice' op @nowhere does not name a dist.mesh}}
  %y = dist.all_slice %x on @nowhere axes [tp] dim = 0 : tensor<8x16xf32> -> tensor<4x16xf32>
  return %y : tensor<4x16xf32>
}

// -----

dist.mesh @m axes = [dp = 2, tp = 4]
func.func @slice_not_divisible(%x: tensor<6x16xf32>) -> tensor<1x16xf32> {
  // expected-error @+1 {{'dist.all_slice' op dimension 0 of size 6 is not divisible by 4, the size of axes [tp]}}
  %y = dist.all_slice %x on @m axes [tp] dim = 0 : tensor<6x16xf32> -> tensor<1x16xf32>
  return %y : tensor<1x16xf32>
}

// -----

dist.mesh @m axes = [dp = 2, tp = 4]
func.func @slice_wrong_result(%x: tensor<8x16xf32>) -> tensor<8x8xf32> {
  // expected-error @+1 {{'dist.all_slice' op result must be 'tensor<8x2xf32>' (dimension 1 of size 16 divided by 8, the size of axes [dp, tp]), but is 'tensor<8x8xf32>'}}
  %y = dist.all_slice %x on @m axes [dp, tp] dim = 1 : tensor<8x16xf32> -> tensor<8x8xf32>
  return %y : tensor<8x8xf32>
}
