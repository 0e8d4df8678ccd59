// Errors of `dist.local_sharding` (see local_sharding.mlir).
// RUN: partition-opt %s -split-input-file -verify-diagnostics > /dev/null

// -----

dist.mesh @mesh axes = [dp = 2, tp = 2]
// expected-error @+1 {{'dist.local_sharding' of argument #0: axis 'sp' is not an axis of @mesh}}
func.func @unknown_axis(%w: tensor<32x64xf32> {dist.local_sharding = #dist.sharding<@mesh, [[sp], []]>}) {
  return
}

// -----

dist.mesh @mesh axes = [dp = 2, tp = 2]
// expected-error @+1 {{'dist.local_sharding' of result #0: must be a #dist.sharding, but is 3 : i64}}
func.func @not_a_sharding(%w: tensor<32x64xf32>) -> (tensor<32x64xf32> {dist.local_sharding = 3}) {
  return %w : tensor<32x64xf32>
}
