// RUN: partition-opt %s --split-input-file --lower-to-rt | FileCheck %s
// The output verifies and is stable under a round trip.
// RUN: partition-opt %s --split-input-file --lower-to-rt | partition-opt --split-input-file --verify-roundtrip > /dev/null

// Hand-written tensor-level steps (the form --xfmr-train-step produces), one
// concern per case: the kernel and parameters of each op, buffers of slices
// and constants, and how results become in-place updates of the arguments.
// lower_to_rt_train_step.mlir runs the pass on real train-step output.

//===----------------------------------------------------------------------===//
// Kernel selection
//===----------------------------------------------------------------------===//

// Every op writes a fresh allocation; operands are inputs and results
// outputs, in order.
// CHECK-LABEL: func.func @linear
// CHECK-SAME:    (%[[X:.*]]: memref<2x4x8xf32> {rt.name = "x", rt.role = "param"}, %[[W:.*]]: memref<12x8xf32> {rt.name = "w", rt.role = "param"}, %[[B:.*]]: memref<12xf32> {rt.name = "b", rt.role = "param"},
// CHECK-SAME:     %[[LOSS:.*]]: memref<f32> {rt.role = "loss"})
// CHECK-SAME:    attributes {xfmr.train_step = {}}
// CHECK:         %[[Y0:.*]] = memref.alloc() : memref<2x4x12xf32>
// CHECK-NEXT:    rt.kernel "linear" ins(%[[X]], %[[W]] : memref<2x4x8xf32>, memref<12x8xf32>) outs(%[[Y0]] : memref<2x4x12xf32>){{$}}
// CHECK-NEXT:    %[[Y1:.*]] = memref.alloc() : memref<2x4x12xf32>
// CHECK-NEXT:    rt.kernel "linear_bias" ins(%[[X]], %[[W]], %[[B]] : memref<2x4x8xf32>, memref<12x8xf32>, memref<12xf32>) outs(%[[Y1]] : memref<2x4x12xf32>){{$}}
// CHECK-NEXT:    rt.kernel "fill" outs(%[[LOSS]] : memref<f32>) floats = [0.000000e+00]
// CHECK-NEXT:    return{{$}}
func.func @linear(%x: tensor<2x4x8xf32> {xfmr.param = "x"}, %w: tensor<12x8xf32> {xfmr.param = "w"}, %b: tensor<12xf32> {xfmr.param = "b"})
    -> (tensor<f32> {xfmr.output = "loss"}) attributes {xfmr.train_step = {}} {
  %y0 = xfmr.linear %x, %w : (tensor<2x4x8xf32>, tensor<12x8xf32>) -> tensor<2x4x12xf32>
  %y1 = xfmr.linear %x, %w, %b : (tensor<2x4x8xf32>, tensor<12x8xf32>, tensor<12xf32>) -> tensor<2x4x12xf32>
  %loss = arith.constant dense<0.0> : tensor<f32>
  return %loss : tensor<f32>
}

// -----

// CHECK-LABEL: func.func @linear_backward
// CHECK-SAME:    (%[[DY:.*]]: memref<2x4x12xf32> {{.*}}, %[[X:.*]]: memref<2x4x8xf32> {{.*}}, %[[W:.*]]: memref<12x8xf32> {{.*}}, %{{.*}}: memref<f32> {rt.role = "loss"})
// CHECK:         %[[DX:.*]] = memref.alloc() : memref<2x4x8xf32>
// CHECK-NEXT:    rt.kernel "linear_grad_input" ins(%[[DY]], %[[W]] : memref<2x4x12xf32>, memref<12x8xf32>) outs(%[[DX]] : memref<2x4x8xf32>){{$}}
// CHECK-NEXT:    %[[DW:.*]] = memref.alloc() : memref<12x8xf32>
// CHECK-NEXT:    rt.kernel "linear_grad_weight" ins(%[[DY]], %[[X]] : memref<2x4x12xf32>, memref<2x4x8xf32>) outs(%[[DW]] : memref<12x8xf32>){{$}}
// With a bias gradient: one kernel, two outputs.
// CHECK-NEXT:    %[[DW2:.*]] = memref.alloc() : memref<12x8xf32>
// CHECK-NEXT:    %[[DB2:.*]] = memref.alloc() : memref<12xf32>
// CHECK-NEXT:    rt.kernel "linear_grad_weight_bias" ins(%[[DY]], %[[X]] : memref<2x4x12xf32>, memref<2x4x8xf32>) outs(%[[DW2]], %[[DB2]] : memref<12x8xf32>, memref<12xf32>){{$}}
func.func @linear_backward(%dy: tensor<2x4x12xf32> {xfmr.param = "dy"}, %x: tensor<2x4x8xf32> {xfmr.param = "x"}, %w: tensor<12x8xf32> {xfmr.param = "w"})
    -> (tensor<f32> {xfmr.output = "loss"}) attributes {xfmr.train_step = {}} {
  %dx = xfmr.linear_grad_input %dy, %w : (tensor<2x4x12xf32>, tensor<12x8xf32>) -> tensor<2x4x8xf32>
  %dw = xfmr.linear_grad_weight %dy, %x : (tensor<2x4x12xf32>, tensor<2x4x8xf32>) -> tensor<12x8xf32>
  %dw2, %db2 = xfmr.linear_grad_weight %dy, %x : (tensor<2x4x12xf32>, tensor<2x4x8xf32>) -> (tensor<12x8xf32>, tensor<12xf32>)
  %loss = arith.constant dense<0.0> : tensor<f32>
  return %loss : tensor<f32>
}

// -----

// CHECK-LABEL: func.func @embeddings
// CHECK-SAME:    (%[[WTE:.*]]: memref<16x8xf32> {{.*}}, %[[WPE:.*]]: memref<6x8xf32> {{.*}}, %[[TOK:.*]]: memref<2x4xi32> {rt.role = "tokens"}, %{{.*}}: memref<f32> {rt.role = "loss"})
// CHECK:         %[[X:.*]] = memref.alloc() : memref<2x4x8xf32>
// CHECK-NEXT:    rt.kernel "embedding" ins(%[[TOK]], %[[WTE]] : memref<2x4xi32>, memref<16x8xf32>) outs(%[[X]] : memref<2x4x8xf32>){{$}}
// CHECK-NEXT:    %[[H:.*]] = memref.alloc() : memref<2x4x8xf32>
// CHECK-NEXT:    rt.kernel "position_embedding" ins(%[[X]], %[[WPE]] : memref<2x4x8xf32>, memref<6x8xf32>) outs(%[[H]] : memref<2x4x8xf32>){{$}}
// CHECK-NEXT:    %[[DWPE:.*]] = memref.alloc() : memref<6x8xf32>
// CHECK-NEXT:    rt.kernel "position_embedding_grad" ins(%[[H]] : memref<2x4x8xf32>) outs(%[[DWPE]] : memref<6x8xf32>){{$}}
// CHECK-NEXT:    %[[DWTE:.*]] = memref.alloc() : memref<16x8xf32>
// CHECK-NEXT:    rt.kernel "embedding_grad" ins(%[[H]], %[[TOK]] : memref<2x4x8xf32>, memref<2x4xi32>) outs(%[[DWTE]] : memref<16x8xf32>){{$}}
func.func @embeddings(%wte: tensor<16x8xf32> {xfmr.param = "wte"}, %wpe: tensor<6x8xf32> {xfmr.param = "wpe"},
                      %tokens: tensor<2x4xi32> {xfmr.input = "tokens"})
    -> (tensor<f32> {xfmr.output = "loss"}) attributes {xfmr.train_step = {}} {
  %x = xfmr.embedding %tokens, %wte : (tensor<2x4xi32>, tensor<16x8xf32>) -> tensor<2x4x8xf32>
  %h = xfmr.position_embedding %x, %wpe : (tensor<2x4x8xf32>, tensor<6x8xf32>) -> tensor<2x4x8xf32>
  %dwpe = xfmr.position_embedding_grad %h : (tensor<2x4x8xf32>) -> tensor<6x8xf32>
  %dwte = xfmr.embedding_grad %h, %tokens : (tensor<2x4x8xf32>, tensor<2x4xi32>) -> tensor<16x8xf32>
  %loss = arith.constant dense<0.0> : tensor<f32>
  return %loss : tensor<f32>
}

// -----

// Norms pass their epsilon (the default, 1e-5, or the op's) as the float.
// CHECK-LABEL: func.func @norms
// CHECK-SAME:    (%[[X:.*]]: memref<2x4x8xf32> {{.*}}, %[[G:.*]]: memref<8xf32> {{.*}}, %[[B:.*]]: memref<8xf32> {{.*}}, %{{.*}}: memref<f32> {rt.role = "loss"})
// CHECK:         %[[Y:.*]] = memref.alloc() : memref<2x4x8xf32>
// CHECK-NEXT:    rt.kernel "layernorm" ins(%[[X]], %[[G]], %[[B]] : memref<2x4x8xf32>, memref<8xf32>, memref<8xf32>) outs(%[[Y]] : memref<2x4x8xf32>) floats = [1.000000e-05]{{$}}
// CHECK:         rt.kernel "layernorm_grad" ins(%[[Y]], %[[X]], %[[G]] : memref<2x4x8xf32>, memref<2x4x8xf32>, memref<8xf32>) outs(%{{.*}}, %{{.*}}, %{{.*}} : memref<2x4x8xf32>, memref<8xf32>, memref<8xf32>) floats = [1.000000e-03]{{$}}
// CHECK:         rt.kernel "rmsnorm" ins(%[[X]], %[[G]] : memref<2x4x8xf32>, memref<8xf32>) outs(%{{.*}} : memref<2x4x8xf32>) floats = [1.000000e-06]{{$}}
// CHECK:         rt.kernel "rmsnorm_grad" ins(%[[Y]], %[[X]], %[[G]] : memref<2x4x8xf32>, memref<2x4x8xf32>, memref<8xf32>) outs(%{{.*}}, %{{.*}} : memref<2x4x8xf32>, memref<8xf32>) floats = [1.000000e-05]{{$}}
func.func @norms(%x: tensor<2x4x8xf32> {xfmr.param = "x"}, %g: tensor<8xf32> {xfmr.param = "g"}, %b: tensor<8xf32> {xfmr.param = "b"})
    -> (tensor<f32> {xfmr.output = "loss"}) attributes {xfmr.train_step = {}} {
  %y = xfmr.layernorm %x, %g, %b : (tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
  %dx, %dg, %db = xfmr.layernorm_grad %y, %x, %g {epsilon = 1.0e-3 : f32} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<8xf32>) -> (tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>)
  %r = xfmr.rmsnorm %x, %g {epsilon = 1.0e-6 : f32} : (tensor<2x4x8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
  %rdx, %rdg = xfmr.rmsnorm_grad %y, %x, %g : (tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<8xf32>) -> (tensor<2x4x8xf32>, tensor<8xf32>)
  %loss = arith.constant dense<0.0> : tensor<f32>
  return %loss : tensor<f32>
}

// -----

// CHECK-LABEL: func.func @pointwise
// CHECK-SAME:    (%[[A:.*]]: memref<2x4x12xf32> {{.*}}, %[[B:.*]]: memref<2x4x12xf32> {{.*}}, %{{.*}}: memref<f32> {rt.role = "loss"})
// CHECK:         %[[G:.*]] = memref.alloc() : memref<2x4x12xf32>
// CHECK-NEXT:    rt.kernel "gelu" ins(%[[A]] : memref<2x4x12xf32>) outs(%[[G]] : memref<2x4x12xf32>){{$}}
// CHECK-NEXT:    %[[DG:.*]] = memref.alloc() : memref<2x4x12xf32>
// CHECK-NEXT:    rt.kernel "gelu_grad" ins(%[[B]], %[[A]] : memref<2x4x12xf32>, memref<2x4x12xf32>) outs(%[[DG]] : memref<2x4x12xf32>){{$}}
// CHECK-NEXT:    %[[S:.*]] = memref.alloc() : memref<2x4x12xf32>
// CHECK-NEXT:    rt.kernel "swiglu" ins(%[[A]], %[[B]] : memref<2x4x12xf32>, memref<2x4x12xf32>) outs(%[[S]] : memref<2x4x12xf32>){{$}}
// CHECK-NEXT:    %[[DGATE:.*]] = memref.alloc() : memref<2x4x12xf32>
// CHECK-NEXT:    %[[DUP:.*]] = memref.alloc() : memref<2x4x12xf32>
// CHECK-NEXT:    rt.kernel "swiglu_grad" ins(%[[S]], %[[A]], %[[B]] : memref<2x4x12xf32>, memref<2x4x12xf32>, memref<2x4x12xf32>) outs(%[[DGATE]], %[[DUP]] : memref<2x4x12xf32>, memref<2x4x12xf32>){{$}}
// CHECK-NEXT:    %[[SUM:.*]] = memref.alloc() : memref<2x4x12xf32>
// CHECK-NEXT:    rt.kernel "add" ins(%[[G]], %[[S]] : memref<2x4x12xf32>, memref<2x4x12xf32>) outs(%[[SUM]] : memref<2x4x12xf32>){{$}}
// CHECK-NEXT:    %[[SC:.*]] = memref.alloc() : memref<2x4x12xf32>
// CHECK-NEXT:    rt.kernel "scale" ins(%[[SUM]] : memref<2x4x12xf32>) outs(%[[SC]] : memref<2x4x12xf32>) floats = [-2.500000e-01]{{$}}
func.func @pointwise(%a: tensor<2x4x12xf32> {xfmr.param = "a"}, %b: tensor<2x4x12xf32> {xfmr.param = "b"})
    -> (tensor<f32> {xfmr.output = "loss"}) attributes {xfmr.train_step = {}} {
  %g = xfmr.gelu %a : (tensor<2x4x12xf32>) -> tensor<2x4x12xf32>
  %dg = xfmr.gelu_grad %b, %a : (tensor<2x4x12xf32>, tensor<2x4x12xf32>) -> tensor<2x4x12xf32>
  %s = xfmr.swiglu %a, %b : (tensor<2x4x12xf32>, tensor<2x4x12xf32>) -> tensor<2x4x12xf32>
  %dgate, %dup = xfmr.swiglu_grad %s, %a, %b : (tensor<2x4x12xf32>, tensor<2x4x12xf32>, tensor<2x4x12xf32>) -> (tensor<2x4x12xf32>, tensor<2x4x12xf32>)
  %sum = xfmr.add %g, %s : (tensor<2x4x12xf32>, tensor<2x4x12xf32>) -> tensor<2x4x12xf32>
  %sc = xfmr.scale %sum {factor = -0.25 : f32} : (tensor<2x4x12xf32>) -> tensor<2x4x12xf32>
  %loss = arith.constant dense<0.0> : tensor<f32>
  return %loss : tensor<f32>
}

// -----

// Attention: ints = [heads, kv_heads, causal], floats = [rope theta or 0].
// CHECK-LABEL: func.func @attention
// CHECK-SAME:    (%[[Q:.*]]: memref<2x4x8xf32> {{.*}}, %[[K:.*]]: memref<2x4x4xf32> {{.*}}, %[[V:.*]]: memref<2x4x4xf32> {{.*}}, %[[DO:.*]]: memref<2x4x8xf32> {{.*}}, %{{.*}}: memref<f32> {rt.role = "loss"})
// Causal (the default), grouped-query, no rotary embedding.
// CHECK:         rt.kernel "attention" ins(%[[Q]], %[[K]], %[[V]] : memref<2x4x8xf32>, memref<2x4x4xf32>, memref<2x4x4xf32>) outs(%{{.*}} : memref<2x4x8xf32>) ints = [4, 2, 1] floats = [0.000000e+00]{{$}}
// Not causal, with RoPE.
// CHECK:         rt.kernel "attention" ins(%[[Q]], %[[K]], %[[V]] : {{.*}}) outs(%{{.*}} : memref<2x4x8xf32>) ints = [2, 1, 0] floats = [1.000000e+04]{{$}}
// CHECK:         %[[DQ:.*]] = memref.alloc() : memref<2x4x8xf32>
// CHECK-NEXT:    %[[DK:.*]] = memref.alloc() : memref<2x4x4xf32>
// CHECK-NEXT:    %[[DV:.*]] = memref.alloc() : memref<2x4x4xf32>
// CHECK-NEXT:    rt.kernel "attention_grad" ins(%[[DO]], %[[Q]], %[[K]], %[[V]] : memref<2x4x8xf32>, memref<2x4x8xf32>, memref<2x4x4xf32>, memref<2x4x4xf32>) outs(%[[DQ]], %[[DK]], %[[DV]] : memref<2x4x8xf32>, memref<2x4x4xf32>, memref<2x4x4xf32>) ints = [4, 2, 1] floats = [5.000000e+05]{{$}}
// CHECK:         rt.kernel "attention_grad" {{.*}} ints = [2, 1, 0] floats = [0.000000e+00]{{$}}
func.func @attention(%q: tensor<2x4x8xf32> {xfmr.param = "q"}, %k: tensor<2x4x4xf32> {xfmr.param = "k"},
                     %v: tensor<2x4x4xf32> {xfmr.param = "v"}, %do: tensor<2x4x8xf32> {xfmr.param = "do"})
    -> (tensor<f32> {xfmr.output = "loss"}) attributes {xfmr.train_step = {}} {
  %o0 = xfmr.attention %q, %k, %v {num_heads = 4 : i64, num_kv_heads = 2 : i64} : (tensor<2x4x8xf32>, tensor<2x4x4xf32>, tensor<2x4x4xf32>) -> tensor<2x4x8xf32>
  %o1 = xfmr.attention %q, %k, %v {causal = false, num_heads = 2 : i64, num_kv_heads = 1 : i64, rope_theta = 1.0e+04 : f32} : (tensor<2x4x8xf32>, tensor<2x4x4xf32>, tensor<2x4x4xf32>) -> tensor<2x4x8xf32>
  %dq, %dk, %dv = xfmr.attention_grad %do, %q, %k, %v {num_heads = 4 : i64, num_kv_heads = 2 : i64, rope_theta = 5.0e+05 : f32} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x4xf32>, tensor<2x4x4xf32>) -> (tensor<2x4x8xf32>, tensor<2x4x4xf32>, tensor<2x4x4xf32>)
  %dq1, %dk1, %dv1 = xfmr.attention_grad %do, %q, %k, %v {causal = false, num_heads = 2 : i64, num_kv_heads = 1 : i64} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x4xf32>, tensor<2x4x4xf32>) -> (tensor<2x4x8xf32>, tensor<2x4x4xf32>, tensor<2x4x4xf32>)
  %loss = arith.constant dense<0.0> : tensor<f32>
  return %loss : tensor<f32>
}

// -----

// RoPE scaling takes the attention_scaled rows: ints = [heads, kv_heads,
// causal, window 0], floats = [theta, kind (1 linear, 2 llama3), factor,
// low_freq_factor, high_freq_factor, original context].
// CHECK-LABEL: func.func @attention_scaled
// CHECK: rt.kernel "attention_scaled" {{.*}} ints = [2, 1, 1, 0] floats = [5.000000e+05, 2.000000e+00, 3.200000e+01, 1.000000e+00, 4.000000e+00, 8.192000e+03]{{$}}
// CHECK: rt.kernel "attention_scaled_grad" {{.*}} ints = [2, 1, 1, 0] floats = [1.000000e+04, 1.000000e+00, 4.000000e+00, 0.000000e+00, 0.000000e+00, 0.000000e+00]{{$}}
func.func @attention_scaled(%q: tensor<2x4x8xf32> {xfmr.param = "q"}, %k: tensor<2x4x4xf32> {xfmr.param = "k"},
                            %v: tensor<2x4x4xf32> {xfmr.param = "v"}, %do: tensor<2x4x8xf32> {xfmr.param = "do"})
    -> (tensor<f32> {xfmr.output = "loss"}) attributes {xfmr.train_step = {}} {
  %o = xfmr.attention %q, %k, %v {num_heads = 2 : i64, num_kv_heads = 1 : i64, rope_theta = 5.0e+05 : f32, rope_scaling = "llama3", rope_scaling_factors = array<f64: 32.0, 1.0, 4.0, 8192.0>} : (tensor<2x4x8xf32>, tensor<2x4x4xf32>, tensor<2x4x4xf32>) -> tensor<2x4x8xf32>
  %dq, %dk, %dv = xfmr.attention_grad %do, %q, %k, %v {num_heads = 2 : i64, num_kv_heads = 1 : i64, rope_theta = 1.0e+04 : f32, rope_scaling = "linear", rope_scaling_factors = array<f64: 4.0>} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x4xf32>, tensor<2x4x4xf32>) -> (tensor<2x4x8xf32>, tensor<2x4x4xf32>, tensor<2x4x4xf32>)
  %loss = arith.constant dense<0.0> : tensor<f32>
  return %loss : tensor<f32>
}

// -----

// A sliding window below the sequence (T = 4) takes the attention_scaled
// rows with its window in ints[3] (kind 0 without RoPE scaling; the
// scaling's parameters beside it when the op has both); one of at least the
// sequence masks nothing and keeps the plain rows, as a model without one.
// CHECK-LABEL: func.func @attention_window
// CHECK: rt.kernel "attention_scaled" {{.*}} ints = [2, 1, 1, 3] floats = [1.000000e+04, 0.000000e+00, 1.000000e+00, 0.000000e+00, 0.000000e+00, 0.000000e+00]{{$}}
// CHECK: rt.kernel "attention_scaled_grad" {{.*}} ints = [2, 1, 1, 2] floats = [1.000000e+04, 1.000000e+00, 4.000000e+00, 0.000000e+00, 0.000000e+00, 0.000000e+00]{{$}}
// CHECK: rt.kernel "attention" {{.*}} ints = [2, 1, 1] floats = [1.000000e+04]{{$}}
func.func @attention_window(%q: tensor<2x4x8xf32> {xfmr.param = "q"}, %k: tensor<2x4x4xf32> {xfmr.param = "k"},
                            %v: tensor<2x4x4xf32> {xfmr.param = "v"}, %do: tensor<2x4x8xf32> {xfmr.param = "do"})
    -> (tensor<f32> {xfmr.output = "loss"}) attributes {xfmr.train_step = {}} {
  %o = xfmr.attention %q, %k, %v {num_heads = 2 : i64, num_kv_heads = 1 : i64, rope_theta = 1.0e+04 : f32, sliding_window = 3 : i64} : (tensor<2x4x8xf32>, tensor<2x4x4xf32>, tensor<2x4x4xf32>) -> tensor<2x4x8xf32>
  %dq, %dk, %dv = xfmr.attention_grad %do, %q, %k, %v {num_heads = 2 : i64, num_kv_heads = 1 : i64, rope_theta = 1.0e+04 : f32, rope_scaling = "linear", rope_scaling_factors = array<f64: 4.0>, sliding_window = 2 : i64} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x4xf32>, tensor<2x4x4xf32>) -> (tensor<2x4x8xf32>, tensor<2x4x4xf32>, tensor<2x4x4xf32>)
  %w = xfmr.attention %q, %k, %v {num_heads = 2 : i64, num_kv_heads = 1 : i64, rope_theta = 1.0e+04 : f32, sliding_window = 4 : i64} : (tensor<2x4x8xf32>, tensor<2x4x4xf32>, tensor<2x4x4xf32>) -> tensor<2x4x8xf32>
  %loss = arith.constant dense<0.0> : tensor<f32>
  return %loss : tensor<f32>
}

// -----

// Explicit positions: sequence_positions (ints = [chunks]), the
// attention_positions rows (ints and floats as attention_scaled; a window
// is kept whatever the local length), position_embedding_at(_grad).
// CHECK-LABEL: func.func @positions
// CHECK: rt.kernel "sequence_positions" outs(%[[POS:.*]] : memref<4xi32>) ints = [2]{{$}}
// CHECK: rt.kernel "position_embedding_at" ins(%{{.*}}, %{{.*}}, %[[POS]] : memref<2x4x8xf32>, memref<6x8xf32>, memref<4xi32>) outs(%{{.*}} : memref<2x4x8xf32>){{$}}
// CHECK: rt.kernel "position_embedding_at_grad" ins(%{{.*}}, %[[POS]] : memref<2x4x8xf32>, memref<4xi32>) outs(%{{.*}} : memref<6x8xf32>){{$}}
// CHECK: rt.kernel "attention_positions" ins(%{{.*}}, %{{.*}}, %{{.*}}, %[[POS]], %[[POS]] : {{.*}}) outs(%{{.*}} : memref<2x4x8xf32>) ints = [2, 1, 1, 8] floats = [1.000000e+04, 0.000000e+00, 1.000000e+00, 0.000000e+00, 0.000000e+00, 0.000000e+00]{{$}}
// CHECK: rt.kernel "attention_positions_grad" ins(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[POS]], %[[POS]] : {{.*}}) outs({{.*}}) ints = [2, 1, 1, 0] floats = [0.000000e+00, 0.000000e+00, 1.000000e+00, 0.000000e+00, 0.000000e+00, 0.000000e+00]{{$}}
func.func @positions(%q: tensor<2x4x8xf32> {xfmr.param = "q"}, %k: tensor<2x4x4xf32> {xfmr.param = "k"},
                     %v: tensor<2x4x4xf32> {xfmr.param = "v"}, %do: tensor<2x4x8xf32> {xfmr.param = "do"},
                     %wpe: tensor<6x8xf32> {xfmr.param = "wpe"})
    -> (tensor<f32> {xfmr.output = "loss"}) attributes {xfmr.train_step = {}} {
  %pos = xfmr.sequence_positions {length = 4 : i64, chunks = 2 : i64} : () -> tensor<4xi32>
  %h = xfmr.position_embedding %q, %wpe positions %pos : (tensor<2x4x8xf32>, tensor<6x8xf32>, tensor<4xi32>) -> tensor<2x4x8xf32>
  %dwpe = xfmr.position_embedding_grad %h positions %pos : (tensor<2x4x8xf32>, tensor<4xi32>) -> tensor<6x8xf32>
  %o = xfmr.attention %h, %k, %v positions %pos, %pos {num_heads = 2 : i64, num_kv_heads = 1 : i64, rope_theta = 1.0e+04 : f32, sliding_window = 8 : i64} : (tensor<2x4x8xf32>, tensor<2x4x4xf32>, tensor<2x4x4xf32>, tensor<4xi32>, tensor<4xi32>) -> tensor<2x4x8xf32>
  %dq, %dk, %dv = xfmr.attention_grad %do, %o, %k, %v positions %pos, %pos {num_heads = 2 : i64, num_kv_heads = 1 : i64} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x4xf32>, tensor<2x4x4xf32>, tensor<4xi32>, tensor<4xi32>) -> (tensor<2x4x8xf32>, tensor<2x4x4xf32>, tensor<2x4x4xf32>)
  %loss = arith.constant dense<0.0> : tensor<f32>
  return %loss : tensor<f32>
}

// -----

// The loss is written straight into its new argument, appended after the
// old ones.
// CHECK-LABEL: func.func @loss
// CHECK-SAME:    (%[[LOGITS:.*]]: memref<2x4x16xf32> {rt.name = "logits", rt.role = "param"}, %[[TGT:.*]]: memref<2x4xi32> {rt.role = "targets"}, %[[LOSS:.*]]: memref<f32> {rt.role = "loss"})
// CHECK-NOT:     memref.alloc() : memref<f32>
// CHECK:         rt.kernel "softmax_cross_entropy" ins(%[[LOGITS]], %[[TGT]] : memref<2x4x16xf32>, memref<2x4xi32>) outs(%[[LOSS]] : memref<f32>){{$}}
// CHECK-NEXT:    %[[SEED:.*]] = memref.alloc() : memref<f32>
// CHECK-NEXT:    rt.kernel "fill" outs(%[[SEED]] : memref<f32>) floats = [1.000000e+00]{{$}}
// CHECK-NEXT:    %[[D:.*]] = memref.alloc() : memref<2x4x16xf32>
// CHECK-NEXT:    rt.kernel "softmax_cross_entropy_grad" ins(%[[SEED]], %[[LOGITS]], %[[TGT]] : memref<f32>, memref<2x4x16xf32>, memref<2x4xi32>) outs(%[[D]] : memref<2x4x16xf32>){{$}}
// CHECK-NEXT:    return
// CHECK-NOT:     rt.kernel "copy"
func.func @loss(%logits: tensor<2x4x16xf32> {xfmr.param = "logits"}, %targets: tensor<2x4xi32> {xfmr.input = "targets"})
    -> (tensor<f32> {xfmr.output = "loss"}) attributes {xfmr.train_step = {}} {
  %loss = xfmr.softmax_cross_entropy %logits, %targets : (tensor<2x4x16xf32>, tensor<2x4xi32>) -> tensor<f32>
  %seed = arith.constant dense<1.0> : tensor<f32>
  %d = xfmr.softmax_cross_entropy_grad %seed, %logits, %targets : (tensor<f32>, tensor<2x4x16xf32>, tensor<2x4xi32>) -> tensor<2x4x16xf32>
  return %loss : tensor<f32>
}

//===----------------------------------------------------------------------===//
// Slices and constants
//===----------------------------------------------------------------------===//

// -----

// A micro-batch's tokens are a view of the tokens buffer, not a copy; a
// rank-reducing slice keeps the slice's rank.
// CHECK-LABEL: func.func @slices
// CHECK-SAME:    (%[[WTE:.*]]: memref<16x8xf32> {{.*}}, %[[TOK:.*]]: memref<4x3xi32> {rt.role = "tokens"}, %[[TOK3:.*]]: memref<2x2x3xi32> {rt.role = "targets"}, %{{.*}}: memref<f32> {rt.role = "loss"})
// CHECK:         %[[S0:.*]] = memref.subview %[[TOK]][0, 0] [2, 3] [1, 1] : memref<4x3xi32> to memref<2x3xi32, strided<[3, 1]>>
// CHECK-NEXT:    %[[X0:.*]] = memref.alloc() : memref<2x3x8xf32>
// CHECK-NEXT:    rt.kernel "embedding" ins(%[[S0]], %[[WTE]] : memref<2x3xi32, strided<[3, 1]>>, memref<16x8xf32>) outs(%[[X0]] : memref<2x3x8xf32>){{$}}
// CHECK-NEXT:    %[[S1:.*]] = memref.subview %[[TOK]][2, 0] [2, 3] [1, 1] : memref<4x3xi32> to memref<2x3xi32, strided<[3, 1], offset: 6>>
// CHECK-NEXT:    %[[X1:.*]] = memref.alloc() : memref<2x3x8xf32>
// CHECK-NEXT:    rt.kernel "embedding" ins(%[[S1]], %[[WTE]] : memref<2x3xi32, strided<[3, 1], offset: 6>>, memref<16x8xf32>) outs(%[[X1]] : memref<2x3x8xf32>){{$}}
// CHECK-NEXT:    %[[S2:.*]] = memref.subview %[[TOK3]][1, 0, 0] [1, 2, 3] [1, 1, 1] : memref<2x2x3xi32> to memref<2x3xi32, strided<[3, 1], offset: 6>>
// CHECK-NEXT:    %[[X2:.*]] = memref.alloc() : memref<2x3x8xf32>
// CHECK-NEXT:    rt.kernel "embedding" ins(%[[S2]], %[[WTE]] : memref<2x3xi32, strided<[3, 1], offset: 6>>, memref<16x8xf32>) outs(%[[X2]] : memref<2x3x8xf32>){{$}}
// CHECK-NOT:     rt.kernel "copy"
func.func @slices(%wte: tensor<16x8xf32> {xfmr.param = "wte"}, %tokens: tensor<4x3xi32> {xfmr.input = "tokens"},
                  %targets: tensor<2x2x3xi32> {xfmr.input = "targets"})
    -> (tensor<f32> {xfmr.output = "loss"}) attributes {xfmr.train_step = {}} {
  %t0 = tensor.extract_slice %tokens[0, 0] [2, 3] [1, 1] : tensor<4x3xi32> to tensor<2x3xi32>
  %x0 = xfmr.embedding %t0, %wte : (tensor<2x3xi32>, tensor<16x8xf32>) -> tensor<2x3x8xf32>
  %t1 = tensor.extract_slice %tokens[2, 0] [2, 3] [1, 1] : tensor<4x3xi32> to tensor<2x3xi32>
  %x1 = xfmr.embedding %t1, %wte : (tensor<2x3xi32>, tensor<16x8xf32>) -> tensor<2x3x8xf32>
  %t2 = tensor.extract_slice %targets[1, 0, 0] [1, 2, 3] [1, 1, 1] : tensor<2x2x3xi32> to tensor<2x3xi32>
  %x2 = xfmr.embedding %t2, %wte : (tensor<2x3xi32>, tensor<16x8xf32>) -> tensor<2x3x8xf32>
  %loss = arith.constant dense<0.0> : tensor<f32>
  return %loss : tensor<f32>
}

// -----

// Splat constants become fill kernels (integer values as floats).
// CHECK-LABEL: func.func @constants
// CHECK-SAME:    (%[[W:.*]]: memref<4x8xf32> {{.*}}, %[[LOSS:.*]]: memref<f32> {rt.role = "loss"})
// CHECK:         %[[T:.*]] = memref.alloc() : memref<16x8xf32>
// CHECK-NEXT:    rt.kernel "fill" outs(%[[T]] : memref<16x8xf32>) floats = [-1.500000e+00]{{$}}
// CHECK-NEXT:    %[[I:.*]] = memref.alloc() : memref<2x3xi32>
// CHECK-NEXT:    rt.kernel "fill" outs(%[[I]] : memref<2x3xi32>) floats = [7.000000e+00]{{$}}
// CHECK-NEXT:    %[[N:.*]] = memref.alloc() : memref<i32>
// CHECK-NEXT:    rt.kernel "fill" outs(%[[N]] : memref<i32>) floats = [-3.000000e+00]{{$}}
// A returned constant is filled into its target directly.
// CHECK-NEXT:    rt.kernel "fill" outs(%[[LOSS]] : memref<f32>) floats = [2.500000e+00]{{$}}
// CHECK-NEXT:    return
func.func @constants(%w: tensor<4x8xf32> {xfmr.param = "w"}) -> (tensor<f32> {xfmr.output = "loss"}) attributes {xfmr.train_step = {}} {
  %table = arith.constant dense<-1.5> : tensor<16x8xf32>
  %ints = arith.constant dense<7> : tensor<2x3xi32>
  %scalar = arith.constant dense<-3> : tensor<i32>
  %loss = arith.constant dense<2.5> : tensor<f32>
  return %loss : tensor<f32>
}

//===----------------------------------------------------------------------===//
// State updates
//===----------------------------------------------------------------------===//

// -----

// The AdamW update and the step counter: each result goes back into the
// argument with the same role and name, in place (the old value is dead
// after the op that updates it).
// CHECK-LABEL: func.func @adamw
// CHECK-SAME:    (%[[P:.*]]: memref<4x8xf32> {rt.name = "w", rt.role = "param"}, %[[M:.*]]: memref<4x8xf32> {rt.name = "w", rt.role = "moment1"}, %[[V:.*]]: memref<4x8xf32> {rt.name = "w", rt.role = "moment2"},
// CHECK-SAME:     %[[T:.*]]: memref<i32> {rt.role = "step"}, %[[LR:.*]]: memref<f32> {rt.role = "lr"}, %[[G:.*]]: memref<4x8xf32> {rt.name = "g", rt.role = "param"}, %[[LOSS:.*]]: memref<f32> {rt.role = "loss"})
// CHECK:         %[[ONE:.*]] = memref.alloc() : memref<i32>
// CHECK-NEXT:    rt.kernel "fill" outs(%[[ONE]] : memref<i32>) floats = [1.000000e+00]{{$}}
// CHECK-NEXT:    rt.kernel "add_i32" ins(%[[T]], %[[ONE]] : memref<i32>, memref<i32>) outs(%[[T]] : memref<i32>){{$}}
// CHECK-NEXT:    rt.kernel "adamw" ins(%[[P]], %[[G]], %[[M]], %[[V]], %[[T]], %[[LR]] : memref<4x8xf32>, memref<4x8xf32>, memref<4x8xf32>, memref<4x8xf32>, memref<i32>, memref<f32>) outs(%[[P]], %[[M]], %[[V]] : memref<4x8xf32>, memref<4x8xf32>, memref<4x8xf32>) floats = [8.000000e-01, 9.900000e-01, 1.000000e-06, 1.000000e-01]{{$}}
// CHECK-NEXT:    rt.kernel "fill" outs(%[[LOSS]] : memref<f32>)
// CHECK-NOT:     memref.alloc() : memref<4x8xf32>
// CHECK-NOT:     rt.kernel "copy"
// CHECK:         return
func.func @adamw(%p: tensor<4x8xf32> {xfmr.param = "w"}, %m: tensor<4x8xf32> {xfmr.moment1 = "w"}, %v: tensor<4x8xf32> {xfmr.moment2 = "w"},
                 %t: tensor<i32> {xfmr.input = "step"}, %lr: tensor<f32> {xfmr.input = "lr"}, %g: tensor<4x8xf32> {xfmr.param = "g"})
    -> (tensor<f32> {xfmr.output = "loss"}, tensor<4x8xf32> {xfmr.param = "w"}, tensor<4x8xf32> {xfmr.moment1 = "w"},
        tensor<4x8xf32> {xfmr.moment2 = "w"}, tensor<i32> {xfmr.output = "step"}) attributes {xfmr.train_step = {optimizer = "adamw"}} {
  %one = arith.constant dense<1> : tensor<i32>
  %next = arith.addi %t, %one : tensor<i32>
  %p1, %m1, %v1 = xfmr.adamw %p, %g, %m, %v, %next, %lr {beta1 = 0.8 : f32, beta2 = 0.99 : f32, epsilon = 1.0e-6 : f32, weight_decay = 0.1 : f32} : (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<i32>, tensor<f32>) -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>)
  %loss = arith.constant dense<0.0> : tensor<f32>
  return %loss, %p1, %m1, %v1, %next : tensor<f32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<i32>
}

// -----

// The old step is still read after the increment (here by an AdamW update
// that uses the old count): the new value goes to a fresh buffer and is
// copied back at the end.
// CHECK-LABEL: func.func @step_used_after_update
// CHECK-SAME:    (%[[P:.*]]: memref<4xf32> {{.*}}, %[[M:.*]]: memref<4xf32> {{.*}}, %[[V:.*]]: memref<4xf32> {{.*}}, %[[T:.*]]: memref<i32> {rt.role = "step"}, %[[LR:.*]]: memref<f32> {rt.role = "lr"}, %{{.*}}: memref<f32> {rt.role = "loss"})
// CHECK:         %[[ONE:.*]] = memref.alloc() : memref<i32>
// CHECK-NEXT:    rt.kernel "fill" outs(%[[ONE]] : memref<i32>) floats = [1.000000e+00]{{$}}
// CHECK-NEXT:    %[[NEXT:.*]] = memref.alloc() : memref<i32>
// CHECK-NEXT:    rt.kernel "add_i32" ins(%[[T]], %[[ONE]] : memref<i32>, memref<i32>) outs(%[[NEXT]] : memref<i32>){{$}}
// CHECK-NEXT:    rt.kernel "adamw" ins(%[[P]], %[[P]], %[[M]], %[[V]], %[[T]], %[[LR]] : {{.*}}) outs(%[[P]], %[[M]], %[[V]] :
// CHECK:         rt.kernel "copy" ins(%[[NEXT]] : memref<i32>) outs(%[[T]] : memref<i32>){{$}}
// CHECK-NEXT:    return
func.func @step_used_after_update(%p: tensor<4xf32> {xfmr.param = "b"}, %m: tensor<4xf32> {xfmr.moment1 = "b"}, %v: tensor<4xf32> {xfmr.moment2 = "b"},
                                  %t: tensor<i32> {xfmr.input = "step"}, %lr: tensor<f32> {xfmr.input = "lr"})
    -> (tensor<f32> {xfmr.output = "loss"}, tensor<4xf32> {xfmr.param = "b"}, tensor<4xf32> {xfmr.moment1 = "b"},
        tensor<4xf32> {xfmr.moment2 = "b"}, tensor<i32> {xfmr.output = "step"}) attributes {xfmr.train_step = {}} {
  %one = arith.constant dense<1> : tensor<i32>
  %next = arith.addi %t, %one : tensor<i32>
  %p1, %m1, %v1 = xfmr.adamw %p, %p, %m, %v, %t, %lr : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<i32>, tensor<f32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
  %loss = arith.constant dense<0.0> : tensor<f32>
  return %loss, %p1, %m1, %v1, %next : tensor<f32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<i32>
}

// -----

// A parameter updated while its old value is still needed later: the new
// value is computed into a fresh buffer, the later reader sees the old
// value, and a copy writes the new value back at the end.
// CHECK-LABEL: func.func @old_value_used_after_update
// CHECK-SAME:    (%[[W:.*]]: memref<4x8xf32> {rt.name = "w", rt.role = "param"}, %[[LOSS:.*]]: memref<f32> {rt.role = "loss"})
// CHECK:         %[[NEW:.*]] = memref.alloc() : memref<4x8xf32>
// CHECK-NEXT:    rt.kernel "scale" ins(%[[W]] : memref<4x8xf32>) outs(%[[NEW]] : memref<4x8xf32>) floats = [5.000000e-01]{{$}}
// CHECK-NEXT:    %[[Y:.*]] = memref.alloc() : memref<4x8xf32>
// CHECK-NEXT:    rt.kernel "gelu" ins(%[[W]] : memref<4x8xf32>) outs(%[[Y]] : memref<4x8xf32>){{$}}
// CHECK-NEXT:    rt.kernel "fill" outs(%[[LOSS]] : memref<f32>)
// CHECK-NEXT:    rt.kernel "copy" ins(%[[NEW]] : memref<4x8xf32>) outs(%[[W]] : memref<4x8xf32>){{$}}
// CHECK-NEXT:    return
func.func @old_value_used_after_update(%w: tensor<4x8xf32> {xfmr.param = "w"})
    -> (tensor<f32> {xfmr.output = "loss"}, tensor<4x8xf32> {xfmr.param = "w"}) attributes {xfmr.train_step = {}} {
  %new = xfmr.scale %w {factor = 0.5 : f32} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %y = xfmr.gelu %w : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %loss = arith.constant dense<0.0> : tensor<f32>
  return %loss, %new : tensor<f32>, tensor<4x8xf32>
}

// -----

// The same, when the later reader sees the old value through a slice.
// CHECK-LABEL: func.func @old_value_read_through_slice
// CHECK-SAME:    (%[[W:.*]]: memref<4x8xf32> {rt.name = "w", rt.role = "param"}, %{{.*}}: memref<f32> {rt.role = "loss"})
// CHECK:         %[[ROWS:.*]] = memref.subview %[[W]][0, 0] [2, 8] [1, 1] : memref<4x8xf32> to memref<2x8xf32, strided<[8, 1]>>
// CHECK-NEXT:    %[[NEW:.*]] = memref.alloc() : memref<4x8xf32>
// CHECK-NEXT:    rt.kernel "scale" ins(%[[W]] : memref<4x8xf32>) outs(%[[NEW]] : memref<4x8xf32>) floats = [2.000000e+00]{{$}}
// CHECK-NEXT:    %[[Y:.*]] = memref.alloc() : memref<2x8xf32>
// CHECK-NEXT:    rt.kernel "gelu" ins(%[[ROWS]] : memref<2x8xf32, strided<[8, 1]>>) outs(%[[Y]] : memref<2x8xf32>){{$}}
// CHECK:         rt.kernel "copy" ins(%[[NEW]] : memref<4x8xf32>) outs(%[[W]] : memref<4x8xf32>){{$}}
// CHECK-NEXT:    return
func.func @old_value_read_through_slice(%w: tensor<4x8xf32> {xfmr.param = "w"})
    -> (tensor<f32> {xfmr.output = "loss"}, tensor<4x8xf32> {xfmr.param = "w"}) attributes {xfmr.train_step = {}} {
  %rows = tensor.extract_slice %w[0, 0] [2, 8] [1, 1] : tensor<4x8xf32> to tensor<2x8xf32>
  %new = xfmr.scale %w {factor = 2.0 : f32} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %y = xfmr.gelu %rows : (tensor<2x8xf32>) -> tensor<2x8xf32>
  %loss = arith.constant dense<0.0> : tensor<f32>
  return %loss, %new : tensor<f32>, tensor<4x8xf32>
}

// -----

// The last reader of the old value is the op that computes the new one: an
// in-place kernel (scale) writes the argument directly, any other (gelu)
// gets a fresh buffer and a copy.
// CHECK-LABEL: func.func @last_use_is_the_update
// CHECK-SAME:    (%[[A:.*]]: memref<8xf32> {rt.name = "a", rt.role = "param"}, %[[B:.*]]: memref<8xf32> {rt.name = "b", rt.role = "param"}, %{{.*}}: memref<f32> {rt.role = "loss"})
// CHECK:         rt.kernel "scale" ins(%[[A]] : memref<8xf32>) outs(%[[A]] : memref<8xf32>) floats = [3.000000e+00]{{$}}
// CHECK-NEXT:    %[[NB:.*]] = memref.alloc() : memref<8xf32>
// CHECK-NEXT:    rt.kernel "gelu" ins(%[[B]] : memref<8xf32>) outs(%[[NB]] : memref<8xf32>){{$}}
// CHECK:         rt.kernel "copy" ins(%[[NB]] : memref<8xf32>) outs(%[[B]] : memref<8xf32>){{$}}
// CHECK-NOT:     rt.kernel "copy"
// CHECK:         return
func.func @last_use_is_the_update(%a: tensor<8xf32> {xfmr.param = "a"}, %b: tensor<8xf32> {xfmr.param = "b"})
    -> (tensor<f32> {xfmr.output = "loss"}, tensor<8xf32> {xfmr.param = "a"}, tensor<8xf32> {xfmr.param = "b"}) attributes {xfmr.train_step = {}} {
  %na = xfmr.scale %a {factor = 3.0 : f32} : (tensor<8xf32>) -> tensor<8xf32>
  %nb = xfmr.gelu %b : (tensor<8xf32>) -> tensor<8xf32>
  %loss = arith.constant dense<0.0> : tensor<f32>
  return %loss, %na, %nb : tensor<f32>, tensor<8xf32>, tensor<8xf32>
}

// -----

// A value returned twice is written once (straight into the first target,
// whose old value is never read), then copied into the second; an argument
// returned unchanged into itself needs nothing.
// CHECK-LABEL: func.func @returned_twice
// CHECK-SAME:    (%[[A:.*]]: memref<8xf32> {rt.name = "a", rt.role = "param"}, %[[MA:.*]]: memref<8xf32> {rt.name = "a", rt.role = "moment1"}, %[[C:.*]]: memref<8xf32> {rt.name = "c", rt.role = "param"}, %{{.*}}: memref<f32> {rt.role = "loss"})
// CHECK-NOT:     memref.alloc
// CHECK:         rt.kernel "gelu" ins(%[[C]] : memref<8xf32>) outs(%[[A]] : memref<8xf32>){{$}}
// CHECK-NEXT:    rt.kernel "fill"
// CHECK-NEXT:    rt.kernel "copy" ins(%[[A]] : memref<8xf32>) outs(%[[MA]] : memref<8xf32>){{$}}
// CHECK-NEXT:    return
func.func @returned_twice(%a: tensor<8xf32> {xfmr.param = "a"}, %ma: tensor<8xf32> {xfmr.moment1 = "a"}, %c: tensor<8xf32> {xfmr.param = "c"})
    -> (tensor<f32> {xfmr.output = "loss"}, tensor<8xf32> {xfmr.param = "a"}, tensor<8xf32> {xfmr.moment1 = "a"}, tensor<8xf32> {xfmr.param = "c"})
    attributes {xfmr.train_step = {}} {
  %n = xfmr.gelu %c : (tensor<8xf32>) -> tensor<8xf32>
  %loss = arith.constant dense<0.0> : tensor<f32>
  return %loss, %n, %n, %c : tensor<f32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>
}

// -----

// Gradients (optimizer=none) get arguments of their own, after the loss, in
// result order, with the parameter's name.
// CHECK-LABEL: func.func @gradients
// CHECK-SAME:    (%[[W:.*]]: memref<12x8xf32> {rt.name = "w", rt.role = "param"}, %[[X:.*]]: memref<2x4x8xf32> {rt.name = "x", rt.role = "param"}, %[[DY:.*]]: memref<2x4x12xf32> {rt.name = "dy", rt.role = "param"},
// CHECK-SAME:     %[[LOSS:.*]]: memref<f32> {rt.role = "loss"}, %[[GW:.*]]: memref<12x8xf32> {rt.name = "w", rt.role = "gradient"}, %[[GB:.*]]: memref<12xf32> {rt.name = "b", rt.role = "gradient"})
// CHECK-SAME:    attributes {xfmr.train_step = {optimizer = "none"}}
// CHECK:         rt.kernel "linear_grad_weight_bias" ins(%[[DY]], %[[X]] : memref<2x4x12xf32>, memref<2x4x8xf32>) outs(%[[GW]], %[[GB]] : memref<12x8xf32>, memref<12xf32>){{$}}
// CHECK-NOT:     rt.kernel "copy"
// CHECK:         return
func.func @gradients(%w: tensor<12x8xf32> {xfmr.param = "w"}, %x: tensor<2x4x8xf32> {xfmr.param = "x"}, %dy: tensor<2x4x12xf32> {xfmr.param = "dy"})
    -> (tensor<f32> {xfmr.output = "loss"}, tensor<12x8xf32> {xfmr.gradient = "w"}, tensor<12xf32> {xfmr.gradient = "b"})
    attributes {xfmr.train_step = {optimizer = "none"}} {
  %dw, %db = xfmr.linear_grad_weight %dy, %x : (tensor<2x4x12xf32>, tensor<2x4x8xf32>) -> (tensor<12x8xf32>, tensor<12xf32>)
  %loss = arith.constant dense<0.0> : tensor<f32>
  return %loss, %dw, %db : tensor<f32>, tensor<12x8xf32>, tensor<12xf32>
}

//===----------------------------------------------------------------------===//
// Which functions
//===----------------------------------------------------------------------===//

// -----

// Both the train step and the eval step are lowered, their attributes kept;
// other functions are left alone.
// CHECK-LABEL: func.func @train
// CHECK-SAME:    (%{{.*}}: memref<16x8xf32> {rt.name = "wte", rt.role = "param"}, %{{.*}}: memref<2x4xi32> {rt.role = "tokens"}, %{{.*}}: memref<2x4xi32> {rt.role = "targets"}, %{{.*}}: memref<f32> {rt.role = "loss"})
// CHECK-SAME:    attributes {xfmr.model = {arch = "gpt2"}, xfmr.train_step = {microbatches = 1 : i64}}
// CHECK:         rt.kernel "embedding"
// CHECK-LABEL: func.func @eval
// CHECK-SAME:    (%{{.*}}: memref<16x8xf32> {rt.name = "wte", rt.role = "param"}, %{{.*}}: memref<2x4xi32> {rt.role = "tokens"}, %{{.*}}: memref<2x4xi32> {rt.role = "targets"}, %[[LOSS:.*]]: memref<f32> {rt.role = "loss"})
// CHECK-SAME:    attributes {xfmr.eval_step = {microbatches = 1 : i64}}
// CHECK:         rt.kernel "softmax_cross_entropy" ins({{.*}}) outs(%[[LOSS]] : memref<f32>)
// CHECK-LABEL: func.func @helper
// CHECK-SAME:    (%{{.*}}: tensor<4xf32>) -> tensor<4xf32>
// CHECK-NEXT:    xfmr.gelu
func.func @train(%wte: tensor<16x8xf32> {xfmr.param = "wte"}, %tokens: tensor<2x4xi32> {xfmr.input = "tokens"}, %targets: tensor<2x4xi32> {xfmr.input = "targets"})
    -> (tensor<f32> {xfmr.output = "loss"}) attributes {xfmr.model = {arch = "gpt2"}, xfmr.train_step = {microbatches = 1 : i64}} {
  %x = xfmr.embedding %tokens, %wte : (tensor<2x4xi32>, tensor<16x8xf32>) -> tensor<2x4x8xf32>
  %logits = xfmr.linear %x, %wte : (tensor<2x4x8xf32>, tensor<16x8xf32>) -> tensor<2x4x16xf32>
  %loss = xfmr.softmax_cross_entropy %logits, %targets : (tensor<2x4x16xf32>, tensor<2x4xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}
func.func @eval(%wte: tensor<16x8xf32> {xfmr.param = "wte"}, %tokens: tensor<2x4xi32> {xfmr.input = "tokens"}, %targets: tensor<2x4xi32> {xfmr.input = "targets"})
    -> (tensor<f32> {xfmr.output = "loss"}) attributes {xfmr.eval_step = {microbatches = 1 : i64}} {
  %x = xfmr.embedding %tokens, %wte : (tensor<2x4xi32>, tensor<16x8xf32>) -> tensor<2x4x8xf32>
  %logits = xfmr.linear %x, %wte : (tensor<2x4x8xf32>, tensor<16x8xf32>) -> tensor<2x4x16xf32>
  %loss = xfmr.softmax_cross_entropy %logits, %targets : (tensor<2x4x16xf32>, tensor<2x4xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}
func.func @helper(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = xfmr.gelu %x : (tensor<4xf32>) -> tensor<4xf32>
  return %y : tensor<4xf32>
}
