#!/usr/bin/env python3
"""Recomputation changes no number: each plan against the same plan with
"recompute": {"policy": "none"}.

  recompute_equivalence.py --model MODEL.mlir --workdir DIR [--steps 20]
                           [--lr 3e-3] [--lr-scale X] [--cache DIR]
                           --plan NAME=PLAN_JSON [--plan ...]

For each plan (which names a recompute policy): compiles it and the same
plan with the policy "none", trains both on as many MPI ranks as the mesh
has devices from the same seed on the same data, and requires the loss of
every step and every parameter and AdamW moment of the final checkpoints to
be bit-identical (relative difference exactly 0): recomputation reruns the
same deterministic kernels on the same inputs, in the same order on every
rank. Prints one line per plan and fails if any differs. `--lr-scale`
trains the recomputing program with a scaled learning rate: a control that
the comparison does detect a difference.

Plans that differ only in their policy share one "none" run: references
are kept under --cache (default: the workdir), named by a hash of the
model, the reference plan, the steps and the learning rate, so that
several invocations on one model (a test's budget plans after its
selective / full ones) train each reference once.

Reuses the harness of equivalence.py (same directory) for compiling,
launching and reading checkpoints.
"""

import argparse
import hashlib
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import equivalence as harness  # noqa: E402


def reference_of(workdir, run_name):
    """The losses and checkpoint of a reference run trained before."""
    return (harness.losses(os.path.join(workdir, run_name + ".jsonl")),
            harness.read_safetensors(os.path.join(
                workdir, run_name + ".ckpt", "checkpoint.safetensors")))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", required=True)
    parser.add_argument("--workdir", required=True)
    parser.add_argument("--plan", action="append", required=True,
                        metavar="NAME=PLAN_JSON")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--lr-scale", type=float, default=1.0)
    parser.add_argument("--cache", help="where reference runs are kept")
    args = parser.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    cache = args.cache or args.workdir
    os.makedirs(cache, exist_ok=True)
    with open(args.model, "rb") as f:
        model_hash = hashlib.sha256(f.read()).hexdigest()

    failed = False
    for spec in args.plan:
        name, _, plan_path = spec.partition("=")
        plan = json.load(open(plan_path))
        policy = plan.get("recompute", {}).get("policy", "none")
        reference_plan = dict(plan, recompute={"policy": "none"})
        reference_path = os.path.join(args.workdir, name + "-none.json")
        with open(reference_path, "w") as f:
            json.dump(reference_plan, f)
        ranks = harness.mesh_devices(plan)
        key = hashlib.sha256(json.dumps(
            [model_hash, reference_plan, args.steps, args.lr],
            sort_keys=True).encode()).hexdigest()[:16]
        results = {}
        for label, path, lr, workdir, run_name in (
                ("none", reference_path, args.lr, cache, "none-" + key),
                (policy, plan_path, args.lr * args.lr_scale, args.workdir,
                 f"{name}-{policy}")):
            done = os.path.join(workdir, run_name + ".done")
            if label == "none" and os.path.exists(done):
                results[label] = reference_of(workdir, run_name)
                continue
            program = os.path.join(workdir, run_name + ".ptp")
            harness.run(["partition-compile", args.model, "-o", program,
                         "--plan", path])
            results[label] = harness.train(
                harness.launcher(ranks) if ranks > 1 else [], program, args,
                workdir, run_name, lr)
            if label == "none":
                open(done, "w").close()
        (ref_losses, ref_params), (losses, params) = (results["none"],
                                                      results[policy])
        loss_diff = harness.compare_losses(ref_losses, losses, args.steps)
        if set(ref_params) != set(params):
            sys.exit(f"recompute_equivalence: {name}: the checkpoints hold "
                     f"different tensors")
        differing = sorted(n for n in ref_params
                           if ref_params[n].tobytes() != params[n].tobytes())
        ok = loss_diff == 0.0 and not differing
        failed |= not ok
        print(f"{name} ({policy}, {ranks} ranks): loss max rel diff "
              f"{loss_diff:.2e} over {args.steps} steps; "
              f"{len(differing)} of {len(ref_params)} tensors differ"
              f"{' (first ' + differing[0] + ')' if differing else ''}: "
              f"{'IDENTICAL' if ok else 'MISMATCH'}")
    if failed:
        print("recompute_equivalence: some plans differ from policy none")
        return 1
    print("recompute_equivalence: every policy reproduces policy none "
          "bit for bit")
    return 0


if __name__ == "__main__":
    sys.exit(main())
