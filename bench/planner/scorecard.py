#!/usr/bin/env python3
"""partition-plan against published training runs: the scorecard.

  scorecard.py [--bin BUILD/bin] [--check] [--rows N,M] [--workdir DIR]
               [--table bench/planner/scorecard.json]

Each row of scorecard.json is a published run with its source: the
model's shape, the cluster profile, the GPU count, the global batch, the
configuration the source states (as plan.json) and the published TFLOP/s
per GPU and MFU. For each, the model is generated with partition-gen and
the plan predicted with `partition-plan --plan --json --memory
closed-form` (compiling models of hundreds of billions of parameters would
take longer than the check is worth); what the source leaves out (the
micro-batch size, the interleaving depth, and where the row says so
sequence parallelism and recomputation) is the planner's choice, printed
in the configuration column. Prints a markdown table: predicted against
published TFLOP/s per GPU with the error, the same for the fraction of
peak (in the source's convention: Megatron-LM counts recomputation in its
"% of peak", Llama 3's MFU does not), and the predicted memory per GPU
beside the device's.

With --check, exits 1 unless every row is within 10% of its published
TFLOP/s per GPU and fits in the device's memory.

With --search-time, instead times partition-plan's whole default search
(--memory auto, nothing fixed but the GPUs and the global batch) on each
row, and prints its wall time, the memory plans it compiled and its
choice (issue 31: within 30 s).
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def run(command):
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit("scorecard.py: %s failed:\n%s" %
                 (" ".join(command), result.stderr))
    return result.stdout


def generate(gen, model, path):
    args = [gen, "--arch", model["arch"], "--layers", str(model["layers"]),
            "--hidden", str(model["hidden"]), "--heads", str(model["heads"]),
            "--vocab", str(model["vocab"]), "--seq-len", str(model["seq_len"]),
            "--batch", "1", "-o", path]
    if "kv_heads" in model:
        args += ["--kv-heads", str(model["kv_heads"])]
    if "ffn" in model:
        args += ["--ffn", str(model["ffn"])]
    if model["arch"] == "gpt2":
        args += ["--positions", str(model["seq_len"])]
    run(args)


def predict(plan, model_path, row, plan_path):
    with open(plan_path, "w") as f:
        json.dump(row["plan"], f)
    return json.loads(run([plan, model_path, "--cluster", row["cluster"],
                           "--plan", plan_path, "--global-batch",
                           str(row["global_batch"]), "--memory",
                           "closed-form", "--json", "--top", "1",
                           "--max-micro-batch",
                           str(row.get("max_micro_batch", 32))]))[0]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin", default=None,
                        help="the tools' directory (default: from PATH)")
    parser.add_argument("--table", default=os.path.join(HERE,
                                                        "scorecard.json"))
    parser.add_argument("--check", action="store_true")
    parser.add_argument("--rows", default="all",
                        help="rows to predict (1-based, comma-separated)")
    parser.add_argument("--workdir", default=None)
    parser.add_argument("--search-time", action="store_true")
    args = parser.parse_args()
    with open(args.table) as f:
        rows = json.load(f)["rows"]
    chosen = (range(1, len(rows) + 1) if args.rows == "all" else
              [int(r) for r in args.rows.split(",")])
    work = args.workdir or tempfile.mkdtemp(prefix="scorecard-")
    os.makedirs(work, exist_ok=True)
    if args.bin:
        gen = os.path.join(args.bin, "partition-gen")
        plan = os.path.join(args.bin, "partition-plan")
    else:
        gen, plan = shutil.which("partition-gen"), shutil.which("partition-plan")
        if not gen or not plan:
            sys.exit("scorecard.py: partition-gen and partition-plan are not "
                     "on PATH; give --bin BUILD/bin")

    if args.search_time:
        print("| run | GPUs | global batch | search | memory plans compiled "
              "| chosen plan |")
        print("|---|---:|---:|---:|---:|---|")
        for index in chosen:
            row = rows[index - 1]
            model_path = os.path.join(work, "model-%d.mlir" % index)
            generate(gen, row["model"], model_path)
            start = time.perf_counter()
            out = run([plan, model_path, "--cluster", row["cluster"],
                       "--gpus", str(row["gpus"]), "--global-batch",
                       str(row["global_batch"]), "--top", "1",
                       "--max-micro-batch",
                       str(row.get("max_micro_batch", 32))])
            seconds = time.perf_counter() - start
            first = out.splitlines()[0] if out else ""
            compiled = re.search(r"(\d+) memory plans? compiled", first)
            chosen_plan = re.search(r"^\s*1\s+(\S.*?)\s{2,}", out, re.M)
            print("| %s | %d | %d | %.1f s | %s | %s |" % (
                row["run"], row["gpus"], row["global_batch"], seconds,
                compiled.group(1) if compiled else "0",
                chosen_plan.group(1) if chosen_plan else "?"), flush=True)
        return

    failures, errors = [], []
    print("| run | GPUs | configuration (planner's choices included) "
          "| predicted TFLOP/s per GPU | published | error "
          "| predicted % of peak | published | memory per GPU | source |")
    print("|---|---:|---|---:|---:|---:|---:|---:|---|---|")
    for index in chosen:
        row = rows[index - 1]
        model = row["model"]
        model_path = os.path.join(work, "model-%d.mlir" % index)
        generate(gen, model, model_path)
        p = predict(plan, model_path, row,
                    os.path.join(work, "plan-%d.json" % index))
        published = row["published"]
        error = p["tflops_per_gpu"] / published["tflops_per_gpu"] - 1
        errors.append(abs(error))
        # The source's convention: Megatron-LM's "% of peak" is its TFLOP/s
        # (recomputation included) over peak; MFU counts model FLOPs only.
        if row.get("convention", "hardware") == "model":
            fraction = p["mfu"]
        else:
            fraction = p["tflops_per_gpu"] * 1e12 / p["device_peak_flops"]
        if abs(error) >= 0.10:
            failures.append("%s: predicted %.1f TFLOP/s per GPU, published "
                            "%g (%+.1f%%)" % (row["run"], p["tflops_per_gpu"],
                                               published["tflops_per_gpu"],
                                               100 * error))
        if not p["fits"]:
            failures.append("%s: the published plan does not fit (%.1f of "
                            "%.1f GiB)" % (row["run"],
                                           p["memory_per_rank_bytes"] / 2**30,
                                           p["device_memory_bytes"] / 2**30))
        print("| %s | %d | %s | %.1f | %g | %+.1f%% | %.1f%% | %.0f%% "
              "| %.1f of %.0f GiB | %s |" %
              (row["run"], row["gpus"], p["label"], p["tflops_per_gpu"],
               published["tflops_per_gpu"], 100 * error, 100 * fraction,
               100 * published["mfu"], p["memory_per_rank_bytes"] / 2**30,
               p["device_memory_bytes"] / 2**30, row["source"]))
    print()
    print("%d rows, mean absolute error %.1f%%, largest %.1f%%" %
          (len(errors), 100 * sum(errors) / len(errors), 100 * max(errors)))
    if args.check and failures:
        for failure in failures:
            print("FAIL: " + failure, file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
