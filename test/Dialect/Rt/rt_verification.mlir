// RUN: partition-opt %s -split-input-file -verify-diagnostics

// One case per error of the rt.kernel and rt.all_reduce verifiers (RtOps.cpp)
// and of the rt attribute checks (RtDialect.cpp).

//===----------------------------------------------------------------------===//
// rt.kernel: the kernel table
//===----------------------------------------------------------------------===//

func.func @unknown_kernel(%x: memref<4xf32>, %y: memref<4xf32>) {
  // expected-error @+1 {{'rt.kernel' op unknown kernel "matmul"}}
  rt.kernel "matmul" ins(%x : memref<4xf32>) outs(%y : memref<4xf32>)
  return
}

// -----

func.func @too_few_inputs(%x: memref<2x4x8xf32>, %y: memref<2x4x16xf32>) {
  // expected-error @+1 {{'rt.kernel' op kernel "linear" takes 2 inputs, but has 1}}
  rt.kernel "linear" ins(%x : memref<2x4x8xf32>) outs(%y : memref<2x4x16xf32>)
  return
}

// -----

func.func @inputs_for_fill(%x: memref<4xf32>, %y: memref<4xf32>) {
  // expected-error @+1 {{'rt.kernel' op kernel "fill" takes 0 inputs, but has 1}}
  rt.kernel "fill" ins(%x : memref<4xf32>) outs(%y : memref<4xf32>) floats = [0.0]
  return
}

// -----

func.func @too_many_outputs(%dy: memref<2x4x16xf32>, %x: memref<2x4x8xf32>, %dw: memref<16x8xf32>, %db: memref<16xf32>) {
  // expected-error @+1 {{'rt.kernel' op kernel "linear_grad_weight" takes 1 outputs, but has 2}}
  rt.kernel "linear_grad_weight" ins(%dy, %x : memref<2x4x16xf32>, memref<2x4x8xf32>) outs(%dw, %db : memref<16x8xf32>, memref<16xf32>)
  return
}

// -----

func.func @too_few_outputs(%p: memref<4xf32>, %g: memref<4xf32>, %m: memref<4xf32>, %v: memref<4xf32>, %t: memref<i32>, %lr: memref<f32>) {
  // expected-error @+1 {{'rt.kernel' op kernel "adamw" takes 3 outputs, but has 1}}
  rt.kernel "adamw" ins(%p, %g, %m, %v, %t, %lr : memref<4xf32>, memref<4xf32>, memref<4xf32>, memref<4xf32>, memref<i32>, memref<f32>) outs(%p : memref<4xf32>) floats = [0.9, 0.95, 1.0e-08, 0.0]
  return
}

// -----

func.func @missing_ints(%q: memref<2x4x8xf32>, %k: memref<2x4x8xf32>, %v: memref<2x4x8xf32>, %o: memref<2x4x8xf32>) {
  // expected-error @+1 {{'rt.kernel' op kernel "attention" takes 3 ints, but has 2}}
  rt.kernel "attention" ins(%q, %k, %v : memref<2x4x8xf32>, memref<2x4x8xf32>, memref<2x4x8xf32>) outs(%o : memref<2x4x8xf32>) ints = [2, 2] floats = [0.0]
  return
}

// -----

func.func @ints_for_gelu(%x: memref<4xf32>, %y: memref<4xf32>) {
  // expected-error @+1 {{'rt.kernel' op kernel "gelu" takes 0 ints, but has 1}}
  rt.kernel "gelu" ins(%x : memref<4xf32>) outs(%y : memref<4xf32>) ints = [1]
  return
}

// -----

func.func @missing_floats(%x: memref<2x4x8xf32>, %g: memref<8xf32>, %b: memref<8xf32>, %y: memref<2x4x8xf32>) {
  // expected-error @+1 {{'rt.kernel' op kernel "layernorm" takes 1 floats, but has 0}}
  rt.kernel "layernorm" ins(%x, %g, %b : memref<2x4x8xf32>, memref<8xf32>, memref<8xf32>) outs(%y : memref<2x4x8xf32>)
  return
}

// -----

func.func @too_many_floats(%x: memref<4xf32>) {
  // expected-error @+1 {{'rt.kernel' op kernel "fill" takes 1 floats, but has 2}}
  rt.kernel "fill" outs(%x : memref<4xf32>) floats = [1.0, 2.0]
  return
}

//===----------------------------------------------------------------------===//
// rt.kernel: operand layouts
//===----------------------------------------------------------------------===//

// -----

func.func @dynamic_input(%x: memref<?x8xf32>, %y: memref<4x8xf32>) {
  // expected-error @+1 {{'rt.kernel' op operand 'memref<?x8xf32>' must have a static shape and a contiguous row-major layout}}
  rt.kernel "gelu" ins(%x : memref<?x8xf32>) outs(%y : memref<4x8xf32>)
  return
}

// -----

func.func @dynamic_output(%x: memref<4x8xf32>, %y: memref<4x?xf32>) {
  // expected-error @+1 {{'rt.kernel' op operand 'memref<4x?xf32>' must have a static shape and a contiguous row-major layout}}
  rt.kernel "gelu" ins(%x : memref<4x8xf32>) outs(%y : memref<4x?xf32>)
  return
}

// -----

// A column block of a matrix: rows are 8 apart but only 4 long.
func.func @column_block(%x: memref<4x8xf32>, %y: memref<4x4xf32>) {
  %s = memref.subview %x[0, 4] [4, 4] [1, 1] : memref<4x8xf32> to memref<4x4xf32, strided<[8, 1], offset: 4>>
  // expected-error @+1 {{'rt.kernel' op operand 'memref<4x4xf32, strided<[8, 1], offset: 4>>' must have a static shape and a contiguous row-major layout}}
  rt.kernel "gelu" ins(%s : memref<4x4xf32, strided<[8, 1], offset: 4>>) outs(%y : memref<4x4xf32>)
  return
}

// -----

// Every other element.
func.func @strided_output(%x: memref<4xf32>, %y: memref<8xf32>) {
  %s = memref.subview %y[0] [4] [2] : memref<8xf32> to memref<4xf32, strided<[2]>>
  // expected-error @+1 {{'rt.kernel' op operand 'memref<4xf32, strided<[2]>>' must have a static shape and a contiguous row-major layout}}
  rt.kernel "gelu" ins(%x : memref<4xf32>) outs(%s : memref<4xf32, strided<[2]>>)
  return
}

// -----

// A column-major (transposed) layout.
func.func @column_major(%x: memref<4x8xf32, strided<[1, 4]>>, %y: memref<4x8xf32>) {
  // expected-error @+1 {{'rt.kernel' op operand 'memref<4x8xf32, strided<[1, 4]>>' must have a static shape and a contiguous row-major layout}}
  rt.kernel "copy" ins(%x : memref<4x8xf32, strided<[1, 4]>>) outs(%y : memref<4x8xf32>)
  return
}

// -----

// A layout that is not strided at all.
func.func @affine_layout(%x: memref<4x8xf32, affine_map<(d0, d1) -> (d1 floordiv 2, d0)>>, %y: memref<4x8xf32>) {
  // expected-error @+1 {{'rt.kernel' op operand 'memref<4x8xf32, affine_map<(d0, d1) -> (d1 floordiv 2, d0)>>' must have a static shape and a contiguous row-major layout}}
  rt.kernel "copy" ins(%x : memref<4x8xf32, affine_map<(d0, d1) -> (d1 floordiv 2, d0)>>) outs(%y : memref<4x8xf32>)
  return
}

//===----------------------------------------------------------------------===//
// rt.kernel: aliasing
//===----------------------------------------------------------------------===//

// -----

func.func @gelu_in_place(%x: memref<4xf32>) {
  // expected-error @+1 {{'rt.kernel' op kernel "gelu" cannot write one of its inputs}}
  rt.kernel "gelu" ins(%x : memref<4xf32>) outs(%x : memref<4xf32>)
  return
}

// -----

// The second output of a multi-output kernel aliases an input.
func.func @layernorm_grad_in_place(%dy: memref<2x4x8xf32>, %x: memref<2x4x8xf32>, %g: memref<8xf32>, %dx: memref<2x4x8xf32>, %db: memref<8xf32>) {
  // expected-error @+1 {{'rt.kernel' op kernel "layernorm_grad" cannot write one of its inputs}}
  rt.kernel "layernorm_grad" ins(%dy, %x, %g : memref<2x4x8xf32>, memref<2x4x8xf32>, memref<8xf32>) outs(%dx, %g, %db : memref<2x4x8xf32>, memref<8xf32>, memref<8xf32>) floats = [1.0e-05]
  return
}

// -----

func.func @copy_in_place(%x: memref<4xf32>) {
  // expected-error @+1 {{'rt.kernel' op kernel "copy" cannot write one of its inputs}}
  rt.kernel "copy" ins(%x : memref<4xf32>) outs(%x : memref<4xf32>)
  return
}

// -----

// Even in-place kernels write each buffer once.
func.func @adamw_same_output_twice(%p: memref<4xf32>, %g: memref<4xf32>, %m: memref<4xf32>, %v: memref<4xf32>, %t: memref<i32>, %lr: memref<f32>) {
  // expected-error @+1 {{'rt.kernel' op kernel "adamw" writes one buffer twice: output #2 is output #1}}
  rt.kernel "adamw" ins(%p, %g, %m, %v, %t, %lr : memref<4xf32>, memref<4xf32>, memref<4xf32>, memref<4xf32>, memref<i32>, memref<f32>) outs(%p, %m, %m : memref<4xf32>, memref<4xf32>, memref<4xf32>) floats = [0.9, 0.95, 1.0e-08, 0.0]
  return
}

// -----

func.func @swiglu_grad_same_output_twice(%dy: memref<4xf32>, %gate: memref<4xf32>, %up: memref<4xf32>, %d: memref<4xf32>) {
  // expected-error @+1 {{'rt.kernel' op kernel "swiglu_grad" writes one buffer twice: output #1 is output #0}}
  rt.kernel "swiglu_grad" ins(%dy, %gate, %up : memref<4xf32>, memref<4xf32>, memref<4xf32>) outs(%d, %d : memref<4xf32>, memref<4xf32>)
  return
}

//===----------------------------------------------------------------------===//
// ODS constraints that matter
//===----------------------------------------------------------------------===//

// -----

func.func @tensor_operand(%x: tensor<4xf32>, %y: memref<4xf32>) {
  // expected-error @+1 {{'rt.kernel' op operand #0 must be variadic of memref of any type values, but got 'tensor<4xf32>'}}
  "rt.kernel"(%x, %y) <{kernel = "gelu", operandSegmentSizes = array<i32: 1, 1>}> : (tensor<4xf32>, memref<4xf32>) -> ()
  return
}

// -----

func.func @missing_kernel_name(%x: memref<4xf32>, %y: memref<4xf32>) {
  // expected-error @+1 {{'rt.kernel' op requires attribute 'kernel'}}
  "rt.kernel"(%x, %y) <{operandSegmentSizes = array<i32: 1, 1>}> : (memref<4xf32>, memref<4xf32>) -> ()
  return
}

//===----------------------------------------------------------------------===//
// rt.role / rt.name on arguments (RtDialect::verifyRegionArgAttribute)
//===----------------------------------------------------------------------===//

// -----

// expected-error @+1 {{'rt.role' on argument #0 must be one of param, moment1, moment2, step, lr, tokens, targets, loss, gradient, axis_index, but is "weights"}}
func.func @unknown_role(%x: memref<4xf32> {rt.role = "weights"}) {
  return
}

// -----

// expected-error @+1 {{'rt.role' on argument #0 must be one of param, moment1, moment2, step, lr, tokens, targets, loss, gradient, axis_index, but is 1 : i64}}
func.func @role_not_a_string(%x: memref<4xf32> {rt.role = 1 : i64}) {
  return
}

// -----

// expected-error @+1 {{'rt.role' on argument #1 must be one of param, moment1, moment2, step, lr, tokens, targets, loss, gradient, axis_index, but is "temporary"}}
func.func @role_temporary(%w: memref<4xf32> {rt.role = "param", rt.name = "w"}, %x: memref<4xf32> {rt.role = "temporary"}) {
  return
}

// -----

// expected-error @+1 {{'rt.name' on argument #0 must be a non-empty string}}
func.func @empty_name(%x: memref<4xf32> {rt.role = "param", rt.name = ""}) {
  return
}

// -----

// expected-error @+1 {{'rt.name' on argument #0 must be a non-empty string}}
func.func @name_not_a_string(%x: memref<4xf32> {rt.role = "param", rt.name = ["w"]}) {
  return
}

// -----

// expected-error @+1 {{unknown attribute 'rt.offset' on argument #0}}
func.func @unknown_argument_attribute(%x: memref<4xf32> {rt.offset = 0 : i64}) {
  return
}

// -----

// The arena size belongs on the function, not on an argument.
// expected-error @+1 {{unknown attribute 'rt.arena_bytes' on argument #0}}
func.func @arena_bytes_on_argument(%arena: memref<64xi8> {rt.arena_bytes = 64 : i64}) {
  return
}

//===----------------------------------------------------------------------===//
// rt.* on operations (RtDialect::verifyOperationAttribute)
//===----------------------------------------------------------------------===//

// -----

func.func @view_unknown_role(%arena: memref<64xi8>) {
  %c0 = arith.constant 0 : index
  // expected-error @+1 {{'rt.role' must be one of param, moment1, moment2, step, lr, tokens, targets, loss, gradient, axis_index, but is "Param"}}
  %w = memref.view %arena[%c0][] {rt.role = "Param"} : memref<64xi8> to memref<4xf32>
  return
}

// -----

func.func @view_empty_name(%arena: memref<64xi8>) {
  %c0 = arith.constant 0 : index
  // expected-error @+1 {{'rt.name' must be a non-empty string}}
  %w = memref.view %arena[%c0][] {rt.role = "param", rt.name = ""} : memref<64xi8> to memref<4xf32>
  return
}

// -----

func.func @view_unknown_attribute(%arena: memref<64xi8>) {
  %c0 = arith.constant 0 : index
  // expected-error @+1 {{unknown attribute 'rt.size'}}
  %w = memref.view %arena[%c0][] {rt.size = 16 : i64} : memref<64xi8> to memref<4xf32>
  return
}

// -----

// expected-error @+1 {{'rt.arena_bytes' must be a non-negative integer, but is -64 : i64}}
func.func @negative_arena_bytes(%arena: memref<64xi8>) attributes {rt.arena_bytes = -64 : i64} {
  return
}

// -----

// expected-error @+1 {{'rt.arena_bytes' must be a non-negative integer, but is "64"}}
func.func @arena_bytes_not_an_integer(%arena: memref<64xi8>) attributes {rt.arena_bytes = "64"} {
  return
}

// -----

// expected-error @+1 {{'rt.arena_bytes' must be a non-negative integer, but is 6.400000e+01 : f32}}
func.func @arena_bytes_float(%arena: memref<64xi8>) attributes {rt.arena_bytes = 64.0 : f32} {
  return
}

// -----

// rt.role on an unknown op is checked like on a view.
func.func @role_on_alloc() {
  // expected-error @+1 {{'rt.role' must be one of param, moment1, moment2, step, lr, tokens, targets, loss, gradient, axis_index, but is "activation"}}
  %a = memref.alloc() {rt.role = "activation"} : memref<4xf32>
  return
}

//===----------------------------------------------------------------------===//
// rt.* on results (RtDialect::verifyRegionResultAttribute)
//===----------------------------------------------------------------------===//

// -----

// expected-error @+1 {{'rt.role' on result #1: rt attributes belong on arguments and views}}
func.func @role_on_result(%x: memref<f32>) -> (memref<f32>, memref<f32> {rt.role = "loss"}) {
  return %x, %x : memref<f32>, memref<f32>
}

//===----------------------------------------------------------------------===//
// rt.all_reduce: buffers
//===----------------------------------------------------------------------===//

// -----

dist.mesh @m axes = [dp = 2]
func.func @all_reduce_no_buffers() {
  // expected-error @+1 {{'rt.all_reduce' op must reduce at least one buffer}}
  "rt.all_reduce"() <{axes = ["dp"], label = "empty", mesh = @m, reduce = #dist.reduce<sum>}> : () -> ()
  return
}

// -----

dist.mesh @m axes = [dp = 2]
func.func @all_reduce_i32(%x: memref<4xf32>, %s: memref<i32>) {
  // expected-error @+1 {{'rt.all_reduce' op buffer #1 'memref<i32>' must be f32 or bf16 with a static shape and the identity layout}}
  rt.all_reduce %x, %s on @m axes [dp] reduce = sum label = "step" : memref<4xf32>, memref<i32>
  return
}

// -----

dist.mesh @m axes = [dp = 2]
func.func @all_reduce_dynamic(%x: memref<?x8xf32>) {
  // expected-error @+1 {{'rt.all_reduce' op buffer #0 'memref<?x8xf32>' must be f32 or bf16 with a static shape and the identity layout}}
  rt.all_reduce %x on @m axes [dp] reduce = sum label = "g" : memref<?x8xf32>
  return
}

// -----

// Even a contiguous view with an offset: the runtime reduces whole buffers.
dist.mesh @m axes = [dp = 2]
func.func @all_reduce_strided(%x: memref<4x8xf32>) {
  %row = memref.subview %x[1, 0] [1, 8] [1, 1] : memref<4x8xf32> to memref<1x8xf32, strided<[8, 1], offset: 8>>
  // expected-error @+1 {{'rt.all_reduce' op buffer #0 'memref<1x8xf32, strided<[8, 1], offset: 8>>' must be f32 or bf16 with a static shape and the identity layout}}
  rt.all_reduce %row on @m axes [dp] reduce = sum label = "g" : memref<1x8xf32, strided<[8, 1], offset: 8>>
  return
}

// -----

dist.mesh @m axes = [dp = 2]
func.func @all_reduce_buffer_twice(%a: memref<4xf32>, %b: memref<8xf32>) {
  // expected-error @+1 {{'rt.all_reduce' op reduces one buffer twice: buffer #2 is buffer #0}}
  rt.all_reduce %a, %b, %a on @m axes [dp] reduce = sum label = "g" : memref<4xf32>, memref<8xf32>, memref<4xf32>
  return
}

//===----------------------------------------------------------------------===//
// rt.all_reduce: label, reduction and axes
//===----------------------------------------------------------------------===//

// -----

dist.mesh @m axes = [dp = 2]
func.func @all_reduce_empty_label(%x: memref<4xf32>) {
  // expected-error @+1 {{'rt.all_reduce' op must have a non-empty label}}
  rt.all_reduce %x on @m axes [dp] reduce = sum label = "" : memref<4xf32>
  return
}

// -----

dist.mesh @m axes = [dp = 2]
func.func @all_reduce_unknown_reduction(%x: memref<4xf32>) {
  // expected-error @+1 {{expected sum, avg or max, but got 'min'}}
  rt.all_reduce %x on @m axes [dp] reduce = min label = "g" : memref<4xf32>
  return
}

// -----

dist.mesh @m axes = [dp = 2]
func.func @all_reduce_reduction_not_a_kind(%x: memref<4xf32>) {
  // expected-error @+1 {{Invalid attribute `reduce` in property conversion: 1 : i32}}
  "rt.all_reduce"(%x) <{axes = ["dp"], label = "g", mesh = @m, reduce = 1 : i32}> : (memref<4xf32>) -> ()
  return
}

// -----

dist.mesh @m axes = [dp = 2]
func.func @all_reduce_no_axes(%x: memref<4xf32>) {
  // expected-error @+1 {{'rt.all_reduce' op must name at least one mesh axis}}
  rt.all_reduce %x on @m axes [] reduce = sum label = "g" : memref<4xf32>
  return
}

// -----

dist.mesh @m axes = [dp = 2, tp = 2]
func.func @all_reduce_axis_twice(%x: memref<4xf32>) {
  // expected-error @+1 {{'rt.all_reduce' op axis 'dp' is listed twice in axes ["dp", "tp", "dp"]}}
  rt.all_reduce %x on @m axes [dp, tp, dp] reduce = sum label = "g" : memref<4xf32>
  return
}

//===----------------------------------------------------------------------===//
// rt.all_reduce: the mesh (verifySymbolUses)
//===----------------------------------------------------------------------===//

// -----

func.func @all_reduce_no_mesh(%x: memref<4xf32>) {
  // expected-error @+1 {{'rt.all_reduce' op @m does not name a dist.mesh}}
  rt.all_reduce %x on @m axes [dp] reduce = sum label = "g" : memref<4xf32>
  return
}

// -----

func.func @m() {
  return
}
func.func @all_reduce_mesh_is_a_function(%x: memref<4xf32>) {
  // expected-error @+1 {{'rt.all_reduce' op @m does not name a dist.mesh}}
  rt.all_reduce %x on @m axes [dp] reduce = sum label = "g" : memref<4xf32>
  return
}

// -----

dist.mesh @m axes = [dp = 2, pp = 2]
func.func @all_reduce_unknown_axis(%x: memref<4xf32>) {
  // expected-error @+1 {{'rt.all_reduce' op axis 'tp' is not an axis of @m, whose axes are [dp = 2, pp = 2]}}
  rt.all_reduce %x on @m axes [dp, tp] reduce = sum label = "g" : memref<4xf32>
  return
}

// -----

func.func @held_on_a_view(%arena: memref<64xi8>) {
  %c0 = arith.constant 0 : index
  // expected-error @+1 {{'rt.held' must be a unit attribute on a memref.alloc}}
  %w = memref.view %arena[%c0][] {rt.held} : memref<64xi8> to memref<4xf32>
  return
}

// -----

func.func @held_not_unit() {
  // expected-error @+1 {{'rt.held' must be a unit attribute on a memref.alloc}}
  %a = memref.alloc() {rt.held = 1 : i64} : memref<4xf32>
  return
}
