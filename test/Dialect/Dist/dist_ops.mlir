// RUN: partition-opt %s -split-input-file | partition-opt -split-input-file | FileCheck %s
// RUN: partition-opt %s -split-input-file --mlir-print-op-generic | partition-opt -split-input-file | FileCheck %s
// RUN: partition-opt %s -split-input-file --mlir-print-op-generic | FileCheck %s --check-prefix=GENERIC
// RUN: partition-opt %s -split-input-file -canonicalize | FileCheck %s --check-prefix=PURE

// Round trip of every dist op and attribute, in the custom and in the
// generic form: meshes, the #dist.sharding attribute on function arguments, results and ops, the
// collectives on meshes, and send/recv.

// CHECK: dist.mesh @m axes = [dp = 2, pp = 2, tp = 2]{{$}}
// CHECK: dist.mesh @single axes = [dp = 1]{{$}}
// CHECK: dist.mesh @quoted axes = ["data-parallel" = 4, tp = 2]{{$}}
dist.mesh @m axes = [dp = 2, pp = 2, tp = 2]
dist.mesh @single axes = [dp = 1]
dist.mesh @quoted axes = ["data-parallel" = 4, tp = 2]
// GENERIC: "dist.mesh"() <{axis_names = ["dp", "pp", "tp"], axis_sizes = array<i64: 2, 2, 2>, sym_name = "m"}> : () -> ()
// GENERIC: "dist.mesh"() <{axis_names = ["dp"], axis_sizes = array<i64: 1>, sym_name = "single"}> : () -> ()
// GENERIC: "dist.mesh"() <{axis_names = ["data-parallel", "tp"], axis_sizes = array<i64: 4, 2>, sym_name = "quoted"}> : () -> ()

// -----

// Shardings on op results: bare for one result, or one per result in an array.
dist.mesh @m axes = [dp = 2, tp = 2]
// CHECK-LABEL: func.func @op_shardings
func.func @op_shardings(%x: tensor<8x16xf32>) -> (tensor<8x16xf32>, tensor<8x16xf32>) {
  // CHECK: dist.all_reduce %{{.*}} on @m axes [tp] reduce = sum {dist.sharding = #dist.sharding<@m, {{\[\[}}dp], []]>} : tensor<8x16xf32>
  %a = dist.all_reduce %x on @m axes [tp] reduce = sum {dist.sharding = #dist.sharding<@m, [[dp], []]>} : tensor<8x16xf32>
  // CHECK: dist.all_reduce %{{.*}} on @m axes [tp] reduce = sum {dist.sharding = [#dist.sharding<@m, {{\[\[}}], [dp]], partial = [tp]>]} : tensor<8x16xf32>
  %b = dist.all_reduce %x on @m axes [tp] reduce = sum {dist.sharding = [#dist.sharding<@m, [[], [dp]], partial = [tp]>]} : tensor<8x16xf32>
  return %a, %b : tensor<8x16xf32>, tensor<8x16xf32>
}
// GENERIC-LABEL: sym_name = "op_shardings"
// GENERIC: "dist.all_reduce"(%{{.*}}) <{axes = ["tp"], mesh = @m, reduce = #dist.reduce<sum>}> {dist.sharding = #dist.sharding<@m, {{\[\[}}dp], []]>} : (tensor<8x16xf32>) -> tensor<8x16xf32>
// GENERIC: "dist.all_reduce"(%{{.*}}) <{axes = ["tp"], mesh = @m, reduce = #dist.reduce<sum>}> {dist.sharding = [#dist.sharding<@m, {{\[\[}}], [dp]], partial = [tp]>]} : (tensor<8x16xf32>) -> tensor<8x16xf32>

// -----

dist.mesh @m axes = [dp = 2, pp = 2, tp = 2]
// CHECK-LABEL: func.func @all_reduce
// CHECK-SAME:    (%[[X:.*]]: tensor<4x16xf32>)
func.func @all_reduce(%x: tensor<4x16xf32>) -> (tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x16xf32>) {
  // CHECK: dist.all_reduce %[[X]] on @m axes [tp] reduce = sum : tensor<4x16xf32>{{$}}
  %a = dist.all_reduce %x on @m axes [tp] reduce = sum : tensor<4x16xf32>
  // CHECK: dist.all_reduce %[[X]] on @m axes [dp, tp] reduce = avg : tensor<4x16xf32>{{$}}
  %b = dist.all_reduce %x on @m axes [dp, tp] reduce = avg : tensor<4x16xf32>
  // CHECK: dist.all_reduce %[[X]] on @m axes [pp] reduce = max : tensor<4x16xf32>{{$}}
  %c = dist.all_reduce %x on @m axes [pp] reduce = max : tensor<4x16xf32>
  return %a, %b, %c : tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x16xf32>
}
// GENERIC-LABEL: sym_name = "all_reduce"
// GENERIC: "dist.all_reduce"(%{{.*}}) <{axes = ["tp"], mesh = @m, reduce = #dist.reduce<sum>}> : (tensor<4x16xf32>) -> tensor<4x16xf32>
// GENERIC: "dist.all_reduce"(%{{.*}}) <{axes = ["dp", "tp"], mesh = @m, reduce = #dist.reduce<avg>}> : (tensor<4x16xf32>) -> tensor<4x16xf32>
// GENERIC: "dist.all_reduce"(%{{.*}}) <{axes = ["pp"], mesh = @m, reduce = #dist.reduce<max>}> : (tensor<4x16xf32>) -> tensor<4x16xf32>

// -----

dist.mesh @m axes = [dp = 2, tp = 4]
// CHECK-LABEL: func.func @all_gather
// CHECK-SAME:    (%[[X:.*]]: tensor<2x4x6xbf16>)
func.func @all_gather(%x: tensor<2x4x6xbf16>) -> (tensor<2x4x24xbf16>, tensor<16x4x6xbf16>) {
  // CHECK: dist.all_gather %[[X]] on @m axes [tp] dim = 2 : tensor<2x4x6xbf16> -> tensor<2x4x24xbf16>{{$}}
  %a = dist.all_gather %x on @m axes [tp] dim = 2 : tensor<2x4x6xbf16> -> tensor<2x4x24xbf16>
  // CHECK: dist.all_gather %[[X]] on @m axes [tp, dp] dim = 0 : tensor<2x4x6xbf16> -> tensor<16x4x6xbf16>{{$}}
  %b = dist.all_gather %x on @m axes [tp, dp] dim = 0 : tensor<2x4x6xbf16> -> tensor<16x4x6xbf16>
  return %a, %b : tensor<2x4x24xbf16>, tensor<16x4x6xbf16>
}
// GENERIC-LABEL: sym_name = "all_gather"
// GENERIC: "dist.all_gather"(%{{.*}}) <{axes = ["tp"], dim = 2 : i64, mesh = @m}> : (tensor<2x4x6xbf16>) -> tensor<2x4x24xbf16>
// GENERIC: "dist.all_gather"(%{{.*}}) <{axes = ["tp", "dp"], dim = 0 : i64, mesh = @m}> : (tensor<2x4x6xbf16>) -> tensor<16x4x6xbf16>

// -----

dist.mesh @m axes = [dp = 2, tp = 4]
// CHECK-LABEL: func.func @reduce_scatter
// CHECK-SAME:    (%[[X:.*]]: tensor<8x16xf32>)
func.func @reduce_scatter(%x: tensor<8x16xf32>) -> (tensor<8x4xf32>, tensor<1x16xf32>) {
  // CHECK: dist.reduce_scatter %[[X]] on @m axes [tp] dim = 1 reduce = sum : tensor<8x16xf32> -> tensor<8x4xf32>{{$}}
  %a = dist.reduce_scatter %x on @m axes [tp] dim = 1 reduce = sum : tensor<8x16xf32> -> tensor<8x4xf32>
  // CHECK: dist.reduce_scatter %[[X]] on @m axes [dp, tp] dim = 0 reduce = avg : tensor<8x16xf32> -> tensor<1x16xf32>{{$}}
  %b = dist.reduce_scatter %x on @m axes [dp, tp] dim = 0 reduce = avg : tensor<8x16xf32> -> tensor<1x16xf32>
  return %a, %b : tensor<8x4xf32>, tensor<1x16xf32>
}
// GENERIC-LABEL: sym_name = "reduce_scatter"
// GENERIC: "dist.reduce_scatter"(%{{.*}}) <{axes = ["tp"], dim = 1 : i64, mesh = @m, reduce = #dist.reduce<sum>}> : (tensor<8x16xf32>) -> tensor<8x4xf32>
// GENERIC: "dist.reduce_scatter"(%{{.*}}) <{axes = ["dp", "tp"], dim = 0 : i64, mesh = @m, reduce = #dist.reduce<avg>}> : (tensor<8x16xf32>) -> tensor<1x16xf32>

// -----

// Send and receive between pipeline stages: the peer has the listed
// coordinates and the sender's own on the other axes.
dist.mesh @m axes = [dp = 2, pp = 4, tp = 2]
// CHECK-LABEL: func.func @send_recv
// CHECK-SAME:    (%[[X:.*]]: tensor<4x16xf32>)
func.func @send_recv(%x: tensor<4x16xf32>) -> tensor<4x16xf32> {
  // CHECK: dist.send %[[X]] to @m [pp = 3] : tensor<4x16xf32>{{$}}
  dist.send %x to @m [pp = 3] : tensor<4x16xf32>
  // CHECK: dist.send %[[X]] to @m [pp = 1, tp = 0] : tensor<4x16xf32>{{$}}
  dist.send %x to @m [pp = 1, tp = 0] : tensor<4x16xf32>
  // CHECK: %[[Y:.*]] = dist.recv from @m [pp = 0] : tensor<4x16xf32>{{$}}
  %y = dist.recv from @m [pp = 0] : tensor<4x16xf32>
  // A label names the transfer in traces and error messages.
  // CHECK: dist.send %[[Y]] to @m [pp = 1] label "F mb1 activations stage0->1" : tensor<4x16xf32>{{$}}
  dist.send %y to @m [pp = 1] label "F mb1 activations stage0->1" : tensor<4x16xf32>
  // CHECK: %[[Z:.*]] = dist.recv from @m [pp = 1] label "B mb1 gradients stage1->0" : tensor<4x16xf32>{{$}}
  %z = dist.recv from @m [pp = 1] label "B mb1 gradients stage1->0" : tensor<4x16xf32>
  // CHECK: return %[[Z]]
  return %z : tensor<4x16xf32>
}
// GENERIC-LABEL: sym_name = "send_recv"
// GENERIC: "dist.send"(%{{.*}}) <{mesh = @m, peer_axes = ["pp"], peer_coords = array<i64: 3>}> : (tensor<4x16xf32>) -> ()
// GENERIC: "dist.send"(%{{.*}}) <{mesh = @m, peer_axes = ["pp", "tp"], peer_coords = array<i64: 1, 0>}> : (tensor<4x16xf32>) -> ()
// GENERIC: "dist.recv"() <{mesh = @m, peer_axes = ["pp"], peer_coords = array<i64: 0>}> : () -> tensor<4x16xf32>
// GENERIC: "dist.send"(%{{.*}}) <{label = "F mb1 activations stage0->1", mesh = @m, peer_axes = ["pp"], peer_coords = array<i64: 1>}> : (tensor<4x16xf32>) -> ()
// GENERIC: "dist.recv"() <{label = "B mb1 gradients stage1->0", mesh = @m, peer_axes = ["pp"], peer_coords = array<i64: 1>}> : () -> tensor<4x16xf32>

// -----

// Collectives are pure: unused ones are removed; send and recv are kept.
dist.mesh @m axes = [dp = 2, pp = 2]
// PURE-LABEL: func.func @pure
func.func @pure(%x: tensor<4xf32>) {
  // PURE-NOT: dist.all_reduce
  %a = dist.all_reduce %x on @m axes [dp] reduce = sum : tensor<4xf32>
  // PURE: dist.send
  dist.send %x to @m [pp = 1] : tensor<4xf32>
  // PURE: dist.recv
  %y = dist.recv from @m [pp = 0] : tensor<4xf32>
  return
}

// -----

dist.mesh @m axes = [dp = 2, tp = 2]
// CHECK-LABEL: func.func @all_reduce_bucket
// CHECK-SAME: (%[[W:.*]]: tensor<16x16xf32>, %[[B:.*]]: tensor<16xf32>)
func.func @all_reduce_bucket(%w: tensor<16x16xf32>, %b: tensor<16xf32>) -> (tensor<16x16xf32>, tensor<16xf32>) {
  // CHECK: %{{.*}}:2 = dist.all_reduce %[[W]], %[[B]] on @m axes [dp] reduce = avg {dist.label = "gradient bucket 0"} : tensor<16x16xf32>, tensor<16xf32>
  %gw, %gb = dist.all_reduce %w, %b on @m axes [dp] reduce = avg {dist.label = "gradient bucket 0"} : tensor<16x16xf32>, tensor<16xf32>
  return %gw, %gb : tensor<16x16xf32>, tensor<16xf32>
}

// -----

// Shardings on function arguments and results: split dimensions, several axes
// on one dimension (major first), partial sums, a scalar.
dist.mesh @m axes = [dp = 2, pp = 2, tp = 2]
// CHECK-LABEL: func.func private @shardings
// CHECK-SAME: tensor<8x16x64xf32> {dist.sharding = #dist.sharding<@m, {{\[\[}}dp], [], [tp]]>}
// CHECK-SAME: tensor<8x16xf32> {dist.sharding = #dist.sharding<@m, {{\[\[}}dp, tp], []], partial = [pp]>}
// CHECK-SAME: tensor<f32> {dist.sharding = #dist.sharding<@m, [], partial = [dp, tp]>}
// CHECK-SAME: -> (tensor<16x64xf32> {dist.sharding = #dist.sharding<@m, {{\[\[}}], []]>})
func.func private @shardings(
    tensor<8x16x64xf32> {dist.sharding = #dist.sharding<@m, [[dp], [], [tp]]>},
    tensor<8x16xf32> {dist.sharding = #dist.sharding<@m, [[dp, tp], []], partial = [pp]>},
    tensor<f32> {dist.sharding = #dist.sharding<@m, [], partial = [dp, tp]>})
    -> (tensor<16x64xf32> {dist.sharding = #dist.sharding<@m, [[], []]>})
// GENERIC: arg_attrs = [{dist.sharding = #dist.sharding<@m, {{\[\[}}dp], [], [tp]]>}, {dist.sharding = #dist.sharding<@m, {{\[\[}}dp, tp], []], partial = [pp]>}, {dist.sharding = #dist.sharding<@m, [], partial = [dp, tp]>}]
// GENERIC-SAME: res_attrs = [{dist.sharding = #dist.sharding<@m, {{\[\[}}], []]>}]
