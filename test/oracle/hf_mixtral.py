#!/usr/bin/env python3
"""transformers as the oracle of partition's mixture of experts (Mixtral).

Builds a random-initialised transformers MixtralForCausalLM from a config
(no hub download; every tensor perturbed, the router scaled up 4 times so
that routing is decisive and a wrong choice of experts shows), saves it,
partition-imports it, and checks, for two models:

  "ce"  2 layers, batch 4, router_aux_loss_coef 0: cross-entropy only;
  "aux" 1 layer, batch 1, router_aux_loss_coef 0.02: cross-entropy plus the
        load-balancing loss.

transformers' load_balancing_loss_func computes one term over the tokens of
every layer and every sequence together; partition's aux loss is a term
per MoE layer and per sequence, averaged (runtime/backend/cpu/Moe.cpp).
They are the same number only for one layer and one sequence, hence the
two models: "ce" checks the routed experts, several layers and batches
through the cross-entropy, "aux" the aux loss and its gradient exactly.

  (a) the imported model's logits on the first batch (partition-run
      --dump-logits) equal transformers' within 1e-5 (largest difference
      over the largest logit, oracle_common.logits_error);
  (b) 10 training steps: transformers' model (output_router_logits=True,
      its own loss from labels with shift_labels = partition's targets,
      which are already shifted) with torch.optim.AdamW (betas 0.9/0.95,
      eps 1e-8, weight decay 0.1 on matrices only, at the learning rate
      partition-run reports for each step, as hf_families.py) on the same
      batches gives partition's loss at every step within 1e-5 relative;
      the final parameters, compared per tensor under partition's names
      (torch's model saved and imported, as hf_oracle.py does) as
      |ours - theirs| / |theirs|, are within 1e-4 (hf_oracle.py's
      tolerance), with at most 8 elements set aside that differ by more
      than 1e-4 -- each within 2 x the learning rates summed: AdamW's step
      of an element whose gradient is rounding noise --;
  (c) the final checkpoint exports to a directory that
      AutoModelForCausalLM.from_pretrained loads with no missing,
      unexpected or mismatched weight, whose loss (transformers' own) on
      the first batch equals partition's from that checkpoint within 1e-5,
      whose logits ("ce") equal partition's (--dump-logits of that
      checkpoint) within 1e-5, and which imports and exports again byte
      for byte;
  (d) the same weights saved as transformers 5's module state (fused
      mlp.experts.gate_up_proj / down_proj) import to the same checkpoint
      tensors as save_pretrained's per-expert files.

  hf_mixtral.py --bin BUILD/bin [--work DIR] [--keep] [--family ce|aux]

Exit 0: passed (prints the figures); 77: SKIPPED (torch or transformers
missing); 1: failed. What it shares with the other oracles is in
oracle_common.py.
"""

import filecmp
import json
import os
import shutil
import sys

from oracle_common import (dumped_logits, logits_error, metrics,
                           oracle_main, run, token_batches)

SEQ, STEPS = 32, 10
TOL = {"loss": 1e-5, "logits": 1e-5, "param": 1e-4}
# The peak learning rate, as hf_families.py's (which says why 3e-3 let
# rounding grow from step to step on random tokens): at 3e-3 the "ce" run's
# worst loss was 1.5e-6 and one element was set aside; at 1e-3, 8.6e-8 and
# none.
LR = 1e-3
# A parameter element further than this from torch's after 10 steps is one
# AdamW moved on a gradient that is rounding noise (see check()); at most
# AMPLIFIED_COUNT such in the model.
AMPLIFIED, AMPLIFIED_COUNT = 1e-4, 8
SHAPE = dict(vocab_size=256, hidden_size=64, intermediate_size=96,
             num_attention_heads=4, num_key_value_heads=2,
             max_position_embeddings=128, hidden_act="silu",
             num_local_experts=4, num_experts_per_tok=2, rms_norm_eps=1e-5,
             rope_theta=1e6, sliding_window=None, tie_word_embeddings=False,
             router_jitter_noise=0.0)
MODELS = {
    "ce": dict(layers=2, batch=4, aux=0.0),
    "aux": dict(layers=1, batch=1, aux=0.02),
}


def hf_loss(model, inputs, targets):
    """transformers' own training loss: cross-entropy against the given
    (already shifted) targets plus router_aux_loss_coef x its aux loss."""
    return model(input_ids=inputs, labels=targets, shift_labels=targets,
                 output_router_logits=True).loss


def relative(a, b):
    a, b = a.double(), b.double()
    norm = b.norm().item()
    return (a - b).norm().item() / (norm if norm > 0 else 1.0)


def imported(tools, hf_dir, work, name, safetensors):
    """The checkpoint tensors partition-import makes of `hf_dir`."""
    ckpt = os.path.join(work, name + ".ckpt")
    run([tools["partition-import"], hf_dir, "-o",
         os.path.join(work, name + ".mlir"), "--checkpoint", ckpt,
         "--seq-len", str(SEQ), "--force"])
    return safetensors.load_file(os.path.join(ckpt, "checkpoint.safetensors"))


def check(name, spec, tools, work, torch, transformers):
    import safetensors.torch as safetensors
    work = os.path.join(work, name)
    os.makedirs(work, exist_ok=True)
    batch = spec["batch"]
    torch.manual_seed(1234)
    config = transformers.MixtralConfig(
        **SHAPE, num_hidden_layers=spec["layers"],
        router_aux_loss_coef=spec["aux"])
    model = transformers.MixtralForCausalLM(config)
    with torch.no_grad():
        for param_name, param in model.named_parameters():
            param.add_(0.02 * torch.randn_like(param))
            if param_name.endswith("mlp.gate.weight"):
                param.mul_(4.0)
    model = model.float().eval()
    hf_dir = os.path.join(work, "init.hf")
    model.save_pretrained(hf_dir, safe_serialization=True)

    # Batch s is the window tokens[s*B*T : (s+1)*B*T + 1] (BatchLoader).
    data, batches = token_batches(work, batch, SEQ, STEPS)

    init, mlir = os.path.join(work, "init.ckpt"), os.path.join(work, "m.mlir")
    run([tools["partition-import"], hf_dir, "-o", mlir, "--checkpoint", init,
         "--seq-len", str(SEQ), "--batch", str(batch)])
    ptp = os.path.join(work, "m.ptp")
    common = ["--data", data, "--data-format", "raw", "--quiet"]
    # The logits: partition-compile --logits returns those of a loss that
    # is the cross-entropy alone, so with an aux loss they come from the
    # same directory with router_aux_loss_coef 0 (the forward pass does not
    # depend on it).
    logits_dir, logits_init = hf_dir, init
    if spec["aux"]:
        logits_dir = os.path.join(work, "logits.hf")
        shutil.copytree(hf_dir, logits_dir, dirs_exist_ok=True)
        with open(os.path.join(logits_dir, "config.json")) as f:
            logits_config = json.load(f)
        logits_config["router_aux_loss_coef"] = 0.0
        with open(os.path.join(logits_dir, "config.json"), "w") as f:
            json.dump(logits_config, f)
        logits_init = os.path.join(work, "logits.ckpt")
        run([tools["partition-import"], logits_dir, "-o",
             os.path.join(work, "logits.mlir"), "--checkpoint", logits_init,
             "--seq-len", str(SEQ), "--batch", str(batch)])
        run([tools["partition-compile"], os.path.join(work, "logits.mlir"),
             "-o", os.path.join(work, "logits.ptp"), "--logits"])
        run([tools["partition-compile"], mlir, "-o", ptp])
    else:
        run([tools["partition-compile"], mlir, "-o", ptp, "--logits"])
    logits_ptp = os.path.join(work, "logits.ptp") if spec["aux"] else ptp
    dump = os.path.join(work, "init.npz")
    run([tools["partition-run"], logits_ptp, "--init-from", logits_init,
         "--dump-logits", dump] + common)
    input_ids, ours_logits = dumped_logits(dump)
    out, final = os.path.join(work, "m.jsonl"), os.path.join(work, "final.ckpt")
    run([tools["partition-run"], ptp, "--init-from", init, "--steps",
         str(STEPS), "--eval-every", "0", "--lr", str(LR), "--metrics-out",
         out, "--save", final] + common)
    steps = metrics(out)

    figures, failures = {}, []
    with torch.no_grad():
        figures["logits"] = logits_error(
            ours_logits, model(input_ids=batches[0][0]).logits.numpy())
    if (input_ids != batches[0][0].numpy()).any():
        failures.append("dumped input_ids are not the first batch")

    # transformers + torch.optim.AdamW at partition-run's learning rates.
    model.train()
    params = list(model.parameters())
    optimizer = torch.optim.AdamW(
        [{"params": [p for p in params if p.dim() >= 2], "weight_decay": 0.1},
         {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}],
        lr=steps[0]["lr"], betas=(0.9, 0.95), eps=1e-8)
    reference = []
    for step, (inputs, targets) in enumerate(batches):
        for group in optimizer.param_groups:
            group["lr"] = steps[step]["lr"]
        loss = hf_loss(model, inputs, targets)
        reference.append(loss.item())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    model.eval()
    figures["loss"] = max(abs(m["loss"] - r) / abs(r)
                          for m, r in zip(steps, reference))
    if len(steps) != STEPS:
        failures.append(f"partition-run gave {len(steps)} steps")

    # Final parameters under partition's names: torch's model imported.
    # AdamW's first update of an element is lr g / (|g| + eps): where g is
    # zero up to rounding (a sum that cancels, 1e-9 against 6e-3 for the
    # rest of its row), each implementation's rounding picks its own step,
    # up to lr, so a few elements differ by up to 2 x the learning rates
    # summed while every other sits at the fp32 floor. Those (|diff| >
    # AMPLIFIED) are counted and bounded; the figure is the rest's.
    trained = os.path.join(work, "torch-final.hf")
    model.save_pretrained(trained, safe_serialization=True)
    theirs = imported(tools, trained, work, "torch-final", safetensors)
    ours = safetensors.load_file(os.path.join(final, "checkpoint.safetensors"))
    figures["param"], figures["param_tensor"] = 0.0, ""
    figures["param_raw"], amplified, largest = 0.0, 0, 0.0
    bound = 2.0 * sum(m["lr"] for m in steps)
    for tensor_name, tensor in theirs.items():
        mine = ours[tensor_name]
        figures["param_raw"] = max(figures["param_raw"],
                                   relative(mine, tensor))
        far = (mine.double() - tensor.double()).abs() > AMPLIFIED
        amplified += int(far.sum())
        if far.any():
            largest = max(largest, (mine.double() - tensor.double())[far]
                          .abs().max().item())
        kept = ~far
        error = relative(mine[kept], tensor[kept])
        if error >= figures["param"]:
            figures["param"], figures["param_tensor"] = error, tensor_name
    if amplified > AMPLIFIED_COUNT or largest > bound:
        failures.append(f"{amplified} parameter elements differ by more than "
                        f"{AMPLIFIED:.0e} (at most {AMPLIFIED_COUNT}), the "
                        f"largest by {largest:.2e} (at most 2 x the learning "
                        f"rates summed, {bound:.2e})")

    # Export: loads cleanly, partition's logits; export(import(x)) == x.
    exported = os.path.join(work, "final.hf")
    run([tools["partition-export"], final, "--format", "hf", "-o", exported])
    loaded, info = transformers.AutoModelForCausalLM.from_pretrained(
        exported, output_loading_info=True)
    for key in ["missing_keys", "unexpected_keys", "mismatched_keys"]:
        if info.get(key):
            failures.append(f"export: {key} {sorted(info[key])}")
    if type(loaded).__name__ != "MixtralForCausalLM":
        failures.append(f"export loads as {type(loaded).__name__}")
    # partition's loss from the final checkpoint (the first step of a run
    # from it) against transformers' own loss of the exported model.
    after = os.path.join(work, "after.jsonl")
    run([tools["partition-run"], ptp, "--init-from", final, "--steps", "1",
         "--eval-every", "0", "--metrics-out", after] + common)
    partition_after = metrics(after)[0]["loss"]
    loaded = loaded.float().eval()
    with torch.no_grad():
        figures["export_loss"] = abs(
            partition_after - hf_loss(loaded, *batches[0]).item()) / abs(
                partition_after)
    if not spec["aux"]:
        final_dump = os.path.join(work, "final.npz")
        run([tools["partition-run"], ptp, "--init-from", final,
             "--dump-logits", final_dump] + common)
        with torch.no_grad():
            figures["export"] = logits_error(
                dumped_logits(final_dump)[1],
                loaded(input_ids=batches[0][0]).logits.numpy())
    again, again_ckpt = (os.path.join(work, "again.hf"),
                         os.path.join(work, "again.ckpt"))
    run([tools["partition-import"], exported, "-o",
         os.path.join(work, "again.mlir"), "--checkpoint", again_ckpt])
    run([tools["partition-export"], again_ckpt, "-o", again])
    for file in ["config.json", "model.safetensors"]:
        if not filecmp.cmp(os.path.join(exported, file),
                           os.path.join(again, file), shallow=False):
            failures.append(f"round trip: {file} differs")

    # transformers 5's fused state dict imports to the same tensors.
    fused = os.path.join(work, "fused.hf")
    os.makedirs(fused, exist_ok=True)
    shutil.copy(os.path.join(trained, "config.json"), fused)
    safetensors.save_file(
        {k: v.contiguous() for k, v in model.state_dict().items()},
        os.path.join(fused, "model.safetensors"), metadata={"format": "pt"})
    if not any(".mlp.experts.gate_up_proj" in k for k in model.state_dict()):
        failures.append("transformers' state dict has no fused experts")
    fused_tensors = imported(tools, fused, work, "fused", safetensors)
    for tensor_name, tensor in theirs.items():
        if not torch.equal(fused_tensors[tensor_name], tensor):
            failures.append(f"fused import: {tensor_name} differs")

    for key, tolerance in [("logits", TOL["logits"]), ("loss", TOL["loss"]),
                           ("param", TOL["param"]),
                           ("export_loss", TOL["loss"]),
                           ("export", TOL["logits"])]:
        if key in figures and not figures[key] <= tolerance:
            failures.append(f"{key} {figures[key]:.2e} > {tolerance:.0e}")
    exported_logits = (f", logits rel {figures['export']:.2e}"
                       if "export" in figures else "")
    print(f"{name} ({spec['layers']} layers, batch {batch}, "
          f"router_aux_loss_coef {spec['aux']}): logits rel "
          f"{figures['logits']:.2e}; {STEPS} AdamW steps, worst loss rel "
          f"{figures['loss']:.2e} (step 1: partition {steps[0]['loss']!r}, "
          f"transformers {reference[0]!r}); final params rel "
          f"{figures['param']:.2e} ({figures['param_tensor']}), {amplified} "
          f"elements set aside (largest {largest:.2e} <= 2 x sum lr "
          f"{bound:.2e}; all included: {figures['param_raw']:.2e}); exported "
          f"(loads cleanly): loss rel {figures['export_loss']:.2e}"
          f"{exported_logits}; round trip "
          f"{'DIFFERS' if any('round trip' in f for f in failures) else 'identical'}"
          f"; fused import "
          f"{'DIFFERS' if any('fused' in f for f in failures) else 'identical'}")
    return failures


def check_all(args, tools, work, torch, transformers):
    failures = []
    for name, spec in MODELS.items():
        if args.family and name not in args.family:
            continue
        failures += [f"{name}: {f}" for f in check(
            name, spec, tools, work, torch, transformers)]
    return failures


if __name__ == "__main__":
    sys.exit(oracle_main(
        __doc__.splitlines()[0], check_all,
        "oracle: partition's Mixtral agrees with transformers",
        with_families=True))
