// RUN: partition-opt %s -split-input-file -verify-diagnostics

// One case per error of the dist verifiers (DistOps.cpp), of the
// #dist.sharding attribute and of the dist attribute checks
// (DistDialect.cpp).

//===----------------------------------------------------------------------===//
// dist.mesh
//===----------------------------------------------------------------------===//

// expected-error @+1 {{'dist.mesh' op must have at least one axis}}
dist.mesh @m axes = []

// -----

// expected-error @+1 {{'dist.mesh' op axis 'tp' has size 0, but sizes must be positive}}
dist.mesh @m axes = [dp = 2, tp = 0]

// -----

// expected-error @+1 {{'dist.mesh' op axis 'dp' has size -2, but sizes must be positive}}
dist.mesh @m axes = [dp = -2]

// -----

// expected-error @+1 {{'dist.mesh' op axis 'tp' is listed twice in axes [dp, tp, tp]}}
dist.mesh @m axes = [dp = 2, tp = 2, tp = 4]

// -----

// expected-error @+1 {{'dist.mesh' op axis names must not be empty}}
dist.mesh @m axes = ["" = 2]

// -----

// expected-error @+1 {{'dist.mesh' op has 1 axis names but 2 sizes}}
"dist.mesh"() <{axis_names = ["dp"], axis_sizes = array<i64: 2, 2>, sym_name = "m"}> : () -> ()

// -----

func.func @mesh_in_function() {
  // expected-error @+1 {{'dist.mesh' op expects parent op 'builtin.module'}}
  dist.mesh @m axes = [dp = 2]
  return
}

// -----

dist.mesh @m axes = [dp = 2, tp = 2]
// expected-error @+1 {{axis 'tp' is used twice: by dimension 0 and by dimension 2}}
func.func private @twice(tensor<8x16x64xf32> {dist.sharding = #dist.sharding<@m, [[tp], [], [dp, tp]]>})

// -----

dist.mesh @m axes = [dp = 2, tp = 2]
// expected-error @+1 {{axis 'tp' is used twice: by dimension 1 and by partial}}
func.func private @partial_twice(tensor<8x16xf32> {dist.sharding = #dist.sharding<@m, [[], [tp]], partial = [tp]>})

// -----

dist.mesh @m axes = [dp = 2, tp = 2]
// expected-error @+1 {{'dist.sharding' of argument #0: @n does not name a dist.mesh}}
func.func private @no_mesh(tensor<8x16xf32> {dist.sharding = #dist.sharding<@n, [[dp], []]>})

// -----

dist.mesh @m axes = [dp = 2, tp = 2]
// expected-error @+1 {{'dist.sharding' of argument #1: the sharding has 2 dimensions, but the value 'tensor<8x16x64xf32>' has rank 3}}
func.func private @rank(tensor<8xf32>, tensor<8x16x64xf32> {dist.sharding = #dist.sharding<@m, [[dp], []]>})

// -----

dist.mesh @m axes = [dp = 2, tp = 2]
// expected-error @+1 {{'dist.sharding' of result #0: axis 'sp' is not an axis of @m, whose axes are [dp = 2, tp = 2]}}
func.func private @unknown_axis() -> (tensor<8x16xf32> {dist.sharding = #dist.sharding<@m, [[dp], [sp]]>})

// -----

dist.mesh @m axes = [dp = 2, tp = 2]
// expected-error @+1 {{'dist.sharding' of result #0: axis 'pp' is not an axis of @m, whose axes are [dp = 2, tp = 2]}}
func.func private @unknown_partial_axis() -> (tensor<8x16xf32> {dist.sharding = #dist.sharding<@m, [[dp], []], partial = [pp]>})

// -----

dist.mesh @m axes = [dp = 2, tp = 2]
// expected-error @+1 {{'dist.sharding' of argument #0: dimension 2 of size 6 is not divisible by 4, the size of axes [tp, dp]}}
func.func private @not_divisible(tensor<8x16x6xf32> {dist.sharding = #dist.sharding<@m, [[], [], [tp, dp]]>})

// -----

dist.mesh @m axes = [dp = 2, tp = 2]
// expected-error @+1 {{'dist.sharding' of argument #0: must be a #dist.sharding, but is 1 : i64}}
func.func private @not_a_sharding(tensor<8x16xf32> {dist.sharding = 1})

// -----

dist.mesh @m axes = [dp = 2, tp = 2]
// expected-error @+1 {{'dist.sharding' of argument #0: the value must be a statically shaped tensor, but is 'tensor<?x16xf32>'}}
func.func private @dynamic(tensor<?x16xf32> {dist.sharding = #dist.sharding<@m, [[dp], []]>})

// -----

// expected-error @+1 {{unknown attribute 'dist.layout' on argument #0}}
func.func private @unknown_arg_attribute(tensor<8xf32> {dist.layout = 1})

// -----

// expected-error @+1 {{unknown attribute 'dist.layout' on result #0}}
func.func private @unknown_result_attribute() -> (tensor<8xf32> {dist.layout = 1})

// -----

func.func @unknown_op_attribute(%x: tensor<8xf32>) {
  // expected-error @+1 {{unknown attribute 'dist.layout'}}
  func.return {dist.layout = 1}
}

// -----

dist.mesh @m axes = [dp = 2, tp = 2]
func.func @shardings_per_result(%x: tensor<8x16xf32>) -> tensor<8x16xf32> {
  // expected-error @+1 {{'dist.sharding' must have one sharding per result, 1, but has 2}}
  %y = dist.all_reduce %x on @m axes [tp] reduce = sum {dist.sharding = [#dist.sharding<@m, [[dp], []]>, #dist.sharding<@m, [[dp], []]>]} : tensor<8x16xf32>
  return %y : tensor<8x16xf32>
}

// -----

dist.mesh @m axes = [dp = 2, pp = 2]
func.func @bare_sharding_without_result(%x: tensor<8x16xf32>) {
  // expected-error @+1 {{'dist.sharding' on an op with 0 results must be an array of shardings, one per result}}
  dist.send %x to @m [pp = 1] {dist.sharding = #dist.sharding<@m, [[dp], []]>} : tensor<8x16xf32>
  return
}

// -----

dist.mesh @m axes = [dp = 2, tp = 2]
func.func @result_not_divisible(%x: tensor<8x6xf32>) -> tensor<16x6xf32> {
  // expected-error @+1 {{'dist.sharding' of result #0: dimension 1 of size 6 is not divisible by 4, the size of axes [dp, tp]}}
  %y = dist.all_gather %x on @m axes [dp] dim = 0 {dist.sharding = #dist.sharding<@m, [[], [dp, tp]]>} : tensor<8x6xf32> -> tensor<16x6xf32>
  return %y : tensor<16x6xf32>
}

//===----------------------------------------------------------------------===//
// Collectives: checks without the mesh
//===----------------------------------------------------------------------===//

// -----

dist.mesh @m axes = [dp = 2, tp = 2]
func.func @no_axes(%x: tensor<8x16xf32>) -> tensor<8x16xf32> {
  // expected-error @+1 {{'dist.all_reduce' op must name at least one mesh axis}}
  %y = dist.all_reduce %x on @m axes [] reduce = sum : tensor<8x16xf32>
  return %y : tensor<8x16xf32>
}

// -----

dist.mesh @m axes = [dp = 2, tp = 2]
func.func @axis_twice(%x: tensor<8x16xf32>) -> tensor<8x16xf32> {
  // expected-error @+1 {{'dist.all_reduce' op axis 'tp' is listed twice in axes [tp, dp, tp]}}
  %y = dist.all_reduce %x on @m axes [tp, dp, tp] reduce = sum : tensor<8x16xf32>
  return %y : tensor<8x16xf32>
}

// -----

dist.mesh @m axes = [dp = 2, tp = 2]
func.func @reduce_kind(%x: tensor<8x16xf32>) -> tensor<8x16xf32> {
  // expected-error @+1 {{expected sum, avg or max, but got 'min'}}
  %y = dist.all_reduce %x on @m axes [tp] reduce = min : tensor<8x16xf32>
  return %y : tensor<8x16xf32>
}

// -----

dist.mesh @m axes = [dp = 2, tp = 2]
func.func @all_reduce_type(%x: tensor<8x16xf32>) -> tensor<8x8xf32> {
  // expected-error @+1 {{'dist.all_reduce' op failed to verify that all of {inputs, results} have same type}}
  %y = "dist.all_reduce"(%x) <{axes = ["tp"], mesh = @m, reduce = #dist.reduce<sum>}> : (tensor<8x16xf32>) -> tensor<8x8xf32>
  return %y : tensor<8x8xf32>
}

// -----

dist.mesh @m axes = [dp = 2, tp = 2]
func.func @dynamic_input(%x: tensor<?x16xf32>) -> tensor<?x16xf32> {
  // expected-error @+1 {{'dist.all_reduce' op operand #0 must be variadic of statically shaped tensor of any type values, but got 'tensor<?x16xf32>'}}
  %y = dist.all_reduce %x on @m axes [tp] reduce = max : tensor<?x16xf32>
  return %y : tensor<?x16xf32>
}

// -----

dist.mesh @m axes = [dp = 2, tp = 2]
func.func @negative_dim(%x: tensor<8x16xf32>) -> tensor<8x16xf32> {
  // expected-error @+1 {{'dist.all_gather' op attribute 'dim' failed to satisfy constraint: 64-bit signless integer attribute whose value is non-negative}}
  %y = dist.all_gather %x on @m axes [tp] dim = -1 : tensor<8x16xf32> -> tensor<8x16xf32>
  return %y : tensor<8x16xf32>
}

// -----

dist.mesh @m axes = [dp = 2, tp = 2]
func.func @gather_dim_out_of_range(%x: tensor<8x16xf32>) -> tensor<8x16xf32> {
  // expected-error @+1 {{'dist.all_gather' op dim 2 is not a dimension of the input 'tensor<8x16xf32>' of rank 2}}
  %y = dist.all_gather %x on @m axes [tp] dim = 2 : tensor<8x16xf32> -> tensor<8x16xf32>
  return %y : tensor<8x16xf32>
}

// -----

dist.mesh @m axes = [dp = 2, tp = 2]
func.func @element_type(%x: tensor<8x16xf32>) -> tensor<8x8xf16> {
  // expected-error @+1 {{'dist.reduce_scatter' op result 'tensor<8x8xf16>' must have the rank and element type of the input 'tensor<8x16xf32>'}}
  %y = dist.reduce_scatter %x on @m axes [tp] dim = 1 reduce = sum : tensor<8x16xf32> -> tensor<8x8xf16>
  return %y : tensor<8x8xf16>
}

// -----

dist.mesh @m axes = [dp = 2, tp = 2]
func.func @rank(%x: tensor<8x16xf32>) -> tensor<8x16x2xf32> {
  // expected-error @+1 {{'dist.all_gather' op result 'tensor<8x16x2xf32>' must have the rank and element type of the input 'tensor<8x16xf32>'}}
  %y = dist.all_gather %x on @m axes [tp] dim = 1 : tensor<8x16xf32> -> tensor<8x16x2xf32>
  return %y : tensor<8x16x2xf32>
}

//===----------------------------------------------------------------------===//
// Collectives: checks against the mesh
//===----------------------------------------------------------------------===//

// -----

func.func @no_mesh(%x: tensor<8x16xf32>) -> tensor<8x16xf32> {
  // expected-error @+1 {{'dist.all_reduce' op @m does not name a dist.mesh}}
  %y = dist.all_reduce %x on @m axes [tp] reduce = sum : tensor<8x16xf32>
  return %y : tensor<8x16xf32>
}

// -----

dist.mesh @m axes = [dp = 2, tp = 2]
func.func @unknown_axis(%x: tensor<8x16xf32>) -> tensor<8x16xf32> {
  // expected-error @+1 {{'dist.all_reduce' op axis 'sp' is not an axis of @m, whose axes are [dp = 2, tp = 2]}}
  %y = dist.all_reduce %x on @m axes [sp] reduce = avg : tensor<8x16xf32>
  return %y : tensor<8x16xf32>
}

// -----

dist.mesh @m axes = [dp = 2, tp = 2]
func.func @gather_result(%x: tensor<8x8xf32>) -> tensor<8x12xf32> {
  // expected-error @+1 {{'dist.all_gather' op result must be 'tensor<8x16xf32>' (dimension 1 of size 8 times 2, the size of axes [tp]), but is 'tensor<8x12xf32>'}}
  %y = dist.all_gather %x on @m axes [tp] dim = 1 : tensor<8x8xf32> -> tensor<8x12xf32>
  return %y : tensor<8x12xf32>
}

// -----

dist.mesh @m axes = [dp = 2, tp = 2]
func.func @scatter_not_divisible(%x: tensor<8x6xf32>) -> tensor<8x2xf32> {
  // expected-error @+1 {{'dist.reduce_scatter' op dimension 1 of size 6 is not divisible by 4, the size of axes [tp, dp]}}
  %y = dist.reduce_scatter %x on @m axes [tp, dp] dim = 1 reduce = sum : tensor<8x6xf32> -> tensor<8x2xf32>
  return %y : tensor<8x2xf32>
}

// -----

dist.mesh @m axes = [dp = 2, tp = 4]
func.func @scatter_result(%x: tensor<8x16xf32>) -> tensor<8x8xf32> {
  // expected-error @+1 {{'dist.reduce_scatter' op result must be 'tensor<8x4xf32>' (dimension 1 of size 16 divided by 4, the size of axes [tp]), but is 'tensor<8x8xf32>'}}
  %y = dist.reduce_scatter %x on @m axes [tp] dim = 1 reduce = sum : tensor<8x16xf32> -> tensor<8x8xf32>
  return %y : tensor<8x8xf32>
}

//===----------------------------------------------------------------------===//
// Point to point
//===----------------------------------------------------------------------===//

// -----

dist.mesh @m axes = [dp = 2, pp = 2]
func.func @no_peer(%x: tensor<8x16xf32>) {
  // expected-error @+1 {{'dist.send' op must give the peer's coordinate on at least one mesh axis}}
  dist.send %x to @m [] : tensor<8x16xf32>
  return
}

// -----

dist.mesh @m axes = [dp = 2, pp = 2]
func.func @negative_peer() -> tensor<8x16xf32> {
  // expected-error @+1 {{'dist.recv' op coordinate -1 of axis 'pp' is negative}}
  %y = dist.recv from @m [pp = -1] : tensor<8x16xf32>
  return %y : tensor<8x16xf32>
}

// -----

dist.mesh @m axes = [dp = 2, pp = 2]
func.func @peer_axis_twice(%x: tensor<8x16xf32>) {
  // expected-error @+1 {{'dist.send' op axis 'pp' is listed twice in peer axes [pp, dp, pp]}}
  dist.send %x to @m [pp = 1, dp = 0, pp = 0] : tensor<8x16xf32>
  return
}

// -----

dist.mesh @m axes = [dp = 2, pp = 2]
func.func @peer_counts() -> tensor<8x16xf32> {
  // expected-error @+1 {{'dist.recv' op has 1 peer axes but 2 coordinates}}
  %y = "dist.recv"() <{mesh = @m, peer_axes = ["pp"], peer_coords = array<i64: 0, 1>}> : () -> tensor<8x16xf32>
  return %y : tensor<8x16xf32>
}

// -----

func.func @send_no_mesh(%x: tensor<8x16xf32>) {
  // expected-error @+1 {{'dist.send' op @m does not name a dist.mesh}}
  dist.send %x to @m [pp = 1] : tensor<8x16xf32>
  return
}

// -----

dist.mesh @m axes = [dp = 2, pp = 2]
func.func @peer_unknown_axis() -> tensor<8x16xf32> {
  // expected-error @+1 {{'dist.recv' op axis 'tp' is not an axis of @m, whose axes are [dp = 2, pp = 2]}}
  %y = dist.recv from @m [tp = 0] : tensor<8x16xf32>
  return %y : tensor<8x16xf32>
}

// -----

dist.mesh @m axes = [dp = 2, pp = 4]
func.func @peer_out_of_range(%x: tensor<8x16xf32>) {
  // expected-error @+1 {{'dist.send' op coordinate 4 of axis 'pp' is out of range: the axis has size 4}}
  dist.send %x to @m [pp = 4] : tensor<8x16xf32>
  return
}

// -----

dist.mesh @m axes = [dp = 2, tp = 2]
func.func @all_reduce_nothing() {
  // expected-error @+1 {{'dist.all_reduce' op must reduce at least one tensor}}
  "dist.all_reduce"() <{axes = ["dp"], mesh = @m, reduce = #dist.reduce<avg>}> : () -> ()
  return
}

// -----

dist.mesh @m axes = [dp = 2, tp = 2]
func.func @bucket_types(%x: tensor<8x16xf32>, %b: tensor<16xf32>) -> tensor<16xf32> {
  // expected-error @+1 {{'dist.all_reduce' op failed to verify that all of {inputs, results} have same type}}
  %y:2 = "dist.all_reduce"(%x, %b) <{axes = ["dp"], mesh = @m, reduce = #dist.reduce<avg>}> : (tensor<8x16xf32>, tensor<16xf32>) -> (tensor<16xf32>, tensor<8x16xf32>)
  return %y#0 : tensor<16xf32>
}

// -----

dist.mesh @m axes = [dp = 2, tp = 2]
func.func @label_type(%x: tensor<8x16xf32>) -> tensor<8x16xf32> {
  // expected-error @+1 {{'dist.label' must be a string, but is 3 : i64}}
  %y = dist.all_reduce %x on @m axes [dp] reduce = avg {dist.label = 3} : tensor<8x16xf32>
  return %y : tensor<8x16xf32>
}
