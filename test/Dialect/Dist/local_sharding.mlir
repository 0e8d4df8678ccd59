// `dist.local_sharding` on function arguments and results: the value has its
// LOCAL type and is a block of a logical tensor sharded as given (SPMD
// partitioning's output). It is checked against the logical shape.
// RUN: partition-opt %s -split-input-file | partition-opt -split-input-file | FileCheck %s

dist.mesh @mesh axes = [dp = 2, tp = 2]
// CHECK-LABEL: func.func @column_block
// CHECK-SAME: (%{{.*}}: tensor<32x64xf32> {dist.local_sharding = #dist.sharding<@mesh, {{\[\[}}tp], []]>})
// CHECK-SAME: -> (tensor<32x64xf32> {dist.local_sharding = #dist.sharding<@mesh, {{\[\[}}tp], []]>})
func.func @column_block(%w: tensor<32x64xf32> {dist.local_sharding = #dist.sharding<@mesh, [[tp], []]>})
    -> (tensor<32x64xf32> {dist.local_sharding = #dist.sharding<@mesh, [[tp], []]>}) {
  return %w : tensor<32x64xf32>
}

// -----

dist.mesh @mesh axes = [dp = 2, tp = 2]
// An odd local size is fine: the logical dimension (3 x 4) divides.
// CHECK-LABEL: func.func @two_axes
// CHECK-SAME: tensor<3x8xf32> {dist.local_sharding = #dist.sharding<@mesh, {{\[\[}}dp, tp], []]>}
func.func @two_axes(%w: tensor<3x8xf32> {dist.local_sharding = #dist.sharding<@mesh, [[dp, tp], []]>}) {
  return
}
