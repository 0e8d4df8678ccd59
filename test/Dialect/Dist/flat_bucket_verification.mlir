// Errors of dist.flat_pack, dist.flat_unpack and dist.flat_shard.
// RUN: partition-opt %s -split-input-file -verify-diagnostics > /dev/null

func.func @columns(%w: tensor<3x5xf32>) -> tensor<2x7xf32> {
  // expected-error @+1 {{bucket 'tensor<2x7xf32>' must have 8 columns: the inputs take ceil(elements / 2) each}}
  %p = dist.flat_pack %w : tensor<3x5xf32> -> tensor<2x7xf32>
  return %p : tensor<2x7xf32>
}

// -----

func.func @types(%w: tensor<4xbf16>) -> tensor<2x2xf32> {
  // expected-error @+1 {{input #0 is 'tensor<4xbf16>' but the bucket holds 'f32'}}
  %p = dist.flat_pack %w : tensor<4xbf16> -> tensor<2x2xf32>
  return %p : tensor<2x2xf32>
}

// -----

func.func @unpack(%p: tensor<2x3xf32>) -> tensor<3x3xf32> {
  // expected-error @+1 {{bucket 'tensor<2x3xf32>' must have 5 columns: the results take ceil(elements / 2) each}}
  %w = dist.flat_unpack %p : tensor<2x3xf32> -> tensor<3x3xf32>
  return %w : tensor<3x3xf32>
}

// -----

func.func @empty(%w: tensor<3x5xf32>) {
  // expected-error @+1 {{needs at least one input}}
  %p = "dist.flat_pack"() : () -> tensor<2x3xf32>
  return
}

// -----

dist.mesh @mesh axes = [dp = 2, tp = 2]
// expected-error @+1 {{'dist.flat_shard' of argument #0: a shard of 15 elements over 2 devices has 8 elements, but the value is 'tensor<7xf32>'}}
func.func @chunk(%s: tensor<7xf32> {dist.flat_shard = {flat = #dist.sharding<@mesh, [[dp]]>, shape = array<i64: 3, 5>}}) {
  return
}

// -----

dist.mesh @mesh axes = [dp = 2, tp = 2]
// expected-error @+1 {{'dist.flat_shard' of argument #0: 'dist.flat_shard' needs 'shape', an array<i64>, but is {flat = #dist.sharding<@mesh, [[dp]]>}}}
func.func @no_shape(%s: tensor<8xf32> {dist.flat_shard = {flat = #dist.sharding<@mesh, [[dp]]>}}) {
  return
}

// -----

dist.mesh @mesh axes = [dp = 2, tp = 2]
// expected-error @+1 {{'dist.flat_shard' of argument #0: the value must be a static 1-D tensor or memref, but is 'tensor<2x4xf32>'}}
func.func @rank(%s: tensor<2x4xf32> {dist.flat_shard = {flat = #dist.sharding<@mesh, [[dp]]>, shape = array<i64: 3, 5>}}) {
  return
}
