#!/usr/bin/env python3
"""Optimizer offload's speed on this machine: the step with the moments on
disk against the step without, and the planner's prediction of the
difference.

Compiles one model (default gpt2-124m cut to --layers 2, batch 2, seq 32:
54M parameters, a step of a few seconds on 2 cores, 430 MB of moments) for
one CPU rank without offload and with "offload": {"optimizer": "nvme"} (the
file under --dir: give a directory on the real disk, not a tmpfs), runs
them interleaved (one run of each, then again, --repeats times) so that a
change in the machine's load hits both alike, and prints:

  - the median step time of each and the overhead of offload;
  - the disk as `partition-plan --calibrate` measures it in this same
    invocation, before and after the timed runs (the runtime's own I/O
    engine on a file in --dir, and the kernels' slowdown beside it; memcpy,
    GEMMs and collectives besides): the cluster file the prediction uses
    has the mean of the two (this virtual disk's bandwidth moves by a
    third between minutes);
  - from one traced run (partition-run --trace) of each program: the time
    the rank spent in the tier copies' starts and waits per step (the
    exposed I/O) against the I/O's time at the measured bandwidth (bytes
    read / read bandwidth + bytes written / write bandwidth), the share
    hidden behind compute; and the kernels' time per step with and without
    offload (what the compute loses beside the I/O, which the planner does
    not model);
  - `partition-plan --plan` of both plans on the calibrated cluster: the
    predicted step times, the breakdown's `offload` line (and of it what
    the kernels lose beside the disk, `disk_compute_slowdown` as
    --calibrate measured it), against the measured overhead (the issue's
    goal: within 25%);
  - unless --no-parameters: the same for ZeRO-3's parameter offload, dp2
    ZeRO-3 on 2 ranks x 1 thread (mpirun) without offload and with
    "offload": {"parameters": "nvme"} (the fp32 shards on disk, read for
    every all-gather and around the update), interleaved likewise, against
    the predicted `offload` line.

A benchmark, never a test: the figures depend on the machine and its load.

    python3 bench/offload/run.py --bin build/bin --dir /work/offload-bench \
        [--repeats 3] [--steps 4]
"""
import argparse
import json
import os
import statistics
import subprocess
import tempfile


def run(cmd, **kw):
    return subprocess.run(cmd, check=True, capture_output=True, text=True, **kw)


def step_ms(metrics, warm):
    with open(metrics) as f:
        rows = [json.loads(line) for line in f if line.strip()]
    return statistics.median(r["step_ms"] for r in rows
                             if "step_ms" in r and r["step"] > warm)


def env(threads):
    return dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1",
                OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
                OMP_NUM_THREADS=str(threads),
                OPENBLAS_NUM_THREADS=str(threads))


def execute(bindir, ptp, threads, steps, metrics, trace=None, ranks=1):
    cmd = [os.path.join(bindir, "partition-run"), ptp, "--steps", str(steps),
           "--eval-every", "0", "--metrics-out", metrics, "--quiet"]
    if ranks > 1:
        cmd += ["--nproc", str(ranks)]
    if trace:
        cmd += ["--trace", trace]
    run(cmd, env=dict(env(threads), OMPI_MCA_btl="self,vader"))


def tier_io(trace_path, warm):
    """Per step after the warm-up: seconds the rank spent starting tier
    copies and waiting for them, and the bytes read and written."""
    with open(trace_path) as f:
        events = json.load(f)["traceEvents"]
    spans = [e for e in events if e.get("ph") == "X"
             and e.get("args", {}).get("step", 0) > warm]
    steps = len({e["args"]["step"] for e in spans}) or 1
    # On the instruction track (tid 0): the copies' starts and the waits
    # named by what they wait for ("wait #40 tier_read moment1 wte ...").
    exposed = 0.0
    read_bytes = write_bytes = 0
    for e in spans:
        if e.get("tid", 0) != 0:
            continue
        if e.get("cat") == "tier copy":
            exposed += e["dur"]
            if e["name"].startswith("tier_read"):
                read_bytes += e["args"].get("bytes", 0)
            else:
                write_bytes += e["args"].get("bytes", 0)
        elif e.get("cat") == "wait" and e["name"].split(" ")[2:3] in (
                ["tier_read"], ["tier_write"]):
            exposed += e["dur"]
    return (exposed / 1e6 / steps, read_bytes / steps, write_bytes / steps,
            steps)


def kernel_seconds(trace_path, warm):
    """Per step after the warm-up: the seconds of the instruction track's
    kernels."""
    with open(trace_path) as f:
        events = json.load(f)["traceEvents"]
    spans = [e for e in events if e.get("ph") == "X" and e.get("tid", 0) == 0
             and e.get("args", {}).get("step", 0) > warm]
    steps = len({e["args"]["step"] for e in spans}) or 1
    return sum(e["dur"] for e in spans if e.get("cat") == "kernel") / 1e6 / steps


DISK_FIELDS = ("disk_read_bandwidth", "disk_write_bandwidth",
               "disk_compute_slowdown")


def calibrate(args, path):
    """partition-plan --calibrate with the disk in --dir, into `path`."""
    out = run([os.path.join(args.bin, "partition-plan"), "--calibrate",
               "--calibrate-dir", args.dir, "-o", path],
              env=env(args.threads))
    for line in out.stderr.splitlines():
        if line.startswith(("memcpy", "sgemm")):
            print("calibrate:", line)
    with open(path) as f:
        return json.load(f)


def mean_cluster(clusters, path):
    """The first cluster with the disk's fields the mean of all, at `path`."""
    merged = dict(clusters[0])
    for key in DISK_FIELDS:
        merged[key] = statistics.mean(c.get(key, 0.0) for c in clusters)
    with open(path, "w") as f:
        json.dump(merged, f, indent=2)
    print("cluster for the prediction (the calibrations' mean): disk write "
          f"{merged['disk_write_bandwidth'] / 1e9:.2f} GB/s, read "
          f"{merged['disk_read_bandwidth'] / 1e9:.2f} GB/s, kernels beside "
          f"it {100 * merged['disk_compute_slowdown']:.0f}% slower")
    return merged


def predict(args, model, plan_path, cluster, micro_batch):
    out = run([os.path.join(args.bin, "partition-plan"), model, "--plan",
               plan_path, "--cluster", cluster, "--global-batch",
               str(args.batch), "--memory", "closed-form", "--json",
               "--max-micro-batch", str(micro_batch)]).stdout
    ranked = [p for p in json.loads(out)
              if p["micro_batch_size"] == micro_batch
              and p["plan"].get("recompute") is None]
    return ranked[0]


def compile_plans(args, model, work, plans):
    programs = {}
    for name, plan in plans.items():
        tag = name.replace(" ", "_").replace(",", "")
        plan_path = os.path.join(work, tag + ".json")
        with open(plan_path, "w") as f:
            json.dump(plan, f)
        ptp = os.path.join(work, tag + ".ptp")
        run([os.path.join(args.bin, "partition-compile"), model, "--plan",
             plan_path, "-o", ptp])
        programs[name] = (ptp, plan_path, tag)
    return programs


def parameter_case(args, model, work, before):
    """dp2 ZeRO-3 on 2 ranks x 1 thread, the fp32 shards on disk or not:
    the measured overhead against the predicted offload line (the disk as
    calibrated before and after these runs)."""
    plans = {
        "dp2 zero3": {"mesh": {"dp": 2}, "zero": {"stage": 3}},
        "dp2 zero3, parameters nvme": {
            "mesh": {"dp": 2}, "zero": {"stage": 3},
            "offload": {"parameters": "nvme", "path": args.dir}},
    }
    programs = compile_plans(args, model, work, plans)
    times = {name: [] for name in programs}
    for repeat in range(args.repeats):
        for name, (ptp, _, tag) in programs.items():
            metrics = os.path.join(work, f"{tag}.{repeat}.jsonl")
            execute(args.bin, ptp, 1, args.steps, metrics, ranks=2)
            times[name].append(step_ms(metrics, args.warmup))
    after = calibrate(args, os.path.join(work, "cluster-after-dp2.json"))
    cluster = os.path.join(work, "cluster-dp2.json")
    mean_cluster([before, after], cluster)
    predicted = {name: predict(args, model, plan_path, cluster,
                               args.batch // 2)
                 for name, (_, plan_path, _) in programs.items()}
    print(f"dp2 ZeRO-3 on 2 ranks x 1 thread (mpirun), batch {args.batch}: "
          f"median step ms over {args.repeats} interleaved runs of "
          f"{args.steps} steps (first {args.warmup} left out)")
    print("| plan | step ms (min-max) | predicted step ms | predicted "
          "offload ms (gathers, slowdown) |")
    print("|---|---:|---:|---:|")
    for name in programs:
        p = predicted[name]
        b = p["breakdown"]
        print(f"| {name} | {statistics.median(times[name]):.0f} "
              f"({min(times[name]):.0f}-{max(times[name]):.0f}) | "
              f"{1e3 * p['step_s']:.0f} | "
              f"{1e3 * b.get('offload_s', 0):.1f} "
              f"({1e3 * b.get('offload_gather_s', 0):.1f}, "
              f"{1e3 * b.get('offload_slowdown_s', 0):.1f}) |")
    names = list(programs)
    overhead = (statistics.median(times[names[1]]) -
                statistics.median(times[names[0]]))
    offload = predicted[names[1]]
    expected = 1e3 * offload["breakdown"]["offload_s"]
    print(f"parameter offload overhead: measured {overhead:.0f} ms per step, "
          f"predicted {expected:.0f} ms "
          f"({100 * (expected - overhead) / overhead:+.0f}%); "
          f"{offload['offload_read_bytes_per_step'] / 1e6:.0f} MB read and "
          f"{offload['offload_write_bytes_per_step'] / 1e6:.0f} MB written "
          f"per rank per step predicted")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bin", default="build/bin")
    parser.add_argument("--dir", required=True,
                        help="the offload files' directory (a real disk)")
    parser.add_argument("--preset", default="gpt2-124m")
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--batch", type=int, default=2)
    parser.add_argument("--seq-len", type=int, default=32)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--warmup", type=int, default=1,
                        help="steps left out of the median (first touches)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--no-parameters", action="store_true",
                        help="leave out the dp2 ZeRO-3 parameter-offload "
                        "case")
    parser.add_argument("--work", default=None,
                        help="keep the programs, metrics and trace here")
    args = parser.parse_args()
    print("load at start:", run(["uptime"]).stdout.strip())
    os.makedirs(args.dir, exist_ok=True)
    df = run(["df", "-T", args.dir]).stdout.strip().splitlines()[-1].split()
    print(f"offload directory {args.dir}: filesystem {df[1]} ({df[0]})")
    work = args.work or tempfile.mkdtemp(prefix="partition-offload-bench-")
    os.makedirs(work, exist_ok=True)
    model = os.path.join(work, "model.mlir")
    run([os.path.join(args.bin, "partition-gen"), "--preset", args.preset,
         "--layers", str(args.layers), "--batch", str(args.batch),
         "--seq-len", str(args.seq_len), "-o", model])
    plans = {
        "no offload": {"mesh": {"dp": 1}},
        "nvme": {"mesh": {"dp": 1},
                 "offload": {"optimizer": "nvme", "path": args.dir}},
    }
    programs = compile_plans(args, model, work, plans)

    # The machine as the planner sees it, the disk measured in --dir
    # before and after the timed runs (this virtual disk's bandwidth moves
    # by a third between minutes): the prediction takes their mean.
    before = calibrate(args, os.path.join(work, "cluster-before.json"))

    times = {name: [] for name in programs}
    for repeat in range(args.repeats):
        for name, (ptp, _, tag) in programs.items():
            metrics = os.path.join(work, f"{tag}.{repeat}.jsonl")
            execute(args.bin, ptp, args.threads, args.steps, metrics)
            times[name].append(step_ms(metrics, args.warmup))

    after = calibrate(args, os.path.join(work, "cluster-after.json"))
    cluster = os.path.join(work, "cluster.json")
    measured = mean_cluster([before, after], cluster)
    read_bw = measured["disk_read_bandwidth"]
    write_bw = measured["disk_write_bandwidth"]
    slowdown = measured["disk_compute_slowdown"]

    # The planner on the measured cluster.
    predicted = {name: predict(args, model, plan_path, cluster, args.batch)
                 for name, (_, plan_path, _) in programs.items()}

    # One traced run of each: the offload's exposed I/O, and what the
    # kernels lose beside it.
    traces = {}
    for name, (ptp, _, tag) in programs.items():
        traces[name] = os.path.join(work, tag + ".trace.json")
        execute(args.bin, ptp, args.threads, max(args.steps, args.warmup + 1),
                os.path.join(work, tag + ".trace.jsonl"), trace=traces[name])
    trace_path = traces["nvme"]
    exposed, read_bytes, write_bytes, traced = tier_io(trace_path, args.warmup)
    kernels = {name: kernel_seconds(path, args.warmup)
               for name, path in traces.items()}
    io_seconds = read_bytes / read_bw + write_bytes / write_bw

    base = statistics.median(times["no offload"])
    nvme = statistics.median(times["nvme"])
    overhead = nvme - base
    print(f"{args.preset} cut to {args.layers} layers, batch {args.batch}, "
          f"seq {args.seq_len}, fp32, 1 rank x {args.threads} threads: median "
          f"step ms over {args.repeats} interleaved runs of {args.steps} "
          f"steps (first {args.warmup} left out)")
    print("| plan | step ms (min-max) | predicted step ms | predicted "
          "offload ms |")
    print("|---|---:|---:|---:|")
    for name in programs:
        p = predicted[name]
        print(f"| {name} | {statistics.median(times[name]):.0f} "
              f"({min(times[name]):.0f}-{max(times[name]):.0f}) | "
              f"{1e3 * p['step_s']:.0f} | "
              f"{1e3 * p['breakdown'].get('offload_s', 0):.1f} |")
    predicted_overhead = 1e3 * predicted["nvme"]["breakdown"]["offload_s"]
    print(f"disk (--calibrate in {args.dir}, the mean of before and after): "
          f"write {write_bw / 1e9:.2f} GB/s, read {read_bw / 1e9:.2f} GB/s; "
          f"kernels beside its transfers {100 * slowdown:.0f}% slower")
    print(f"overhead: measured {overhead:.0f} ms per step "
          f"({100 * overhead / base:.1f}%), predicted "
          f"{predicted_overhead:.1f} ms "
          f"({100 * (predicted_overhead - overhead) / overhead:+.0f}%; of it "
          f"{1e3 * predicted['nvme']['breakdown'].get('offload_slowdown_s', 0):.1f}"
          f" ms the kernels beside the disk); optimizer update predicted "
          f"{1e3 * predicted['nvme']['breakdown']['optimizer_s']:.0f} ms")
    hidden = 1 - exposed / io_seconds if io_seconds > 0 else 0.0
    print(f"trace ({traced} steps after warm-up): {read_bytes / 1e6:.0f} MB "
          f"read and {write_bytes / 1e6:.0f} MB written per step, "
          f"{1e3 * io_seconds:.0f} ms of I/O at the measured bandwidth; the "
          f"rank spent {1e3 * exposed:.0f} ms per step starting and waiting "
          f"for tier copies: {100 * hidden:.0f}% of the I/O hidden behind "
          f"compute; kernels {1e3 * kernels['no offload']:.0f} ms per step "
          f"without offload, {1e3 * kernels['nvme']:.0f} ms with it (beside "
          f"the I/O)")
    if not args.no_parameters:
        parameter_case(args, model, work, after)
    print("load at end:", run(["uptime"]).stdout.strip())


if __name__ == "__main__":
    main()
