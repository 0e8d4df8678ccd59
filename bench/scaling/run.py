#!/usr/bin/env python3
"""Scaling on CPU ranks: one rank x 2 threads against 2 ranks x 1 thread.

Compiles one model (default gpt2-124m, batch 4, seq 64) for one device and
for each 2-rank plan, then runs them side by side, interleaved (one run of
each, then again, --repeats times) so that a change in the machine's load
hits every plan alike, and prints per plan the median step time and

    efficiency = single-rank step time / plan step time

(1 rank x 2 threads against 2 ranks x 1 thread: the same cores, the same
global batch). Plans: dp2 with overlap (the default), dp2 without
("overlap": {"data_parallel": false}), dp2 ZeRO-1, tp2 + sequence
parallelism without and with "overlap": {"tensor_parallel": true}; and dp2 with overlap once more with each rank bound to a core
(mpirun --bind-to core: the communication thread then shares its rank's
core with the compute thread; every other run is --bind-to none, where the
kernel places the four threads). A second model, of --pp-micro-batch
sequences per micro-batch, compares a 2-stage 1F1B pipeline of
--pp-microbatches micro-batches with one rank x 2 threads accumulating
the same micro-batches, against 1 - the schedule's bubble
(p - 1) / (m + p - 1). Then one traced run of dp2 with overlap gives, from its
communication track (test/e2e/Inputs/trace.py), the share of the started
data-parallel collectives' time hidden behind kernels, and one of dp2
ZeRO-1 where its waits go (the three largest, by collective).

A benchmark, never a test: the figures depend on the machine and its load.

    python3 bench/scaling/run.py --bin build/bin [--repeats 2] [--steps 5]
"""
import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import tempfile

PLANS = [
    ("dp2 overlap", {"mesh": {"dp": 2}}),
    ("dp2 no overlap", {"mesh": {"dp": 2}, "overlap": {"data_parallel": False}}),
    ("dp2 zero-1", {"mesh": {"dp": 2}, "zero": {"stage": 1}}),
    ("tp2 + sp", {"mesh": {"tp": 2}, "tensor_parallel": {"sequence_parallel": True}}),
    ("tp2 + sp, tp overlap", {"mesh": {"tp": 2},
                              "tensor_parallel": {"sequence_parallel": True},
                              "overlap": {"tensor_parallel": True}}),
]


def run(cmd, **kw):
    return subprocess.run(cmd, check=True, capture_output=True, text=True, **kw)


def trace_module():
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                        "test", "e2e", "Inputs", "trace.py")
    spec = importlib.util.spec_from_file_location("trace", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def step_ms(metrics, warm):
    with open(metrics) as f:
        rows = [json.loads(line) for line in f if line.strip()]
    return statistics.median(r["step_ms"] for r in rows
                             if "step_ms" in r and r["step"] > warm)


def execute(bindir, ptp, ranks, threads, steps, metrics, trace=None,
            bind="none"):
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1",
               OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMP_NUM_THREADS=str(threads), OPENBLAS_NUM_THREADS=str(threads))
    cmd = [os.path.join(bindir, "partition-run"), ptp, "--steps", str(steps),
           "--eval-every", "0", "--metrics-out", metrics, "--quiet"]
    if trace:
        cmd += ["--trace", trace]
    if ranks > 1:
        cmd = ["mpirun", "-n", str(ranks), "--oversubscribe",
               "--bind-to", bind] + cmd
    run(cmd, env=env)


def traced_spans(args, work, ptp, tag):
    """Runs `ptp` on 2 ranks x 1 thread with --trace; per rank, its spans."""
    trace_path = os.path.join(work, tag + ".trace.json")
    execute(args.bin, ptp, 2, 1, max(args.steps, args.warmup + 1),
            os.path.join(work, tag + ".trace.jsonl"), trace=trace_path)
    with open(trace_path) as f:
        events = json.load(f)["traceEvents"]
    return [[e for e in events if e.get("ph") == "X" and e.get("pid") == rank]
            for rank in (0, 1)]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bin", default="build/bin")
    parser.add_argument("--preset", default="gpt2-124m")
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--seq-len", type=int, default=64)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=2,
                        help="steps left out of the median (first touches)")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--pp-microbatches", type=int, default=8)
    parser.add_argument("--pp-micro-batch", type=int, default=1,
                        help="sequences per pipeline micro-batch")
    parser.add_argument("--work", default=None,
                        help="keep the programs and metrics here")
    args = parser.parse_args()
    # The machine's load, at the start and at the end: the figures mean
    # little on a busy machine.
    print("load at start:", run(["uptime"]).stdout.strip())
    work = args.work or tempfile.mkdtemp(prefix="partition-scaling-")
    os.makedirs(work, exist_ok=True)
    model = os.path.join(work, "model.mlir")
    run([os.path.join(args.bin, "partition-gen"), "--preset", args.preset,
         "--batch", str(args.batch), "--seq-len", str(args.seq_len), "-o", model])
    # The pipeline's model: its batch is one micro-batch.
    pp_model = os.path.join(work, "model-pp.mlir")
    run([os.path.join(args.bin, "partition-gen"), "--preset", args.preset,
         "--batch", str(args.pp_micro_batch), "--seq-len", str(args.seq_len),
         "-o", pp_model])
    m = args.pp_microbatches
    accumulate = f"1 rank x 2 threads, {m} micro-batches"
    pipeline = f"pp2 1f1b, {m} micro-batches"
    programs = [("1 rank x 2 threads", None, 1, 2)]
    for name, plan in PLANS:
        programs.append((name, plan, 2, 1))
    programs += [
        (accumulate, {"pipeline": {"microbatches": m}}, 1, 2),
        (pipeline, {"mesh": {"pp": 2},
                    "pipeline": {"schedule": "1f1b", "microbatches": m}}, 2, 1),
    ]
    model_of = {accumulate: pp_model, pipeline: pp_model}
    reference_of = {pipeline: accumulate, accumulate: accumulate}
    bound = "dp2 overlap, bound to cores"
    paths = {}
    for name, plan, _, _ in programs:
        tag = (name.replace(" ", "_").replace("+", "").replace("-", "")
               .replace(",", ""))
        ptp = os.path.join(work, tag + ".ptp")
        cmd = [os.path.join(args.bin, "partition-compile"),
               model_of.get(name, model), "-o", ptp]
        if plan:
            plan_path = os.path.join(work, tag + ".json")
            with open(plan_path, "w") as f:
                json.dump(plan, f)
            cmd += ["--plan", plan_path]
        run(cmd)
        paths[name] = (ptp, tag)
    paths[bound] = (paths["dp2 overlap"][0], "dp2_overlap_bound")
    programs.append((bound, None, 2, 1))
    times = {name: [] for name, _, _, _ in programs}
    for repeat in range(args.repeats):
        for name, _, ranks, threads in programs:
            ptp, tag = paths[name]
            metrics = os.path.join(work, f"{tag}.{repeat}.jsonl")
            execute(args.bin, ptp, ranks, threads, args.steps, metrics,
                    bind="core" if name == bound else "none")
            times[name].append(step_ms(metrics, args.warmup))
    print(f"{args.preset}, batch {args.batch}, seq {args.seq_len}: median step "
          f"ms over {args.repeats} interleaved runs of {args.steps} steps "
          f"(first {args.warmup} left out); the pipeline rows: {m} "
          f"micro-batches of {args.pp_micro_batch}, against their own "
          f"accumulating single rank")
    print("| plan | ranks x threads | step ms (min-max) | efficiency |")
    print("|---|---|---:|---:|")
    for name, _, ranks, threads in programs:
        single = statistics.median(times[reference_of.get(name,
                                                          programs[0][0])])
        ms = statistics.median(times[name])
        spread = f"{min(times[name]):.0f}-{max(times[name]):.0f}"
        print(f"| {name} | {ranks} x {threads} | {ms:.0f} ({spread}) | "
              f"{100.0 * single / ms:.0f}% |")
    bubble = 1.0 / (m + 1)  # (p - 1) / (m + p - 1) at p = 2
    efficiency = (statistics.median(times[accumulate]) /
                  statistics.median(times[pipeline]))
    print(f"pp2 1F1B: predicted bubble {100 * bubble:.1f}%, so at most "
          f"{100 * (1 - bubble):.0f}% efficiency; measured "
          f"{100 * efficiency:.0f}% = {efficiency / (1 - bubble):.2f} of it "
          f"(the target: within 10%, >= 0.90)")
    # The communication track of dp2 with overlap.
    reader = trace_module()
    ptp, tag = paths["dp2 overlap"]
    for rank, all_spans in enumerate(traced_spans(args, work, ptp, tag)):
        spans = [e for e in all_spans
                 if e.get("args", {}).get("step", 0) > args.warmup]
        started, hidden, total = reader.overlap(spans)
        share = 100.0 * hidden / total if total else 0.0
        steps = len({e["args"]["step"] for e in spans}) or 1
        blocked = sum(e["dur"] for e in spans if e.get("cat") == "wait")
        print(f"rank {rank}: data-parallel collectives hidden behind compute: "
              f"{share:.0f}% of {total / 1e3 / steps:.0f} ms per step "
              f"({len(started)} started collectives in {steps} steps after "
              f"warm-up); blocked in waits {blocked / 1e3 / steps:.0f} ms "
              f"per step")
    # Where ZeRO-1's exposed communication goes: its waits by collective
    # (trace.py --waits; docs/performance.md).
    ptp, tag = paths["dp2 zero-1"]
    for rank, spans in enumerate(traced_spans(args, work, ptp, tag)):
        total, steps, groups = reader.collective_waits(spans)
        largest = "; ".join(f"{group} ({state}) {time / 1e3 / steps:.0f}"
                            for (group, state), time in groups.most_common(3))
        print(f"rank {rank}: ZeRO-1 blocked in waits {total / 1e3 / steps:.0f} "
              f"ms per step (steps after the first), the most: {largest}")
    print("load at end:", run(["uptime"]).stdout.strip())


if __name__ == "__main__":
    main()
