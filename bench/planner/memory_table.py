#!/usr/bin/env python3
"""Memory before launch, side by side: the planner's closed form, the
compiler's memory plan, and what partition-run measures on CPU ranks.

  memory_table.py [--bin BUILD/bin] [--check] [--workdir DIR]

For each plan of PLANS (dp, tp + SP, the four pipeline schedules, ZeRO 1-3,
each recompute policy, bf16, per-layer tp, gradient accumulation, Llama with
GQA and SwiGLU), on small GPT-2 and Llama models (4 layers, hidden 128,
sequence 128, vocabulary 512, global batch 8):

  - closed form: `partition-plan --plan --memory closed-form --json`'s
    memory per rank (planner/CostModel.cpp, stageMemory);
  - compiled: `partition-compile --memory-report`'s arena peak (the largest
    stage's under a pipeline);
  - measured: `partition-run --nproc N --steps 1`'s arena (rank 0, or the
    largest stage's) and the largest process RSS of the ranks (the arena
    plus the kernels' workspace, the runtime, MPI and the libraries).

Prints a markdown table. With --check, exits 1 unless every plan's closed
form is within 10% of its compiled plan and the compiled arena is the
measured one, byte for byte. No timing is involved.

The plan's `replicas` (NTP) are not in the table: the cost model does not
predict them (partition-plan refuses such a plan with one line).
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

GPT = ["--arch", "gpt2", "--layers", "4", "--hidden", "128", "--heads", "4",
       "--vocab", "512", "--seq-len", "128", "--positions", "128"]
LLAMA = ["--arch", "llama", "--layers", "4", "--hidden", "128", "--heads",
         "4", "--kv-heads", "2", "--vocab", "512", "--seq-len", "128"]
GLOBAL_BATCH = 8

# name, model, plan (every field written: partition-plan searches what a
# plan leaves out, and the table compares one program).
PLANS = [
    ("dp2", GPT, {"mesh": {"dp": 2}}),
    ("tp2 + SP", GPT, {"mesh": {"tp": 2},
                       "tensor_parallel": {"sequence_parallel": True}}),
    ("dp2 ZeRO-1", GPT, {"mesh": {"dp": 2}, "zero": {"stage": 1}}),
    ("dp2 ZeRO-2", GPT, {"mesh": {"dp": 2}, "zero": {"stage": 2}}),
    ("dp2 ZeRO-3", GPT, {"mesh": {"dp": 2}, "zero": {"stage": 3}}),
    ("pp2 GPipe m4", GPT, {"mesh": {"pp": 2}, "pipeline": {
        "schedule": "gpipe", "microbatches": 4}}),
    ("pp2 1F1B m4", GPT, {"mesh": {"pp": 2}, "pipeline": {
        "schedule": "1f1b", "microbatches": 4}}),
    ("pp2 interleaved v2 m4", GPT, {"mesh": {"pp": 2}, "pipeline": {
        "schedule": "interleaved-1f1b", "virtual_stages": 2,
        "microbatches": 4}}),
    ("pp2 zero-bubble m4", GPT, {"mesh": {"pp": 2}, "pipeline": {
        "schedule": "zero-bubble", "microbatches": 4}}),
    ("dp2 recompute selective", GPT, {"mesh": {"dp": 2},
                                      "recompute": {"policy": "selective"}}),
    ("dp2 recompute full", GPT, {"mesh": {"dp": 2},
                                 "recompute": {"policy": "full"}}),
    ("dp2 bf16", GPT, {"mesh": {"dp": 2}, "precision": "bf16"}),
    ("dp2 accumulation m2", GPT, {"mesh": {"dp": 2},
                                  "pipeline": {"microbatches": 2}}),
    ("tp2 per-layer (0-1 at 1, 2-3 at 2)", GPT, {
        "mesh": {"tp": 2}, "tensor_parallel": {"per_layer": [
            {"layers": "0-1", "tp": 1}, {"layers": "2-3", "tp": 2}]}}),
    ("dp2 x tp2 + SP, ZeRO-2, selective, bf16", GPT, {
        "mesh": {"dp": 2, "tp": 2},
        "tensor_parallel": {"sequence_parallel": True},
        "zero": {"stage": 2}, "recompute": {"policy": "selective"},
        "precision": "bf16"}),
    ("Llama dp2 x tp2 + SP, bf16", LLAMA, {
        "mesh": {"dp": 2, "tp": 2},
        "tensor_parallel": {"sequence_parallel": True}, "precision": "bf16"}),
    ("Llama pp2 1F1B m4, full", LLAMA, {
        "mesh": {"pp": 2}, "pipeline": {"schedule": "1f1b", "microbatches": 4},
        "recompute": {"policy": "full"}}),
]


def complete(plan):
    """The plan with every field written (defaults where it says none)."""
    full = {"mesh": {"dp": 1, "tp": 1, "pp": 1}, "tensor_parallel": {},
            "pipeline": {"microbatches": 1}, "zero": {"stage": 0},
            "recompute": {"policy": "none"}, "precision": "fp32"}
    for key, value in plan.items():
        if isinstance(value, dict):
            full[key].update(value)
        else:
            full[key] = value
    mesh = full["mesh"]
    if mesh["tp"] > 1:
        full["tensor_parallel"].setdefault("sequence_parallel", False)
    if not full["tensor_parallel"]:
        del full["tensor_parallel"]
    if mesh["dp"] == 1:
        del full["zero"]
    return full


def run(command, timeout=600):
    result = subprocess.run(command, capture_output=True, text=True,
                            timeout=timeout)
    if result.returncode != 0:
        sys.exit("memory_table.py: %s failed:\n%s%s" %
                 (" ".join(command), result.stdout, result.stderr))
    return result.stdout


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin", default=None,
                        help="the tools' directory (default: from PATH)")
    parser.add_argument("--check", action="store_true")
    parser.add_argument("--workdir", default=None)
    args = parser.parse_args()
    work = args.workdir or tempfile.mkdtemp(prefix="memory-table-")
    os.makedirs(work, exist_ok=True)

    def tool(name):
        path = (os.path.join(args.bin, name) if args.bin else
                shutil.which(name))
        if not path:
            sys.exit("memory_table.py: %s is not on PATH; give --bin "
                     "BUILD/bin" % name)
        return path

    gen, plan_tool = tool("partition-gen"), tool("partition-plan")
    compile_tool, run_tool = tool("partition-compile"), tool("partition-run")

    failures = []
    print("| plan | ranks | closed form (planner) | compiled (memory plan) "
          "| closed / compiled | measured arena | measured process RSS |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for index, (name, model_args, plan) in enumerate(PLANS, start=1):
        plan = complete(plan)
        mesh = plan["mesh"]
        ranks = mesh["dp"] * mesh["tp"] * mesh["pp"]
        microbatches = plan["pipeline"]["microbatches"]
        # The model's batch is one micro-batch of every replica.
        model = os.path.join(work, "model-%d.mlir" % index)
        run([gen] + model_args + ["--batch",
                                  str(GLOBAL_BATCH // microbatches),
                                  "-o", model])
        plan_path = os.path.join(work, "plan-%d.json" % index)
        with open(plan_path, "w") as f:
            json.dump(plan, f)
        predicted = json.loads(run([
            plan_tool, model, "--cluster", "cpu-local", "--plan", plan_path,
            "--global-batch", str(GLOBAL_BATCH), "--memory", "closed-form",
            "--json", "--top", "1"]))[0]
        closed = predicted["memory_per_rank_bytes"]
        program = os.path.join(work, "program-%d.ptp" % index)
        report = run([compile_tool, model, "--plan", plan_path, "-o",
                      program, "--memory-report"])
        arenas = [int(v) for v in re.findall(
            r"^memory: (?:stage \d+ )?arena_peak (\d+)$", report, re.M)]
        compiled = max(arenas)
        metrics = os.path.join(work, "metrics-%d.jsonl" % index)
        ran = run([run_tool, "--nproc", str(ranks), program, "--steps", "1",
                   "--metrics-out", metrics], timeout=300)
        with open(metrics) as f:
            summary = [json.loads(line) for line in f][-1]
        stages = re.search(r"^peak memory per pipeline stage \(measured: "
                           r"[^)]*\):(.*)$", ran, re.M)
        if stages:
            measured = max(int(v) for v in re.findall(
                r"stage \d+ arena (\d+) B", stages.group(1)))
        else:
            measured = summary["arena_bytes"]
        rss = max(r["peak_rss_bytes"] for r in summary.get(
            "ranks", [summary]))
        ratio = closed / compiled - 1
        if abs(ratio) >= 0.10:
            failures.append("%s: closed form %d is %+.1f%% of the compiled "
                            "%d" % (name, closed, 100 * ratio, compiled))
        if compiled != measured:
            failures.append("%s: compiled arena %d, measured %d" %
                            (name, compiled, measured))
        print("| %s (`%s`) | %d | %d | %d | %+.1f%% | %d%s | %d |" % (
            name, predicted["label"], ranks, closed, compiled, 100 * ratio,
            measured, "" if measured == compiled else " (differs)", rss))
    print()
    print("%d plans: closed form within 10%% of the compiled plan on %d, "
          "compiled = measured arena on %d" % (
              len(PLANS), len(PLANS) - sum("closed form" in f
                                           for f in failures),
              len(PLANS) - sum("measured" in f for f in failures)))
    if args.check and failures:
        for failure in failures:
            print("FAIL: " + failure, file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
