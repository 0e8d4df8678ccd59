#!/usr/bin/env python3
"""CPU training-step benchmark: partition vs PyTorch vs llm.c, same model.

GPT-2 124M (12 layers, 768 wide, 12 heads, vocab 50257, 1024 positions),
batch 4, sequence 64, fp32 (or --precision bf16), 2 threads: milliseconds
per training step
(forward + backward + AdamW), for

  partition  partition-gen -> partition-compile -> partition-run
  pytorch    a faithful GPT-2 in PyTorch (tied wte / lm_head, GELU tanh,
             pre-LN, scaled_dot_product_attention, AdamW foreach), on CPU
  llm.c      karpathy/llm.c's CPU trainer train_gpt2.c, built by hand outside
             this repository and given with --llmc PATH (skipped without);
             this script writes its checkpoint and token files

With --precision bf16, partition compiles a bf16 plan (bf16 compute, fp32
master weights and moments) and PyTorch runs its forward under
torch.autocast("cpu", torch.bfloat16), its mixed precision on CPUs; llm.c
(fp32 only) is skipped.

And OpenBLAS's own sgemm (partition-bench-sgemm) as the GFLOP/s reference,
all in one invocation, one after another. Every system's number is the
median step time after its warm-up steps; FLOPs per step are the model's,
from `partition-opt --xfmr-stats` (6 N_matmul + 12 L C T per token, the
same count for every system). Writes results.json and results.md under
--out and prints the table. See bench/README.md.
"""

import argparse
import datetime
import importlib.util
import json
import os
import pty
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# GPT-2 124M, as the gpt2-124m preset of partition-gen.
GPT2 = dict(layers=12, hidden=768, heads=12, vocab=50257, positions=1024, ffn=3072)


from measure import (Meter, cpu_name, git_state, load, log, run,  # noqa: E402
                     thread_env)


# --- OpenBLAS sgemm ---------------------------------------------------------

def bench_sgemm(args, work, extra_env=None, tag=""):
    """partition-bench-sgemm's JSON: it picks the best kernels this CPU has
    unless OPENBLAS_CORETYPE (in extra_env or ours) says which."""
    out = os.path.join(work, f"sgemm{tag}.json")
    tool = os.path.join(args.build, "bin", "partition-bench-sgemm")
    cmd = [tool, "--threads", str(args.threads), "--repeats", str(args.sgemm_repeats),
           "--tokens", str(args.batch * args.seq_len), "--hidden", str(GPT2["hidden"]),
           "--ffn", str(GPT2["ffn"]), "--vocab", str(GPT2["vocab"]),
           "--layers", str(GPT2["layers"]), "--json", out]
    env = thread_env(args.threads)
    env.update(extra_env or {})
    with Meter() as meter:
        result = run(cmd, env=env)
    sys.stderr.write(result.stdout)
    with open(out) as f:
        data = json.load(f)
    data.update(meter.record())
    data["command"] = " ".join([f"{k}={v}" for k, v in (extra_env or {}).items()] + cmd)
    data["env"] = dict(extra_env or {})
    return data


# --- partition --------------------------------------------------------------

class Partition:
    def __init__(self, args, work, extra_env=None):
        self.args, self.work = args, work
        self.bin = os.path.join(args.build, "bin")
        self.model = os.path.join(work, "gpt2-124m.mlir")
        self.program = os.path.join(work, f"gpt2-124m-{args.precision}.ptp")
        self.extra_env = dict(extra_env or {})
        self.name = "partition" + (
            " [" + " ".join(f"{k}={v}" for k, v in self.extra_env.items()) + "]"
            if self.extra_env else "")

    def prepare(self):
        """Generates and compiles the model; returns the FLOPs per step."""
        a = self.args
        run([os.path.join(self.bin, "partition-gen"), "--preset", "gpt2-124m",
             "--batch", str(a.batch), "--seq-len", str(a.seq_len), "-o", self.model])
        # The training step's FLOPs, predicted from the forward function (3x).
        text = run([os.path.join(self.bin, "partition-opt"), self.model, "--xfmr-stats",
                    "-o", os.devnull]).stdout
        self.stats = {k: int(v) for k, v in re.findall(r"^(\w+): (\d+)$", text, re.M)}
        plan = []
        if a.precision != "fp32":
            plan_path = os.path.join(self.work, f"plan-{a.precision}.json")
            with open(plan_path, "w") as f:
                json.dump({"precision": a.precision}, f)
            plan = ["--plan", plan_path]
        result = run([os.path.join(self.bin, "partition-compile"), self.model,
                      "-o", self.program, "--memory-report"] + plan)
        self.memory_report = (result.stdout + result.stderr).strip().splitlines()
        return self.stats["flops_per_step"]

    def env(self):
        env = thread_env(self.args.threads)
        env.update(self.extra_env)
        return env

    def command(self, steps, extra):
        return [os.path.join(self.bin, "partition-run"), self.program, "--steps", str(steps),
                "--eval-every", "0", "--seed", "1337"] + extra

    def describe(self):
        cmd = self.command(self.args.warmup + self.args.steps, ["--metrics-out", "M.jsonl"])
        return " ".join([f"{k}={v}" for k, v in self.extra_env.items()] + cmd)

    def measure(self):
        a = self.args
        metrics = os.path.join(self.work, "partition-metrics.jsonl")
        cmd = self.command(a.warmup + a.steps, ["--metrics-out", metrics])
        with Meter() as meter:
            run(cmd, env=self.env())
        times, cpu_times, losses, summary = [], [], [], {}
        with open(metrics) as f:
            for line in f:
                record = json.loads(line)
                if record.get("summary"):
                    summary = record
                elif "step_ms" in record:
                    times.append(record["step_ms"])
                    if "step_cpu_ms" in record:
                        cpu_times.append(record["step_cpu_ms"])
                    losses.append(record["loss"])
        return {"times": times, "cpu_times": cpu_times, "warmup": a.warmup,
                "losses": losses,
                "peak_rss_bytes": summary.get("peak_rss_bytes"),
                "blas_core": summary.get("blas_core"),
                "blas_core_source": summary.get("blas_core_source"),
                "blas_core_library": summary.get("blas_core_library"),
                "bf16_gemm": summary.get("bf16_gemm"),
                **meter.record()}

    def profile(self):
        a = self.args
        env = self.env()
        env["PARTITION_PROFILE"] = "1"
        env["PARTITION_PROFILE_SKIP"] = str(a.warmup)
        cmd = self.command(a.warmup + a.profile_steps, ["--quiet"])
        with Meter() as meter:
            result = run(cmd, env=env)
        shown = [f"{k}={v}" for k, v in self.extra_env.items()] + [
            "PARTITION_PROFILE=1", f"PARTITION_PROFILE_SKIP={a.warmup}"] + cmd
        return {"command": " ".join(shown), "text": result.stderr.strip(), **meter.record()}


# --- PyTorch ----------------------------------------------------------------

def torch_worker(args):
    """Runs in its own process (--torch-worker): prints one JSON line."""
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    torch.set_num_threads(args.threads)
    torch.manual_seed(1337)
    L, C, H, V, P = (GPT2[k] for k in ("layers", "hidden", "heads", "vocab", "positions"))
    B, T = args.batch, args.seq_len

    class Attention(nn.Module):
        def __init__(self):
            super().__init__()
            self.c_attn = nn.Linear(C, 3 * C)
            self.c_proj = nn.Linear(C, C)

        def forward(self, x):
            q, k, v = self.c_attn(x).split(C, dim=2)
            q, k, v = (t.view(B, T, H, C // H).transpose(1, 2) for t in (q, k, v))
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            return self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln_1 = nn.LayerNorm(C)
            self.attn = Attention()
            self.ln_2 = nn.LayerNorm(C)
            self.c_fc = nn.Linear(C, 4 * C)
            self.c_proj = nn.Linear(4 * C, C)

        def forward(self, x):
            x = x + self.attn(self.ln_1(x))
            return x + self.c_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte = nn.Embedding(V, C)
            self.wpe = nn.Embedding(P, C)
            self.h = nn.ModuleList(Block() for _ in range(L))
            self.ln_f = nn.LayerNorm(C)
            for name, p in self.named_parameters():
                if p.dim() == 2:
                    std = 0.02 / (2 * L) ** 0.5 if name.endswith("c_proj.weight") else 0.02
                    nn.init.normal_(p, 0.0, std)
                elif name.endswith(".bias"):
                    nn.init.zeros_(p)

        def forward(self, idx, targets):
            x = self.wte(idx) + self.wpe(torch.arange(T))
            for block in self.h:
                x = block(x)
            logits = F.linear(self.ln_f(x), self.wte.weight)  # tied lm_head
            return F.cross_entropy(logits.view(-1, V), targets.view(-1))

    model = GPT()
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    optimizer = torch.optim.AdamW(
        [{"params": decay, "weight_decay": 0.1},
         {"params": no_decay, "weight_decay": 0.0}],
        lr=1e-4, betas=(0.9, 0.95), eps=1e-8, foreach=True, fused=False)
    generator = torch.Generator().manual_seed(0)
    data = torch.randint(0, V, (args.warmup + args.steps, B, T + 1), generator=generator)
    times, cpu_times, losses = [], [], []
    model.train()
    # bf16: PyTorch's CPU mixed precision, fp32 parameters and optimizer.
    autocast = torch.autocast("cpu", dtype=torch.bfloat16,
                              enabled=args.precision == "bf16")
    for step in range(args.warmup + args.steps):
        x, y = data[step, :, :-1].contiguous(), data[step, :, 1:].contiguous()
        start, cpu_start = time.perf_counter(), time.process_time()
        with autocast:
            loss = model(x, y)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        times.append(1e3 * (time.perf_counter() - start))
        cpu_times.append(1e3 * (time.process_time() - cpu_start))
        losses.append(loss.item())
        log(f"pytorch step {step + 1}: loss {losses[-1]:.4f} ({times[-1]:.1f} ms)")
    print(json.dumps({
        "times": times, "cpu_times": cpu_times, "losses": losses,
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "parameters": sum(p.numel() for p in model.parameters()),
        "config": torch.__config__.parallel_info().strip().splitlines()[:8],
    }))


class Torch:
    name = "pytorch"

    def __init__(self, args):
        self.args = args

    def command(self):
        a = self.args
        return [sys.executable, os.path.abspath(__file__), "--torch-worker",
                "--threads", str(a.threads), "--batch", str(a.batch),
                "--seq-len", str(a.seq_len), "--steps", str(a.steps),
                "--warmup", str(a.warmup), "--precision", a.precision]

    def describe(self):
        return " ".join(self.command())

    def measure(self):
        with Meter() as meter:
            result = subprocess.run(self.command(), env=thread_env(self.args.threads),
                                    text=True, stdout=subprocess.PIPE)
        if result.returncode != 0:
            raise SystemExit("[cpu_step] the PyTorch run failed")
        data = json.loads(result.stdout.strip().splitlines()[-1])
        self.info = {k: data[k] for k in ("torch", "threads", "parameters", "config")}
        return {"times": data["times"], "cpu_times": data.get("cpu_times", []),
                "warmup": self.args.warmup, "losses": data["losses"],
                **meter.record()}


# --- llm.c ------------------------------------------------------------------

LLMC_MODEL_MAGIC, LLMC_MODEL_VERSION = 20240326, 3
LLMC_DATA_MAGIC, LLMC_DATA_VERSION = 20240520, 1


def write_llmc_checkpoint(path, seed=1337):
    """llm.c's fp32 checkpoint (gpt2_build_from_checkpoint): 256 int32 of
    header, then every parameter tensor in its order, wte padded to Vp rows."""
    import numpy as np
    L, C, V, P = GPT2["layers"], GPT2["hidden"], GPT2["vocab"], GPT2["positions"]
    NH = GPT2["heads"]
    Vp = (V + 127) // 128 * 128  # 50304 for GPT-2, as llm.c pads it
    header = np.zeros(256, dtype=np.int32)
    header[:8] = [LLMC_MODEL_MAGIC, LLMC_MODEL_VERSION, P, V, L, NH, C, Vp]
    rng = np.random.default_rng(seed)
    proj_std = 0.02 / (2 * L) ** 0.5

    def normal(shape, std=0.02):
        return (rng.standard_normal(shape, dtype=np.float32) * np.float32(std))

    wte = normal((Vp, C))
    wte[V:] = 0.0  # llm.c's padding rows
    tensors = [
        wte,                                  # wte  (Vp, C)
        normal((P, C)),                       # wpe  (maxT, C)
        np.ones((L, C), np.float32),          # ln1w
        np.zeros((L, C), np.float32),         # ln1b
        normal((L, 3 * C, C)),                # qkvw
        np.zeros((L, 3 * C), np.float32),     # qkvb
        normal((L, C, C), proj_std),          # attprojw
        np.zeros((L, C), np.float32),         # attprojb
        np.ones((L, C), np.float32),          # ln2w
        np.zeros((L, C), np.float32),         # ln2b
        normal((L, 4 * C, C)),                # fcw
        np.zeros((L, 4 * C), np.float32),     # fcb
        normal((L, C, 4 * C), proj_std),      # fcprojw
        np.zeros((L, C), np.float32),         # fcprojb
        np.ones(C, np.float32),               # lnfw
        np.zeros(C, np.float32),              # lnfb
    ]
    with open(path, "wb") as f:
        f.write(header.tobytes())
        for t in tensors:
            f.write(np.ascontiguousarray(t, dtype=np.float32).tobytes())
    return sum(t.size for t in tensors), Vp


def write_llmc_tokens(path, count, vocab, seed):
    """An llm.c token shard: 256 int32 header [magic, version, count], then
    `count` uint16 token ids."""
    import numpy as np
    header = np.zeros(256, dtype=np.int32)
    header[:3] = [LLMC_DATA_MAGIC, LLMC_DATA_VERSION, count]
    tokens = np.random.default_rng(seed).integers(0, vocab, count, dtype=np.uint16)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(header.tobytes())
        f.write(tokens.tobytes())


def pty_lines(fd):
    """The lines a child writes to the pseudo-terminal `fd`, until it exits."""
    pending = b""
    while True:
        try:
            chunk = os.read(fd, 4096)
        except OSError:  # EIO: the child closed the terminal
            chunk = b""
        if not chunk:
            break
        pending += chunk
        while b"\n" in pending:
            line, pending = pending.split(b"\n", 1)
            yield line.decode(errors="replace").rstrip("\r")
    if pending:
        yield pending.decode(errors="replace")


STEP_LINE = re.compile(r"^step (\d+): train loss ([-+0-9.naif]+) \(took ([0-9.]+) ms\)")


class LlmC:
    """train_gpt2.c's main() fixes B = 4, T = 64 and trains steps 0..40, with
    a validation pass (5 forwards) every 10 steps and sampling (63 forwards)
    at steps 20 and 40, outside its timed region; it is stopped once it has
    printed the steps wanted (at most 20, so before its first sampling)."""
    name = "llm.c"

    def __init__(self, args):
        self.args = args
        self.binary = os.path.abspath(args.llmc)
        self.steps = min(args.warmup_llmc + args.steps, 20)
        self.work = None

    def prepare(self):
        if not os.access(self.binary, os.X_OK):
            raise SystemExit(f"[cpu_step] --llmc {self.args.llmc}: not an executable")
        a = self.args
        self.work = tempfile.mkdtemp(prefix="cpu_step_llmc_")
        log(f"writing llm.c's checkpoint and tokens in {self.work}")
        count, self.padded_vocab = write_llmc_checkpoint(
            os.path.join(self.work, "gpt2_124M.bin"))
        self.checkpoint_floats = int(count)
        base = os.path.join(self.work, "dev", "data", "tinyshakespeare")
        tokens = a.batch * a.seq_len
        write_llmc_tokens(os.path.join(base, "tiny_shakespeare_train.bin"),
                          64 * tokens + 1, GPT2["vocab"], 1)
        write_llmc_tokens(os.path.join(base, "tiny_shakespeare_val.bin"),
                          8 * tokens + 1, GPT2["vocab"], 2)

    def cleanup(self):
        if self.work:
            shutil.rmtree(self.work, ignore_errors=True)

    def describe(self):
        return (f"(cd TMP && OMP_NUM_THREADS={self.args.threads} {self.binary})"
                f"  # stopped after {self.steps} steps")

    def measure(self):
        log(f"$ (cd {self.work} && {self.binary})  # stopped after {self.steps} steps")
        # On a terminal, so that its stdio flushes every line (into a pipe it
        # would hold them back until its sampling at step 20 flushes).
        master, slave = pty.openpty()
        with Meter() as meter:
            process = subprocess.Popen([self.binary], cwd=self.work,
                                       env=thread_env(self.args.threads),
                                       stdin=subprocess.DEVNULL, stdout=slave,
                                       stderr=slave, close_fds=True)
            os.close(slave)
            times, losses, lines = [], [], []
            for line in pty_lines(master):
                lines.append(line)
                match = STEP_LINE.match(line)
                if match:
                    losses.append(float(match.group(2)))
                    times.append(float(match.group(3)))
                    log(f"llm.c {line.strip()}")
                    if len(times) >= self.steps:
                        break
            process.terminate()
            process.wait()
        os.close(master)
        if len(times) < self.steps:
            sys.stderr.write("\n".join(lines[-20:]) + "\n")
            raise SystemExit(f"[cpu_step] llm.c printed {len(times)} of {self.steps} steps")
        self.header = [l for l in lines if ":" in l and not l.startswith("step")][:8]
        return {"times": times, "warmup": self.args.warmup_llmc, "losses": losses,
                **meter.record()}


# --- report -----------------------------------------------------------------

def summarise(system, rounds, flops, peak):
    measured = [t for r in rounds for t in r["times"][r["warmup"]:]]
    if not measured:
        raise SystemExit(f"[cpu_step] {system.name}: no step left after warm-up")
    median = statistics.median(measured)
    gflops = flops / (median / 1e3) / 1e9
    # partition's rows: the OpenBLAS kernels its metrics summary names.
    cores = sorted({(r.get("blas_core"), r.get("blas_core_source"),
                     r.get("blas_core_library")) for r in rounds if r.get("blas_core")})
    # Process CPU time per step (all threads): the work, where wall time on
    # a shared machine also measures the others' load.
    cpu_measured = [t for r in rounds for t in r.get("cpu_times", [])[r["warmup"]:]]
    kernels = ", ".join(core + ("" if source == "library" else
                                f" ({source}" + (f" from {lib})" if lib else ")"))
                        for core, source, lib in cores) or "-"
    bf16_engines = sorted({r["bf16_gemm"] for r in rounds if r.get("bf16_gemm")})
    if bf16_engines:
        kernels += "; bf16 GEMMs " + ", ".join(bf16_engines)
    return {
        "system": system.name, "command": system.describe(), "kernels": kernels,
        "cpu_median_ms": statistics.median(cpu_measured) if cpu_measured else None,
        "median_ms": median, "min_ms": min(measured), "max_ms": max(measured),
        "measured_steps": len(measured),
        "round_medians_ms": [round(statistics.median(r["times"][r["warmup"]:]), 1)
                             for r in rounds],
        "gflops": gflops, "percent_of_sgemm_peak": 100.0 * gflops / peak if peak else None,
        "others_cores": round(statistics.mean(r["others_cores"] for r in rounds), 3),
        "rounds": rounds,
    }


def report(args, sgemm, rows, flops, stats, profiles, extra, sgemm_variants=()):
    peak = sgemm["peak_gflops"] if sgemm else None
    base = rows[0]
    for r in rows:
        r["time_vs_partition"] = r["median_ms"] / base["median_ms"]
    lines = [
        f"GPT-2 124M, batch {args.batch}, seq {args.seq_len}, {args.precision}, "
        f"{args.threads} threads: "
        f"{flops / 1e9:.2f} GFLOP per step ({stats.get('tokens_per_step')} tokens, "
        f"partition-opt --xfmr-stats); median over {args.rounds} round(s) of "
        f"{args.steps} steps after warm-up",
        "",
        "| system | OpenBLAS kernels | ms/step (median) | min | max | GFLOP/s | "
        "% of sgemm peak | time / partition's | CPU ms/step (median, all threads) | "
        "others' CPU during the run (cores) |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        pct = f"{r['percent_of_sgemm_peak']:.1f}%" if peak else "-"
        cpu = f"{r['cpu_median_ms']:.1f}" if r.get("cpu_median_ms") else "-"
        lines.append(f"| {r['system']} | {r['kernels']} | {r['median_ms']:.1f} | "
                     f"{r['min_ms']:.1f} | {r['max_ms']:.1f} | {r['gflops']:.1f} | {pct} | "
                     f"{r['time_vs_partition']:.2f}x | {cpu} | {r['others_cores']:.2f} |")

    def sgemm_kernels(s):
        source = s.get("core_source", "?")
        return s["core"] + ("" if source == "library" else f" ({source}"
                            + (f" from {s['core_library']})" if s.get("core_library") else ")"))

    def row(*cells):  # one table row, padded to the 10 columns
        cells = list(cells) + [""] * (10 - len(cells))
        return "| " + " | ".join(cells) + " |"

    def per_cpu_second(s):
        value = s.get("peak_gflops_per_cpu_second")
        return f"peak {value:.1f} GFLOP per CPU-s" if value else ""

    for s, label in ([(sgemm, "")] if sgemm else []) + [
            (v, " [" + " ".join(f"{k}={x}" for k, x in v["env"].items()) + "]")
            for v in sgemm_variants]:
        lines.append(row(f"OpenBLAS sgemm, best square (the peak){label}", sgemm_kernels(s),
                         "", "", "", f"{s['peak_gflops']:.1f}",
                         f"{100 * s['peak_gflops'] / peak:.1f}%", "", per_cpu_second(s),
                         f"{s['others_cores']:.2f}"))
        lines.append(row(f"OpenBLAS sgemm, this step's GEMMs at their best{label}",
                         sgemm_kernels(s), f"{s['model_gemm_ms']:.1f} (GEMMs only)", "", "",
                         f"{s['model_gemm_gflops']:.1f}",
                         f"{100 * s['model_gemm_gflops'] / peak:.1f}%"))
    lines.append("")
    checks = []
    by_name = {r["system"]: r for r in rows}
    if "llm.c" in by_name:
        v = by_name["llm.c"]["time_vs_partition"]
        checks.append(("at least 2x faster than llm.c", v >= 2.0, f"{v:.2f}x"))
    if "pytorch" in by_name:
        v = by_name["pytorch"]["time_vs_partition"]
        checks.append(("faster than PyTorch", v > 1.0, f"{v:.2f}x"))
    if peak:
        v = base["percent_of_sgemm_peak"]
        checks.append(("a step at >= 50% of the sgemm peak", v >= 50.0, f"{v:.1f}%"))
    for name, ok, value in checks:
        lines.append(f"- target {name}: {'met' if ok else 'NOT met'} ({value})")
    lines.append("")
    lines.append(f"Machine: {cpu_name()}, {os.cpu_count()} CPUs; "
                 + (f"{sgemm['openblas']} (core {sgemm['core']}); " if sgemm else "")
                 + f"OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE', '(unset)')}; "
                 + f"partition {git_state()}"
                 + (f"; torch {extra['torch']['torch']}" if extra.get("torch") else ""))
    table = "\n".join(lines)
    command = " ".join(["python3"] + [shlex.quote(a) for a in sys.argv])
    result = {
        "date": datetime.datetime.now().isoformat(timespec="seconds"),
        "command": command,
        "config": {"model": "gpt2-124m", "batch": args.batch, "seq_len": args.seq_len,
                   "threads": args.threads, "steps": args.steps, "warmup": args.warmup,
                   "warmup_llmc": args.warmup_llmc, "rounds": args.rounds,
                   "dtype": args.precision, **GPT2},
        "flops_per_step": flops, "xfmr_stats": stats,
        "machine": {"cpu": cpu_name(), "cpus": os.cpu_count(),
                    "openblas_coretype": os.environ.get("OPENBLAS_CORETYPE")},
        "partition_git": git_state(),
        "sgemm": sgemm, "sgemm_variants": list(sgemm_variants), "systems": rows,
        "checks": [{"target": n, "met": ok, "value": v} for n, ok, v in checks],
        **extra,
    }
    if profiles:
        result["partition_profiles"] = profiles
    with open(os.path.join(args.out, "results.json"), "w") as f:
        json.dump(result, f, indent=2)
    with open(os.path.join(args.out, "results.md"), "w") as f:
        f.write(table + "\n\nCommand: `" + command + "`\n")
        for profile in profiles:
            f.write("\npartition's profile (`" + profile["command"] + "`; others' CPU "
                    f"{profile['others_cores']:.2f} cores):\n\n```\n"
                    + profile["text"] + "\n```\n")
    if profiles:
        with open(os.path.join(args.out, "profile.txt"), "w") as f:
            for profile in profiles:
                f.write(profile["command"] + "\n" + profile["text"] + "\n\n")
    print(table)
    for profile in profiles:
        print("\n" + profile["command"] + "\n" + profile["text"])


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--build", default=os.path.join(ROOT, "build"),
                        help="partition's build directory (bin/ inside)")
    parser.add_argument("--out", default=None,
                        help="results directory (default BUILD/bench/cpu_step)")
    parser.add_argument("--llmc", default=None,
                        help="path of llm.c's train_gpt2 binary (skipped without)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--seq-len", type=int, default=64)
    parser.add_argument("--precision", choices=["fp32", "bf16"], default="fp32",
                        help="bf16: partition's bf16 plan against PyTorch's autocast")
    parser.add_argument("--steps", type=int, default=5, help="measured steps per round")
    parser.add_argument("--warmup", type=int, default=2,
                        help="warm-up steps of partition and PyTorch per round")
    parser.add_argument("--warmup-llmc", type=int, default=1,
                        help="warm-up steps of llm.c per round (its step 0 allocates)")
    parser.add_argument("--rounds", type=int, default=1,
                        help="run every system this many times, in turn (a shared "
                             "machine's bursts then hit them alike); the median is "
                             "over all rounds' measured steps")
    parser.add_argument("--sgemm-repeats", type=int, default=5)
    parser.add_argument("--no-sgemm", action="store_true")
    parser.add_argument("--no-torch", action="store_true")
    parser.add_argument("--profile", action="store_true",
                        help="then run partition (and its --partition-env variant) once "
                             "more with PARTITION_PROFILE=1")
    parser.add_argument("--profile-steps", type=int, default=3)
    parser.add_argument("--partition-env", action="append", metavar="'KEY=VALUE ...'",
                        help="also time partition with these environment variables, "
                             "as one more row (repeatable: one row each)")
    parser.add_argument("--sgemm-variants", action="store_true",
                        help="also run partition-bench-sgemm with each --partition-env "
                             "variant's environment (e.g. another OPENBLAS_CORETYPE)")
    parser.add_argument("--torch-worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.torch_worker:
        torch_worker(args)
        return
    args.build = os.path.abspath(args.build)
    args.out = os.path.abspath(args.out or os.path.join(args.build, "bench", "cpu_step"))
    work = os.path.join(args.out, "work")
    os.makedirs(work, exist_ok=True)
    log(f"load average {load()}; results in {args.out}")

    sgemm = None if args.no_sgemm else bench_sgemm(args, work)
    sgemm_variants = []
    if sgemm and args.sgemm_variants:
        for i, variables in enumerate(args.partition_env or []):
            extra_env = dict(item.split("=", 1) for item in shlex.split(variables))
            sgemm_variants.append(bench_sgemm(args, work, extra_env, f"-{i + 1}"))
    partition = Partition(args, work)
    flops = partition.prepare()
    systems = [partition]
    for variables in args.partition_env or []:
        extra_env = dict(item.split("=", 1) for item in shlex.split(variables))
        variant = Partition(args, work, extra_env)
        variant.stats, variant.memory_report = partition.stats, partition.memory_report
        systems.append(variant)
    torch_system = None
    if not args.no_torch:
        if importlib.util.find_spec("torch") is None:
            log("PyTorch is not installed (pip install torch): skipping it")
        else:
            torch_system = Torch(args)
            systems.append(torch_system)
    llmc = None
    if args.llmc:
        if args.precision != "fp32":
            log("llm.c's trainer is fp32 only: skipping it")
        elif (args.batch, args.seq_len) != (4, 64):
            log("llm.c's trainer is fixed at batch 4, sequence 64: skipping it")
        else:
            llmc = LlmC(args)
            llmc.prepare()
            systems.append(llmc)
    else:
        log("no --llmc PATH: skipping llm.c")
    try:
        rounds = {s.name: [] for s in systems}
        for r in range(args.rounds):
            for system in systems:
                result = system.measure()
                rounds[system.name].append(result)
                measured = result["times"][result["warmup"]:]
                log(f"round {r + 1}/{args.rounds} {system.name}: "
                    f"{statistics.median(measured):.1f} ms/step "
                    f"(others' CPU {result['others_cores']:.2f} cores)")
    finally:
        if llmc:
            llmc.cleanup()
    profiles = []
    if args.profile:
        profiles = [s.profile() for s in systems if isinstance(s, Partition)]
    peak = sgemm["peak_gflops"] if sgemm else None
    rows = [summarise(s, rounds[s.name], flops, peak) for s in systems]
    extra = {"partition_memory_report": partition.memory_report}
    if torch_system:
        extra["torch"] = torch_system.info
    if llmc:
        extra["llmc"] = {"header": llmc.header, "checkpoint_floats": llmc.checkpoint_floats,
                         "padded_vocab": llmc.padded_vocab}
    report(args, sgemm, rows, flops, partition.stats, profiles, extra, sgemm_variants)


if __name__ == "__main__":
    main()
