// pipeline-tiny-pp2.mlir with data parallelism too: a dp=2 x pp=2 mesh of
// 4 ranks. Each data-parallel replica of a stage takes 2 of the batch's 4
// rows; each stage averages its gradients over its replicas (dist.all_reduce
// over dp: a group of the ranks of one stage) before AdamW, and the last
// stage averages the loss. Stage 0 averages the tied embedding's summed
// gradient before sending it back, so all four copies of wte stay equal.

module attributes {dist.plan = #dist.plan<mesh = @mesh, axes = [dp = data, pp = pipeline], sequence_parallel = false, schedule = "1f1b", microbatches = 1, zero_stage = 0, recompute = none, precision = "fp32">} {
  dist.mesh @mesh axes = [dp = 2, pp = 2]

  func.func @train_step_stage0(
      %wte: tensor<64x16xf32> {xfmr.param = "wte"},
      %w: tensor<16x16xf32> {xfmr.layer = 0 : i64, xfmr.param = "h.0.mlp.c_fc.weight"},
      %b: tensor<16xf32> {xfmr.layer = 0 : i64, xfmr.param = "h.0.mlp.c_fc.bias"},
      %m1wte: tensor<64x16xf32> {xfmr.moment1 = "wte"},
      %m1w: tensor<16x16xf32> {xfmr.moment1 = "h.0.mlp.c_fc.weight"},
      %m1b: tensor<16xf32> {xfmr.moment1 = "h.0.mlp.c_fc.bias"},
      %m2wte: tensor<64x16xf32> {xfmr.moment2 = "wte"},
      %m2w: tensor<16x16xf32> {xfmr.moment2 = "h.0.mlp.c_fc.weight"},
      %m2b: tensor<16xf32> {xfmr.moment2 = "h.0.mlp.c_fc.bias"},
      %step: tensor<i32> {xfmr.input = "step"},
      %lr: tensor<f32> {xfmr.input = "lr"},
      %tokens: tensor<2x8xi32> {xfmr.input = "tokens"})
      -> (tensor<64x16xf32> {xfmr.param = "wte"},
          tensor<16x16xf32> {xfmr.param = "h.0.mlp.c_fc.weight"},
          tensor<16xf32> {xfmr.param = "h.0.mlp.c_fc.bias"},
          tensor<64x16xf32> {xfmr.moment1 = "wte"},
          tensor<16x16xf32> {xfmr.moment1 = "h.0.mlp.c_fc.weight"},
          tensor<16xf32> {xfmr.moment1 = "h.0.mlp.c_fc.bias"},
          tensor<64x16xf32> {xfmr.moment2 = "wte"},
          tensor<16x16xf32> {xfmr.moment2 = "h.0.mlp.c_fc.weight"},
          tensor<16xf32> {xfmr.moment2 = "h.0.mlp.c_fc.bias"},
          tensor<i32> {xfmr.output = "step"})
      attributes {dist.pipeline_stage = 0 : i64,
                  xfmr.model = {arch = "gpt2", batch = 2 : i64, ffn = 16 : i64, heads = 1 : i64, hidden = 16 : i64, kv_heads = 1 : i64, layers = 1 : i64, positions = 8 : i64, seq_len = 8 : i64, tied_embedding = true, vocab = 64 : i64},
                  xfmr.train_step = {beta1 = 0.899999976 : f32, beta2 = 0.949999988 : f32, epsilon = 9.99999993E-9 : f32, microbatches = 1 : i64, optimizer = "adamw", weight_decay = 1.000000e-01 : f32}} {
    %x = xfmr.embedding %tokens, %wte : (tensor<2x8xi32>, tensor<64x16xf32>) -> tensor<2x8x16xf32>
    %h = xfmr.linear %x, %w, %b : (tensor<2x8x16xf32>, tensor<16x16xf32>, tensor<16xf32>) -> tensor<2x8x16xf32>
    %g = xfmr.gelu %h : (tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
    dist.send %g to @mesh [pp = 1] label "F activations stage0->1" : tensor<2x8x16xf32>
    %dg = dist.recv from @mesh [pp = 1] label "B gradients stage1->0" : tensor<2x8x16xf32>
    %dh = xfmr.gelu_grad %dg, %h : (tensor<2x8x16xf32>, tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
    %dx = xfmr.linear_grad_input %dh, %w : (tensor<2x8x16xf32>, tensor<16x16xf32>) -> tensor<2x8x16xf32>
    %gw, %gb = xfmr.linear_grad_weight %dh, %x : (tensor<2x8x16xf32>, tensor<2x8x16xf32>) -> (tensor<16x16xf32>, tensor<16xf32>)
    %de = xfmr.embedding_grad %dx, %tokens : (tensor<2x8x16xf32>, tensor<2x8xi32>) -> tensor<64x16xf32>
    %dhead = dist.recv from @mesh [pp = 1] label "wte LM-head gradient stage1->0" : tensor<64x16xf32>
    %dsum = xfmr.add %dhead, %de : (tensor<64x16xf32>, tensor<64x16xf32>) -> tensor<64x16xf32>
    %dwte, %gw_dp, %gb_dp = dist.all_reduce %dsum, %gw, %gb on @mesh axes [dp] reduce = avg {dist.label = "stage 0 gradients"} : tensor<64x16xf32>, tensor<16x16xf32>, tensor<16xf32>
    dist.send %dwte to @mesh [pp = 1] label "wte gradient stage0->1" : tensor<64x16xf32>
    %one = arith.constant dense<1> : tensor<i32>
    %next = arith.addi %step, %one : tensor<i32>
    %pwte, %m1wte_n, %m2wte_n = xfmr.adamw %wte, %dwte, %m1wte, %m2wte, %next, %lr {beta2 = 0.949999988 : f32, weight_decay = 1.000000e-01 : f32} : (tensor<64x16xf32>, tensor<64x16xf32>, tensor<64x16xf32>, tensor<64x16xf32>, tensor<i32>, tensor<f32>) -> (tensor<64x16xf32>, tensor<64x16xf32>, tensor<64x16xf32>)
    %pw, %m1w_n, %m2w_n = xfmr.adamw %w, %gw_dp, %m1w, %m2w, %next, %lr {beta2 = 0.949999988 : f32, weight_decay = 1.000000e-01 : f32} : (tensor<16x16xf32>, tensor<16x16xf32>, tensor<16x16xf32>, tensor<16x16xf32>, tensor<i32>, tensor<f32>) -> (tensor<16x16xf32>, tensor<16x16xf32>, tensor<16x16xf32>)
    %pb, %m1b_n, %m2b_n = xfmr.adamw %b, %gb_dp, %m1b, %m2b, %next, %lr {beta2 = 0.949999988 : f32} : (tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<i32>, tensor<f32>) -> (tensor<16xf32>, tensor<16xf32>, tensor<16xf32>)
    return %pwte, %pw, %pb, %m1wte_n, %m1w_n, %m1b_n, %m2wte_n, %m2w_n, %m2b_n, %next : tensor<64x16xf32>, tensor<16x16xf32>, tensor<16xf32>, tensor<64x16xf32>, tensor<16x16xf32>, tensor<16xf32>, tensor<64x16xf32>, tensor<16x16xf32>, tensor<16xf32>, tensor<i32>
  }

  func.func @train_step_stage1(
      %wte: tensor<64x16xf32> {xfmr.param = "wte"},
      %lnw: tensor<16xf32> {xfmr.param = "ln_f.weight"},
      %lnb: tensor<16xf32> {xfmr.param = "ln_f.bias"},
      %m1wte: tensor<64x16xf32> {xfmr.moment1 = "wte"},
      %m1lnw: tensor<16xf32> {xfmr.moment1 = "ln_f.weight"},
      %m1lnb: tensor<16xf32> {xfmr.moment1 = "ln_f.bias"},
      %m2wte: tensor<64x16xf32> {xfmr.moment2 = "wte"},
      %m2lnw: tensor<16xf32> {xfmr.moment2 = "ln_f.weight"},
      %m2lnb: tensor<16xf32> {xfmr.moment2 = "ln_f.bias"},
      %step: tensor<i32> {xfmr.input = "step"},
      %lr: tensor<f32> {xfmr.input = "lr"},
      %targets: tensor<2x8xi32> {xfmr.input = "targets"})
      -> (tensor<f32> {xfmr.output = "loss"},
          tensor<64x16xf32> {xfmr.param = "wte"},
          tensor<16xf32> {xfmr.param = "ln_f.weight"},
          tensor<16xf32> {xfmr.param = "ln_f.bias"},
          tensor<64x16xf32> {xfmr.moment1 = "wte"},
          tensor<16xf32> {xfmr.moment1 = "ln_f.weight"},
          tensor<16xf32> {xfmr.moment1 = "ln_f.bias"},
          tensor<64x16xf32> {xfmr.moment2 = "wte"},
          tensor<16xf32> {xfmr.moment2 = "ln_f.weight"},
          tensor<16xf32> {xfmr.moment2 = "ln_f.bias"},
          tensor<i32> {xfmr.output = "step"})
      attributes {dist.pipeline_stage = 1 : i64,
                  xfmr.model = {arch = "gpt2", batch = 2 : i64, ffn = 16 : i64, heads = 1 : i64, hidden = 16 : i64, kv_heads = 1 : i64, layers = 1 : i64, positions = 8 : i64, seq_len = 8 : i64, tied_embedding = true, vocab = 64 : i64},
                  xfmr.train_step = {beta1 = 0.899999976 : f32, beta2 = 0.949999988 : f32, epsilon = 9.99999993E-9 : f32, microbatches = 1 : i64, optimizer = "adamw", weight_decay = 1.000000e-01 : f32}} {
    %seed = arith.constant dense<1.000000e+00> : tensor<f32>
    %g = dist.recv from @mesh [pp = 0] label "F activations stage0->1" : tensor<2x8x16xf32>
    %y = xfmr.layernorm %g, %lnw, %lnb : (tensor<2x8x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<2x8x16xf32>
    %logits = xfmr.linear %y, %wte : (tensor<2x8x16xf32>, tensor<64x16xf32>) -> tensor<2x8x64xf32>
    %loss = xfmr.softmax_cross_entropy %logits, %targets : (tensor<2x8x64xf32>, tensor<2x8xi32>) -> tensor<f32>
    %dlogits = xfmr.softmax_cross_entropy_grad %seed, %logits, %targets : (tensor<f32>, tensor<2x8x64xf32>, tensor<2x8xi32>) -> tensor<2x8x64xf32>
    %dy = xfmr.linear_grad_input %dlogits, %wte : (tensor<2x8x64xf32>, tensor<64x16xf32>) -> tensor<2x8x16xf32>
    %dhead = xfmr.linear_grad_weight %dlogits, %y : (tensor<2x8x64xf32>, tensor<2x8x16xf32>) -> tensor<64x16xf32>
    %dg, %glnw, %glnb = xfmr.layernorm_grad %dy, %g, %lnw : (tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<16xf32>) -> (tensor<2x8x16xf32>, tensor<16xf32>, tensor<16xf32>)
    dist.send %dg to @mesh [pp = 0] label "B gradients stage1->0" : tensor<2x8x16xf32>
    dist.send %dhead to @mesh [pp = 0] label "wte LM-head gradient stage1->0" : tensor<64x16xf32>
    %dwte = dist.recv from @mesh [pp = 0] label "wte gradient stage0->1" : tensor<64x16xf32>
    %glnw_dp, %glnb_dp = dist.all_reduce %glnw, %glnb on @mesh axes [dp] reduce = avg {dist.label = "stage 1 gradients"} : tensor<16xf32>, tensor<16xf32>
    %loss_dp = dist.all_reduce %loss on @mesh axes [dp] reduce = avg {dist.label = "loss"} : tensor<f32>
    %one = arith.constant dense<1> : tensor<i32>
    %next = arith.addi %step, %one : tensor<i32>
    %pwte, %m1wte_n, %m2wte_n = xfmr.adamw %wte, %dwte, %m1wte, %m2wte, %next, %lr {beta2 = 0.949999988 : f32, weight_decay = 1.000000e-01 : f32} : (tensor<64x16xf32>, tensor<64x16xf32>, tensor<64x16xf32>, tensor<64x16xf32>, tensor<i32>, tensor<f32>) -> (tensor<64x16xf32>, tensor<64x16xf32>, tensor<64x16xf32>)
    %plnw, %m1lnw_n, %m2lnw_n = xfmr.adamw %lnw, %glnw_dp, %m1lnw, %m2lnw, %next, %lr {beta2 = 0.949999988 : f32} : (tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<i32>, tensor<f32>) -> (tensor<16xf32>, tensor<16xf32>, tensor<16xf32>)
    %plnb, %m1lnb_n, %m2lnb_n = xfmr.adamw %lnb, %glnb_dp, %m1lnb, %m2lnb, %next, %lr {beta2 = 0.949999988 : f32} : (tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<i32>, tensor<f32>) -> (tensor<16xf32>, tensor<16xf32>, tensor<16xf32>)
    return %loss_dp, %pwte, %plnw, %plnb, %m1wte_n, %m1lnw_n, %m1lnb_n, %m2wte_n, %m2lnw_n, %m2lnb_n, %next : tensor<f32>, tensor<64x16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<64x16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<64x16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<i32>
  }

  func.func @eval_step_stage0(
      %wte: tensor<64x16xf32> {xfmr.param = "wte"},
      %w: tensor<16x16xf32> {xfmr.layer = 0 : i64, xfmr.param = "h.0.mlp.c_fc.weight"},
      %b: tensor<16xf32> {xfmr.layer = 0 : i64, xfmr.param = "h.0.mlp.c_fc.bias"},
      %tokens: tensor<2x8xi32> {xfmr.input = "tokens"})
      attributes {dist.pipeline_stage = 0 : i64, xfmr.eval_step = {microbatches = 1 : i64}} {
    %x = xfmr.embedding %tokens, %wte : (tensor<2x8xi32>, tensor<64x16xf32>) -> tensor<2x8x16xf32>
    %h = xfmr.linear %x, %w, %b : (tensor<2x8x16xf32>, tensor<16x16xf32>, tensor<16xf32>) -> tensor<2x8x16xf32>
    %g = xfmr.gelu %h : (tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
    dist.send %g to @mesh [pp = 1] label "eval activations stage0->1" : tensor<2x8x16xf32>
    return
  }

  func.func @eval_step_stage1(
      %wte: tensor<64x16xf32> {xfmr.param = "wte"},
      %lnw: tensor<16xf32> {xfmr.param = "ln_f.weight"},
      %lnb: tensor<16xf32> {xfmr.param = "ln_f.bias"},
      %targets: tensor<2x8xi32> {xfmr.input = "targets"})
      -> (tensor<f32> {xfmr.output = "loss"})
      attributes {dist.pipeline_stage = 1 : i64, xfmr.eval_step = {microbatches = 1 : i64}} {
    %g = dist.recv from @mesh [pp = 0] label "eval activations stage0->1" : tensor<2x8x16xf32>
    %y = xfmr.layernorm %g, %lnw, %lnb : (tensor<2x8x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<2x8x16xf32>
    %logits = xfmr.linear %y, %wte : (tensor<2x8x16xf32>, tensor<64x16xf32>) -> tensor<2x8x64xf32>
    %loss = xfmr.softmax_cross_entropy %logits, %targets : (tensor<2x8x64xf32>, tensor<2x8xi32>) -> tensor<f32>
    %loss_dp = dist.all_reduce %loss on @mesh axes [dp] reduce = avg {dist.label = "eval loss"} : tensor<f32>
    return %loss_dp : tensor<f32>
  }
}
