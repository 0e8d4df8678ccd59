#!/usr/bin/env python3
"""transformers as the test oracle of partition's training step.

For GPT-2 and Llama (GQA + RoPE), builds a random-initialised transformers
model from a config (no hub download; every tensor perturbed, so that a
swapped bias or norm cannot hide behind zeros and ones), saves it,
partition-imports it and checks:

  (a) the HF model's loss on a fixed batch (logits + cross-entropy against
      partition's already-shifted targets, no labels=) equals partition's
      loss on that batch within 1e-5 relative;
  (b) one torch.optim.AdamW step (betas 0.9/0.95, eps 1e-8, weight decay 0.1
      on matrices only, partition-run's learning rate) gives partition's
      parameters, first and second moments (per tensor, |a-b|/|b|) within
      1e-4, 1e-5 and 1e-5, and the loss of the updated model on the same
      batch within 1e-5. GPT-2's key bias, whose gradient is exactly zero
      (softmax ignores a shift common to a row), is bounded absolutely.

and (c) partition-export's directory of the updated checkpoint loads with
AutoModelForCausalLM.from_pretrained with no missing, unexpected or
mismatched weight and gives the same loss within 1e-5.

Every tensor is compared under partition's names: the HF tensors (and the
optimizer moments, loaded into a copy of the model) go through
partition-import, the tool under test.

  hf_oracle.py --bin BUILD/bin [--work DIR] [--keep]

Exit 0: passed (prints the figures); 77: SKIPPED (torch or transformers
missing); 1: failed. What it shares with hf_families.py is in
oracle_common.py.
"""

import json
import os
import sys

from oracle_common import oracle_main, run

SEQ, BATCH = 32, 4
TOL = {"loss": 1e-5, "param": 1e-4, "adam_m": 1e-5, "adam_v": 1e-5}
# GPT-2's key bias adds q.b to every score of a row, which softmax ignores:
# its gradient is zero in exact arithmetic and rounding noise in both
# implementations, so a relative comparison would compare noise.
ZERO_GRADIENT = ".attn.k.bias"


def hf_model(arch, torch, transformers):
    torch.manual_seed(1234)
    if arch == "gpt2":
        config = transformers.GPT2Config(
            vocab_size=256, n_positions=64, n_embd=64, n_layer=2, n_head=4,
            n_inner=256, activation_function="gelu_new",
            layer_norm_epsilon=1e-5, resid_pdrop=0.0, embd_pdrop=0.0,
            attn_pdrop=0.0, tie_word_embeddings=True)
        model = transformers.GPT2LMHeadModel(config)
    else:
        config = transformers.LlamaConfig(
            vocab_size=256, hidden_size=64, intermediate_size=176,
            num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
            max_position_embeddings=64, rms_norm_eps=1e-5, rope_theta=10000.0,
            tie_word_embeddings=False, attention_bias=False, mlp_bias=False,
            hidden_act="silu")
        model = transformers.LlamaForCausalLM(config)
    with torch.no_grad():
        for param in model.parameters():
            param.add_(0.02 * torch.randn_like(param))
    return model.float().eval()


def hf_loss(model, inputs, targets, torch):
    with torch.no_grad():
        logits = model(input_ids=inputs).logits
        return torch.nn.functional.cross_entropy(
            logits.reshape(-1, logits.shape[-1]), targets.reshape(-1)).item()


def partition_tensors(tools, model, tensors, work, name, torch, safetensors):
    """`tensors` (one per model parameter, in model.parameters() order)
    under partition's names: saved as the model's weights, imported."""
    clone = type(model)(model.config)
    with torch.no_grad():
        for param, value in zip(clone.parameters(), tensors):
            param.copy_(value)
    hf_dir = os.path.join(work, name + ".hf")
    clone.save_pretrained(hf_dir, safe_serialization=True)
    ckpt = os.path.join(work, name + ".ckpt")
    run([tools["partition-import"], hf_dir, "-o",
         os.path.join(work, name + ".mlir"), "--checkpoint", ckpt])
    return safetensors.load_file(os.path.join(ckpt, "checkpoint.safetensors"))


def relative(a, b, torch):
    a, b = a.double(), b.double()
    norm = b.norm().item()
    return (a - b).norm().item() / (norm if norm > 0 else 1.0)


def check(arch, tools, work, torch, transformers, safetensors):
    import numpy as np
    work = os.path.join(work, arch)
    os.makedirs(work, exist_ok=True)
    model = hf_model(arch, torch, transformers)
    hf_dir = os.path.join(work, "init.hf")
    model.save_pretrained(hf_dir, safe_serialization=True)

    # The fixed batch is the first window of a raw token file: inputs
    # tokens[0 : B*T], targets tokens[1 : B*T + 1].
    generator = np.random.default_rng(7)
    tokens = generator.integers(0, 256, size=8 * BATCH * SEQ, dtype=np.uint16)
    data = os.path.join(work, "tokens.bin")
    tokens.tofile(data)
    window = torch.from_numpy(tokens[:BATCH * SEQ + 1].astype(np.int64))
    inputs = window[:-1].reshape(BATCH, SEQ)
    targets = window[1:].reshape(BATCH, SEQ)

    mlir, init = os.path.join(work, "m.mlir"), os.path.join(work, "init.ckpt")
    run([tools["partition-import"], hf_dir, "-o", mlir, "--checkpoint", init,
         "--seq-len", str(SEQ), "--batch", str(BATCH)])
    ptp = os.path.join(work, "m.ptp")
    run([tools["partition-compile"], mlir, "-o", ptp])
    common = ["--data", data, "--data-format", "raw", "--eval-every", "0",
              "--quiet"]
    step1 = os.path.join(work, "step1.ckpt")
    metrics = os.path.join(work, "m.jsonl")
    run([tools["partition-run"], ptp, "--init-from", init, "--steps", "1",
         "--warmup", "0", "--save", step1, "--metrics-out", metrics] + common)
    with open(metrics) as f:
        first = [json.loads(line) for line in f if '"step"' in line][0]
    lr = first["lr"]

    figures = {}
    reference = hf_loss(model, inputs, targets, torch)
    figures["loss"] = abs(first["loss"] - reference) / abs(first["loss"])
    print(f"{arch}: step-1 loss: partition {first['loss']!r}, "
          f"transformers {reference!r}")

    # One AdamW step in PyTorch, as partition's --xfmr-train-step does it.
    model.train()
    params = list(model.parameters())
    optimizer = torch.optim.AdamW(
        [{"params": [p for p in params if p.dim() >= 2], "weight_decay": 0.1},
         {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}],
        lr=lr, betas=(0.9, 0.95), eps=1e-8)
    logits = model(input_ids=inputs).logits
    loss = torch.nn.functional.cross_entropy(
        logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    model.eval()

    ours = safetensors.load_file(os.path.join(step1, "checkpoint.safetensors"))
    state = [optimizer.state[p] for p in params]
    theirs = {
        "param": partition_tensors(tools, model, [p.detach() for p in params],
                                   work, "torch-step1", torch, safetensors),
        "adam_m": partition_tensors(tools, model,
                                    [s["exp_avg"] for s in state], work,
                                    "adam_m", torch, safetensors),
        "adam_v": partition_tensors(tools, model,
                                    [s["exp_avg_sq"] for s in state], work,
                                    "adam_v", torch, safetensors),
    }
    for kind, tensors in theirs.items():
        worst, where = 0.0, ""
        for name, tensor in tensors.items():
            key = name if kind == "param" else f"{name}.{kind}"
            if name.endswith(ZERO_GRADIENT):
                # Both gradients are rounding noise: bound them absolutely
                # (and the update, lr times the sign of the noise, by 2 lr).
                limit = {"param": 2.01 * lr, "adam_m": 1e-7, "adam_v": 1e-12}
                bound = max(ours[key].abs().max().item(),
                            tensor.abs().max().item()) if kind != "param" \
                    else (ours[key] - tensor).abs().max().item()
                if bound > limit[kind]:
                    figures.setdefault("noise", []).append(
                        f"{key} {bound:.2e} > {limit[kind]:.0e}")
                continue
            error = relative(ours[key], tensor, torch)
            if error >= worst:
                worst, where = error, name
        figures[kind] = worst
        figures[kind + "_tensor"] = where

    # The updated model's loss: partition's from its step-1 weights.
    after = os.path.join(work, "after.jsonl")
    run([tools["partition-run"], ptp, "--init-from", step1, "--steps", "1",
         "--warmup", "0", "--metrics-out", after] + common)
    with open(after) as f:
        partition_after = [json.loads(l) for l in f if '"step"' in l][0]["loss"]
    figures["loss_after_step"] = abs(
        partition_after - hf_loss(model, inputs, targets, torch)) / abs(
            partition_after)

    # Export: partition's step-1 checkpoint loads into transformers with no
    # missing or unexpected weight and computes partition's loss.
    exported = os.path.join(work, "step1.export")
    run([tools["partition-export"], step1, "--format", "hf", "-o", exported])
    loaded, info = transformers.AutoModelForCausalLM.from_pretrained(
        exported, output_loading_info=True)
    figures["export_loss"] = abs(partition_after - hf_loss(
        loaded.float().eval(), inputs, targets, torch)) / abs(partition_after)

    failures = list(figures.get("noise", []))
    for key in ["missing_keys", "unexpected_keys", "mismatched_keys"]:
        if info.get(key):
            failures.append(f"export: {key} {sorted(info[key])}")
    if not figures["export_loss"] <= TOL["loss"]:
        failures.append(f"export loss {figures['export_loss']:.2e}")
    for kind, tolerance in [("loss", TOL["loss"]),
                            ("loss_after_step", TOL["loss"]),
                            ("param", TOL["param"]),
                            ("adam_m", TOL["adam_m"]),
                            ("adam_v", TOL["adam_v"])]:
        if not figures[kind] <= tolerance:
            failures.append(f"{kind} {figures[kind]:.2e} > {tolerance:.0e}")
    print(f"{arch}: loss rel {figures['loss']:.2e}, after one AdamW step: "
          f"loss rel {figures['loss_after_step']:.2e}, params "
          f"{figures['param']:.2e} ({figures['param_tensor']}), adam_m "
          f"{figures['adam_m']:.2e} ({figures['adam_m_tensor']}), adam_v "
          f"{figures['adam_v']:.2e} ({figures['adam_v_tensor']}) at lr {lr:.3g}; "
          f"exported: loads cleanly, loss rel {figures['export_loss']:.2e}")
    return failures


def check_all(args, tools, work, torch, transformers):
    import safetensors.torch as safetensors
    failures = []
    for arch in ["gpt2", "llama"]:
        failures += [f"{arch}: {f}" for f in check(
            arch, tools, work, torch, transformers, safetensors)]
    return failures


if __name__ == "__main__":
    sys.exit(oracle_main(__doc__.splitlines()[0], check_all,
                         "oracle: partition agrees with transformers"))
