// dist.flat_pack / dist.flat_unpack (ZeRO's flat buckets) and the
// dist.flat_shard attribute round-trip.
// RUN: partition-opt %s | partition-opt | FileCheck %s

dist.mesh @mesh axes = [dp = 2, tp = 2]
// CHECK-LABEL: func.func @buckets
// CHECK-SAME: tensor<8xf32> {dist.flat_shard = {block_of = #dist.sharding<@mesh, {{\[\[}}], [tp]]>, flat = #dist.sharding<@mesh, {{\[\[}}dp]]>, shape = array<i64: 3, 5>}}
// CHECK: dist.flat_pack %{{.*}}, %{{.*}} : tensor<3x5xf32>, tensor<5xf32> -> tensor<2x11xf32>
// CHECK: dist.flat_unpack %{{.*}} : tensor<2x11xf32> -> tensor<3x5xf32>, tensor<5xf32>
// CHECK: dist.flat_pack %{{.*}} : tensor<5xbf16> -> tensor<1x5xbf16>
func.func @buckets(%w: tensor<3x5xf32>, %b: tensor<5xf32>, %h: tensor<5xbf16>,
                   %s: tensor<8xf32> {dist.flat_shard = {flat = #dist.sharding<@mesh, [[dp]]>, shape = array<i64: 3, 5>, block_of = #dist.sharding<@mesh, [[], [tp]]>}})
    -> (tensor<3x5xf32>, tensor<5xf32>, tensor<1x5xbf16>) {
  %p = dist.flat_pack %w, %b : tensor<3x5xf32>, tensor<5xf32> -> tensor<2x11xf32>
  %w2, %b2 = dist.flat_unpack %p : tensor<2x11xf32> -> tensor<3x5xf32>, tensor<5xf32>
  %q = dist.flat_pack %h : tensor<5xbf16> -> tensor<1x5xbf16>
  return %w2, %b2, %q : tensor<3x5xf32>, tensor<5xf32>, tensor<1x5xbf16>
}
