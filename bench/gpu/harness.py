#!/usr/bin/env python3
"""The harness of bench/gpu-check.sh (read that script's header first).

  harness.py gpu-test-targets --build BUILD
      The build targets of the binaries that the gpu-labelled ctest tests run.
  harness.py prepare --build BUILD --src SRC --dir DIR [--no-size-limit]
      Collects what a bare GPU machine needs into DIR/payload.tar.xz.
  harness.py run --dir DIR --out OUT --src SRC
      Unpacks it, runs the tests and the benchmarks, writes OUT.

Standard library only: the GPU machine has Python but nothing of this
project's build.
"""

import argparse
import glob
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tarfile
import time

CARRY_LIMIT = 64 << 20

# Libraries a GPU machine provides (its driver, CUDA toolkit or the NVIDIA
# wheels of PyTorch), or that must come from its own system: never carried.
SYSTEM_LIBRARIES = re.compile(
    r"^(linux-vdso|ld-linux|libc\.so|libm\.so|libpthread|libdl\.so|librt\.so|"
    r"libcuda\.so|libcudart|libcublas|libcublasLt|libnccl|libnvidia|"
    r"libnvJitLink|libnvrtc)")

# Peak dense throughput (FLOP/s) by GPU: bf16 tensor cores, TF32 tensor
# cores, plain fp32 (CUDA cores).
PEAKS = [
    ("H200", {"bf16": 989.4e12, "tf32": 494.7e12, "fp32": 66.9e12}),
    ("H100", {"bf16": 989.4e12, "tf32": 494.7e12, "fp32": 66.9e12}),
    ("A100", {"bf16": 312e12, "tf32": 156e12, "fp32": 19.5e12}),
]
DEFAULT_PEAK = ("H100 SXM (assumed)", PEAKS[1][1])

# llm.c-like batches (train_gpt2cu: -b 4 -t 1024 by default; its 124M runs
# use up to 16): the first that fits BENCH_BUDGET_GIB is used.
MODELS = {
    "gpt2-124m": {"batches": [16, 8, 4, 2, 1], "llmc": "d12"},
    "gpt2-1.5b": {"batches": [8, 4, 2, 1], "llmc": "d48"},
}
SEQ = 1024
# Models also timed with "offload": {"optimizer": "host"} (AdamW's state in
# pinned host memory, the update on the CPU, then on the GPU), at the same
# batch, against the step without offload.
OFFLOAD_MODELS = ("gpt2-124m",)


def log(message):
    print(message, file=sys.stderr, flush=True)


def run(command, timeout=None, env=None, cwd=None):
    try:
        result = subprocess.run(command, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True,
                                timeout=timeout, env=env, cwd=cwd)
        return result.returncode, result.stdout
    except subprocess.TimeoutExpired as error:
        out = error.stdout or ""
        if isinstance(out, bytes):
            out = out.decode(errors="replace")
        return 124, out + f"\n(timed out after {timeout} s)"
    except OSError as error:
        return 127, str(error)


def ctest_tests(build):
    code, out = run(["ctest", "--test-dir", build, "-L", "gpu",
                     "--show-only=json-v1"])
    if code:
        sys.exit(f"ctest --show-only failed:\n{out}")
    tests = []
    for test in json.loads(out).get("tests", []):
        props = {p["name"]: p["value"] for p in test.get("properties", [])}
        tests.append({"name": test["name"], "command": test.get("command", []),
                      "environment": props.get("ENVIRONMENT", []),
                      "skip": props.get("SKIP_REGULAR_EXPRESSION", []),
                      "timeout": props.get("TIMEOUT", 600),
                      "workdir": props.get("WORKING_DIRECTORY")})
    return tests


def gpu_test_targets(args):
    code, out = run(["ninja", "-C", args.build, "-t", "targets", "all"])
    known = set()
    for line in out.splitlines():
        name = line.split(":")[0].strip()
        known.add(name)
    # Tests whose binary is not built yet have no command in the JSON, only
    # ctest's "Could not find executable PATH" on stderr.
    code, listing = run(["ctest", "--test-dir", args.build, "-L", "gpu", "-N"])
    paths = re.findall(r"Could not find executable (\S+)", listing)
    for test in ctest_tests(args.build):
        paths += [arg.split("=", 1)[-1] for arg in test["command"]]
    targets = set()
    for path in paths:
        base = os.path.basename(path)
        if base in known and base.startswith("partition"):
            targets.add(base)
    print(" ".join(sorted(targets)))


#===------------------------------------------------------------------------===#
# prepare
#===------------------------------------------------------------------------===#


def shared_libraries(binary):
    """{soname: path} of what `binary` loads, as ldd resolves it."""
    code, out = run(["ldd", binary])
    libraries = {}
    for line in out.splitlines():
        match = re.match(r"\s*(\S+)\s+=>\s+(\S+)", line)
        if match and os.path.exists(match.group(2)):
            libraries[match.group(1)] = match.group(2)
    return libraries


def max_glibc(binary):
    code, out = run(["objdump", "-T", binary])
    versions = re.findall(r"GLIBC_(\d+)\.(\d+)", out)
    return max(((int(a), int(b)) for a, b in versions), default=(0, 0))


def compile_program(src_bin, workdir, model, precision, batch, microbatches=1,
                    plan_extra=None, suffix=""):
    """Compiles model at batch; returns (ptp path, meta) or (None, error).
    plan_extra: more of the plan than its precision (named by suffix)."""
    stem = f"{model}-{precision}{suffix}-b{batch}"
    mlir = os.path.join(workdir, f"{model}-b{batch}.mlir")
    if not os.path.exists(mlir):
        code, out = run([os.path.join(src_bin, "partition-gen"), "--preset",
                         model, "--batch", str(batch), "--seq-len", str(SEQ),
                         "-o", mlir])
        if code:
            return None, out.strip()
    plan = os.path.join(workdir, f"plan-{precision}{suffix}.json")
    with open(plan, "w") as f:
        json.dump(dict(plan_extra or {}, precision=precision), f)
    ptp = os.path.join(workdir, stem + ".ptp")
    log(f"prepare: compiling {stem}")
    code, out = run([os.path.join(src_bin, "partition-compile"), mlir, "-o",
                     ptp, "--plan", plan, "--memory-report"], timeout=3600)
    if code:
        return None, out.strip().splitlines()[-1] if out.strip() else "failed"
    arena = re.search(r"arena_peak (\d+)", out)
    code, stats = run([os.path.join(src_bin, "partition-opt"), mlir,
                       "--xfmr-stats", "-o", os.devnull])
    meta = {"model": model, "precision": precision, "batch": batch,
            "seq": SEQ, "arena_bytes": int(arena.group(1)) if arena else 0}
    for key in ("parameters", "tokens_per_step", "flops_per_step"):
        match = re.search(rf"{key}: (\d+)", stats)
        if match:
            meta[key] = int(match.group(1))
    return ptp, meta


def prepare(args):
    build = os.path.abspath(args.build)
    src = os.path.abspath(args.src)
    out_dir = os.path.abspath(args.dir)
    stage = os.path.join(out_dir, "payload")
    shutil.rmtree(stage, ignore_errors=True)
    for sub in ("bin", "lib", "programs", "src"):
        os.makedirs(os.path.join(stage, sub))
    bin_dir = os.path.join(build, "bin")

    # Tests: every gpu-labelled ctest test, paths made relative to the
    # payload ({DIR}) and the output ({OUT}).
    manifest = {"tests": [], "programs": [], "notes": []}
    binaries = {os.path.join(bin_dir, "partition-run"): "partition-run"}

    def translate(arg, test_name):
        define = re.match(r"^(-D\w+=)(/.*)$", arg)
        if define:
            return define.group(1) + translate(define.group(2), test_name)
        if arg == bin_dir:
            return "{DIR}/bin"
        if os.path.isabs(arg) and arg.startswith(build + "/"):
            if os.path.isfile(arg) and os.access(arg, os.X_OK):
                name = os.path.basename(arg)
                binaries[arg] = name
                return "{DIR}/bin/" + name
            return "{OUT}/work/" + test_name
        if os.path.isabs(arg) and arg.startswith(src + "/"):
            rel = os.path.relpath(arg, src)
            target = os.path.join(stage, "src", rel)
            os.makedirs(os.path.dirname(target), exist_ok=True)
            shutil.copy2(arg, target)
            return "{DIR}/src/" + rel
        return arg

    for test in ctest_tests(build):
        command = list(test["command"])
        if not command:
            continue
        head = os.path.basename(command[0])
        translated = []
        if re.match(r"python", head):
            translated.append("{PYTHON}")
        elif re.match(r"mpi(exec|run)", head):
            translated.append("{MPIEXEC}")
        elif head == "cmake":
            translated.append("{CMAKE}")
        else:
            translated.append(translate(command[0], test["name"]))
        translated += [translate(a, test["name"]) for a in command[1:]]
        if any(a.endswith("cuda_e2e.py") for a in translated):
            translated += ["--ptp-dir", "{DIR}/programs"]
        manifest["tests"].append({
            "name": test["name"], "command": translated,
            "environment": test["environment"], "skip": test["skip"],
            "timeout": test["timeout"]})

    # Programs: gpt2-tiny (fp32, bf16) and mixtral-tiny (fp32, and with
    # expert parallelism over 2 ranks: its counted all-to-alls) for the
    # end-to-end test, the benchmark models at the largest llm.c-like batch
    # whose planned arena fits the budget.
    workdir = os.path.join(out_dir, "compile")
    os.makedirs(workdir, exist_ok=True)
    ep2 = {"mesh": {"dp": 2}, "moe": {"expert_parallel": 2}}
    # The offload programs of the end-to-end test, with its plans.
    sys.path.insert(0, os.path.join(src, "unittests", "runtime", "cuda"))
    from cuda_e2e import OFFLOAD_PLANS
    for model, precision, extra, suffix in (
            ("gpt2-tiny", "fp32", None, ""), ("gpt2-tiny", "bf16", None, ""),
            ("mixtral-tiny", "fp32", None, ""),
            ("mixtral-tiny", "fp32", ep2, "-ep2"),
            *(("gpt2-tiny", "fp32", plan, f"-{tag}")
              for tag, plan in OFFLOAD_PLANS.items())):
        ptp, meta = compile_program(bin_dir, workdir, model, precision, 4,
                                    plan_extra=extra, suffix=suffix)
        if ptp:
            shutil.copy2(ptp, os.path.join(stage, "programs",
                                           f"{model}-{precision}{suffix}.ptp"))
        else:
            manifest["notes"].append(f"{model} {precision}{suffix}: {meta}")
    budget = float(os.environ.get("BENCH_BUDGET_GIB", "120")) * (1 << 30)
    models = os.environ.get("BENCH_MODELS", "gpt2-124m gpt2-1.5b").split()
    for model in models:
        for precision in ("fp32", "bf16"):
            chosen = None
            for batch in MODELS[model]["batches"]:
                ptp, meta = compile_program(bin_dir, workdir, model, precision,
                                            batch)
                if not ptp:
                    manifest["notes"].append(
                        f"{model} {precision} B={batch}: does not compile: "
                        f"{meta}")
                    break
                if meta["arena_bytes"] <= budget:
                    chosen = (ptp, meta)
                    break
                manifest["notes"].append(
                    f"{model} {precision} B={batch}: arena "
                    f"{meta['arena_bytes'] / (1 << 30):.1f} GiB exceeds the "
                    f"{budget / (1 << 30):.0f} GiB budget; halving the batch")
            if chosen:
                name = os.path.basename(chosen[0])
                shutil.copy2(chosen[0], os.path.join(stage, "programs", name))
                chosen[1]["program"] = name
                manifest["programs"].append(chosen[1])
            if chosen and model in OFFLOAD_MODELS:
                # The same step with AdamW's state in pinned host memory
                # (docs/offload.md), timed beside it.
                ptp, meta = compile_program(
                    bin_dir, workdir, model, precision, chosen[1]["batch"],
                    plan_extra={"offload": {"optimizer": "host"}},
                    suffix="-offhost")
                if not ptp:
                    manifest["notes"].append(
                        f"{model} {precision} offload host: does not "
                        f"compile: {meta}")
                    continue
                name = os.path.basename(ptp)
                shutil.copy2(ptp, os.path.join(stage, "programs", name))
                meta["program"] = name
                meta["offload"] = "host"
                manifest["programs"].append(meta)

    # Binaries (stripped) and the shared libraries they load that a bare
    # machine lacks.
    libraries = {}
    newest_glibc = (0, 0)
    for path, name in binaries.items():
        target = os.path.join(stage, "bin", name)
        shutil.copy2(path, target)
        run(["strip", "--strip-unneeded", target])
        libraries.update(shared_libraries(path))
        newest_glibc = max(newest_glibc, max_glibc(path))
    for soname, path in sorted(libraries.items()):
        if SYSTEM_LIBRARIES.match(soname):
            continue
        target = os.path.join(stage, "lib", soname)
        shutil.copy2(os.path.realpath(path), target)
        run(["strip", "--strip-unneeded", target])
    manifest["notes"].append(
        f"binaries need glibc >= {newest_glibc[0]}.{newest_glibc[1]}")
    manifest["libraries"] = sorted(os.listdir(os.path.join(stage, "lib")))
    with open(os.path.join(stage, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)

    archive = os.path.join(out_dir, "payload.tar.xz")
    with tarfile.open(archive, "w:xz", preset=6) as tar:
        tar.add(stage, arcname="payload")
    shutil.rmtree(stage)
    size = os.path.getsize(archive)
    log(f"prepare: {archive}: {size / (1 << 20):.1f} MiB "
        f"({len(binaries)} binaries, {len(manifest['libraries'])} libraries, "
        f"{len(manifest['programs'])} benchmark programs, "
        f"{len(manifest['tests'])} tests)")
    for note in manifest["notes"]:
        log(f"prepare: note: {note}")
    if size > CARRY_LIMIT and not args.no_size_limit:
        sys.exit(f"prepare: {archive} is {size} bytes, over the 64 MiB a GPU "
                 f"machine can be sent")
    # What travels: only the archive (the scripts are in the repository).
    shutil.rmtree(workdir, ignore_errors=True)


#===------------------------------------------------------------------------===#
# run
#===------------------------------------------------------------------------===#


def library_path(payload):
    """DIR/lib, then the CUDA toolkit's and the NVIDIA wheels' libraries."""
    dirs = [os.path.join(payload, "lib")]
    nvcc = shutil.which("nvcc")
    roots = [os.environ.get("CUDA_HOME", ""), os.environ.get("CUDA_PATH", ""),
             "/usr/local/cuda"] + sorted(glob.glob("/usr/local/cuda-*"),
                                         reverse=True)
    if nvcc:
        roots.insert(0, os.path.dirname(os.path.dirname(os.path.realpath(nvcc))))
    for root in roots:
        for sub in ("lib64", "lib", "targets/x86_64-linux/lib"):
            d = os.path.join(root, sub)
            if root and os.path.isdir(d):
                dirs.append(d)
    code, out = run([sys.executable, "-c",
                     "import site, sys; print('\\n'.join(site.getsitepackages()"
                     " + [site.getusersitepackages()] + sys.path))"])
    for base in out.split():
        # nvidia/<package>/lib (CUDA 12 wheels), nvidia/cu13/lib (CUDA 13).
        for pattern in ("nvidia/*/lib", "nvidia/*/lib64", "nvidia/*/*/lib"):
            dirs += sorted(glob.glob(os.path.join(base, pattern)))
    dirs += ["/usr/lib/x86_64-linux-gnu"]
    if os.environ.get("LD_LIBRARY_PATH"):
        dirs.append(os.environ["LD_LIBRARY_PATH"])
    seen, result = set(), []
    for d in dirs:
        if d and d not in seen:
            seen.add(d)
            result.append(d)
    return ":".join(result)


def gpu_name():
    code, out = run(["nvidia-smi", "--query-gpu=name,memory.total,driver_version",
                     "--format=csv,noheader"])
    return out.strip().splitlines()[0] if code == 0 and out.strip() else ""


def peaks_for(name):
    for key, peaks in PEAKS:
        if key in name:
            return key, peaks
    return DEFAULT_PEAK


def run_tests(manifest, payload, out, env, report):
    mpiexec = shutil.which("mpirun") or shutil.which("mpiexec")
    cmake = shutil.which("cmake")
    results = []
    for test in manifest["tests"]:
        command = [c.replace("{DIR}", payload).replace("{OUT}", out)
                   .replace("{PYTHON}", sys.executable) for c in test["command"]]
        note = ""
        if command[0] == "{CMAKE}":
            if not cmake:
                results.append((test["name"], "not run", "needs cmake"))
                continue
            command[0] = cmake
        if command[0] == "{MPIEXEC}":
            if mpiexec:
                command[0] = mpiexec
            else:
                # One rank without a launcher (MPI singleton start-up).
                rest = command[1:]
                while rest and (rest[0].startswith("-") or rest[0].isdigit()):
                    rest = rest[1:]
                command = rest
                note = " (no mpirun here: run as one process"
                if "nccl" in os.path.basename(command[0]):
                    # Its NcclTest.* bootstrap over MPI, which needs mpirun;
                    # the one-rank tests (create(), no MPI) still run.
                    command.append("--gtest_filter=-NcclTest.*")
                    note += "; NcclTest.* need MPI and were not run"
                note += ")"
        test_env = dict(env)
        for assignment in test["environment"]:
            key, _, value = assignment.partition("=")
            test_env[key] = value
        for arg in command:
            if arg.startswith(os.path.join(out, "work")):
                os.makedirs(arg, exist_ok=True)
        start = time.time()
        code, text = run(command, timeout=float(test["timeout"]), env=test_env)
        seconds = time.time() - start
        with open(os.path.join(out, "tests", test["name"].replace("/", "_") +
                               ".txt"), "w") as f:
            f.write("$ " + " ".join(command) + "\n" + text)
        skipped = any(re.search(pattern, text) for pattern in test["skip"])
        status = "skipped" if skipped else ("passed" if code == 0 else
                                            f"FAILED (exit {code})")
        detail = f"{seconds:.1f} s{note}"
        if skipped:
            match = [line for line in text.splitlines() if "skipped" in line]
            detail += ": " + (match[0].strip() if match else "")
        results.append((test["name"], status, detail))
        log(f"test {test['name']}: {status} ({detail})")
    with open(os.path.join(out, "tests.txt"), "w") as f:
        for name, status, detail in results:
            f.write(f"{name:60s} {status:20s} {detail}\n")
    counts = {}
    for _, status, _ in results:
        key = status.split(" ")[0]
        counts[key] = counts.get(key, 0) + 1
    report["tests"] = {"counts": counts, "results": results}
    return results


def write_tokens(path, count, vocab=50257, seed=1234):
    """An llm.c shard (header of 256 int32: magic 20240520, version 1,
    token count) of uniform random tokens, for both trainers."""
    import random
    import struct
    rng = random.Random(seed)
    header = [0] * 256
    header[0], header[1], header[2] = 20240520, 1, count
    with open(path, "wb") as f:
        f.write(struct.pack("<256i", *header))
        chunk = 1 << 16
        for start in range(0, count, chunk):
            n = min(chunk, count - start)
            f.write(struct.pack(f"<{n}H",
                                *(rng.randrange(vocab) for _ in range(n))))


def median_step_ms(times, warmup=2):
    timed = times[warmup:] if len(times) > warmup else times
    return statistics.median(timed) if timed else float("nan")


def bench_partition(program, payload, out, env, steps, data, extra_env=None,
                    tag=""):
    metrics = os.path.join(out, "bench", f"{program['program']}{tag}.jsonl")
    command = [os.path.join(payload, "bin", "partition-run"),
               os.path.join(payload, "programs", program["program"]),
               "--steps", str(steps), "--warmup", "1", "--lr", "3e-4",
               "--eval-every", "0", "--backend", "cuda", "--data", data,
               "--metrics-out", metrics]
    run_env = dict(env)
    run_env.update(extra_env or {})
    code, text = run(command, timeout=300, env=run_env)
    with open(metrics + ".log", "w") as f:
        f.write("$ " + " ".join(command) + "\n" + text)
    if code:
        return {"error": text.strip().splitlines()[-1] if text.strip() else
                f"exit {code}"}
    times, losses, device = [], [], None
    with open(metrics) as f:
        for line in f:
            record = json.loads(line)
            if record.get("summary"):
                device = record.get("device_bytes")
                continue
            times.append(record["step_ms"])
            losses.append(record["loss"])
    ms = median_step_ms(times)
    return {"step_ms": ms, "losses": losses, "device_bytes": device,
            "tokens_per_s": program["batch"] * program["seq"] / (ms / 1e3)}


def bench_llmc(binary, model, batch, steps, data, out):
    workdir = os.path.join(out, "llmc", f"{model}-b{batch}")
    os.makedirs(workdir, exist_ok=True)
    command = [binary, "-e", MODELS[model]["llmc"], "-b", str(batch), "-t",
               str(SEQ), "-x", str(steps), "-i", data, "-j", data, "-v",
               "1000000", "-s", "1000000"]
    command += os.environ.get("LLMC_ARGS", "").split()
    code, text = run(command, timeout=300, cwd=workdir)
    with open(os.path.join(workdir, "log.txt"), "w") as f:
        f.write("$ " + " ".join(command) + "\n" + text)
    times = [float(m.group(1)) for m in
             re.finditer(r"step\s+\d+/\d+ \|.*?\|\s*([\d.]+) ms", text)]
    if code or not times:
        tail = text.strip().splitlines()[-3:] if text.strip() else []
        return {"error": f"exit {code}: " + " / ".join(tail)}
    ms = median_step_ms(times)
    return {"step_ms": ms, "tokens_per_s": batch * SEQ / (ms / 1e3),
            "command": " ".join(command)}


def run_all(args):
    payload_dir = os.path.abspath(args.dir)
    out = os.path.abspath(args.out)
    os.makedirs(os.path.join(out, "tests"), exist_ok=True)
    os.makedirs(os.path.join(out, "bench"), exist_ok=True)
    archive = os.path.join(payload_dir, "payload.tar.xz")
    unpack = os.path.join(out, "unpacked")
    shutil.rmtree(unpack, ignore_errors=True)
    with tarfile.open(archive) as tar:
        tar.extractall(unpack)
    payload = os.path.join(unpack, "payload")
    for name in os.listdir(os.path.join(payload, "bin")):
        os.chmod(os.path.join(payload, "bin", name), 0o755)
    with open(os.path.join(payload, "manifest.json")) as f:
        manifest = json.load(f)

    env = dict(os.environ)
    env["LD_LIBRARY_PATH"] = library_path(payload)
    env.setdefault("OMP_NUM_THREADS", str(min(8, os.cpu_count() or 1)))
    gpu = gpu_name()
    peak_name, peaks = peaks_for(gpu)
    report = {"gpu": gpu, "peaks": {"gpu": peak_name, **peaks},
              "notes": manifest["notes"], "ld_library_path":
              env["LD_LIBRARY_PATH"]}
    code, ldd = run(["ldd", os.path.join(payload, "bin", "partition-run")],
                    env=env)
    missing = [l.strip() for l in ldd.splitlines() if "not found" in l]
    report["missing_libraries"] = missing
    log(f"gpu-check: {gpu or 'no GPU found by nvidia-smi'}; peaks of "
        f"{peak_name}; missing libraries: {missing or 'none'}")

    run_tests(manifest, payload, out, env, report)

    # Benchmarks.
    steps = int(os.environ.get("BENCH_STEPS", "8"))
    data = os.path.join(out, "bench", "tokens.bin")
    needed = max([p["batch"] * p["seq"] * (steps + 2) for p in
                  manifest["programs"]] + [1 << 20])
    write_tokens(data, int(needed * 1.2) + 1)
    rows = []
    for program in manifest["programs"]:
        variants = [("", {}, program["precision"])]
        if program["precision"] == "fp32" and os.environ.get("BENCH_TF32"):
            variants.append((".tf32", {"PARTITION_CUDA_TF32": "1"}, "tf32"))
        if program.get("offload"):
            # ZeRO-Offload's AdamW on the CPU (the default), and the same
            # program with the update staged back to the GPU.
            variants = [(".offload-host-cpu-adamw",
                         {"PARTITION_OFFLOAD_UPDATE": "cpu"},
                         program["precision"]),
                        (".offload-host-gpu-adamw",
                         {"PARTITION_OFFLOAD_UPDATE": "gpu"},
                         program["precision"])]
        for tag, extra, peak_key in variants:
            log(f"bench: {program['program']}{tag}")
            result = bench_partition(program, payload, out, env, steps, data,
                                     extra, tag)
            row = {"model": program["model"], "precision":
                   program["precision"] + tag.replace(".", "+"),
                   "batch": program["batch"], "seq": program["seq"],
                   "peak_key": peak_key, **result}
            if "tokens_per_s" in result:
                flops = program.get("flops_per_step")
                step_s = result["step_ms"] / 1e3
                if flops:
                    row["mfu"] = flops / step_s / peaks[peak_key]
                if program.get("parameters"):
                    row["mfu_6n"] = (6 * program["parameters"] *
                                     result["tokens_per_s"] / peaks[peak_key])
            if program.get("offload") and "losses" in result:
                # Against the same model and precision without offload.
                base = next((r for r in rows if r["model"] == program["model"]
                             and r["precision"] == program["precision"]
                             and "losses" in r), None)
                if base:
                    row["offload_vs_base"] = {
                        "step_ms_ratio": result["step_ms"] / base["step_ms"],
                        "max_rel_loss_diff": max(
                            (abs(a - b) / max(abs(a), 1e-12) for a, b in
                             zip(base["losses"], result["losses"])),
                            default=float("nan"))}
            rows.append(row)
    llmc = os.environ.get("LLMC_BIN") or args.llmc_bin
    if llmc:
        for program in manifest["programs"]:
            if program["precision"] != "bf16":
                continue
            log(f"bench: llm.c {program['model']} B={program['batch']}")
            result = bench_llmc(llmc, program["model"], program["batch"],
                                steps, data, out)
            ours = next((r for r in rows if r["model"] == program["model"] and
                         r["precision"] == "bf16"), {})
            row = {"model": program["model"], "precision": "llm.c bf16",
                   "batch": program["batch"], "seq": SEQ, "peak_key": "bf16",
                   **result}
            if "tokens_per_s" in result:
                if program.get("flops_per_step"):
                    row["mfu"] = (program["flops_per_step"] /
                                  (result["step_ms"] / 1e3) / peaks["bf16"])
                if ours.get("tokens_per_s"):
                    row["ratio"] = ours["tokens_per_s"] / result["tokens_per_s"]
            rows.append(row)
    report["bench"] = rows
    with open(os.path.join(out, "results.json"), "w") as f:
        json.dump(report, f, indent=1, default=str)
    summary(report, out)


def summary(report, out):
    lines = [f"# gpu-check", "",
             f"GPU: {report['gpu'] or 'none found'}; MFU against "
             f"{report['peaks']['gpu']} dense peaks: bf16 "
             f"{report['peaks']['bf16'] / 1e12:.0f}, TF32 "
             f"{report['peaks']['tf32'] / 1e12:.0f}, fp32 (no tensor cores, "
             f"what fp32 programs use unless PARTITION_CUDA_TF32=1) "
             f"{report['peaks']['fp32'] / 1e12:.1f} TFLOP/s.", ""]
    if report.get("missing_libraries"):
        lines += ["Missing libraries: " + "; ".join(report["missing_libraries"]),
                  ""]
    tests = report.get("tests", {})
    lines += ["## Tests (ctest -L gpu)", "",
              "counts: " + ", ".join(f"{k} {v}" for k, v in
                                     tests.get("counts", {}).items()), ""]
    for name, status, detail in tests.get("results", []):
        if status != "passed":
            lines.append(f"- {name}: {status} ({detail})")
    lines += ["", "## Training throughput (median step after 2 warm-up steps)",
              "",
              "| model | precision | B x T | step ms | tokens/s | MFU (model "
              "FLOPs) | MFU (6N) | vs llm.c |",
              "|---|---|---|---|---|---|---|---|"]
    for row in report.get("bench", []):
        if "error" in row:
            lines.append(f"| {row['model']} | {row['precision']} | "
                         f"{row['batch']} x {row['seq']} | error: "
                         f"{row['error']} | | | | |")
            continue
        mfu = f"{100 * row['mfu']:.1f}%" if "mfu" in row else "-"
        mfu6 = f"{100 * row['mfu_6n']:.1f}%" if "mfu_6n" in row else "-"
        ratio = f"{row['ratio']:.2f}x" if "ratio" in row else ""
        lines.append(f"| {row['model']} | {row['precision']} | {row['batch']} "
                     f"x {row['seq']} | {row['step_ms']:.1f} | "
                     f"{row['tokens_per_s']:.0f} | {mfu} | {mfu6} | {ratio} |")
    offload = [r for r in report.get("bench", []) if "offload_vs_base" in r]
    if offload:
        lines += ["", "## Offload (optimizer: host) against the same step "
                  "without it", "",
                  "| model | variant | step ms / no offload | max relative "
                  "loss difference |", "|---|---|---|---|"]
        for row in offload:
            versus = row["offload_vs_base"]
            lines.append(f"| {row['model']} | {row['precision']} | "
                         f"{versus['step_ms_ratio']:.2f}x | "
                         f"{versus['max_rel_loss_diff']:.1e} |")
    lines += ["", "MFU (model FLOPs) uses partition-opt --xfmr-stats (matmuls "
              "at 2MNK, backward 2x forward, attention at full T x T); MFU "
              "(6N) is 6 x parameters x tokens/s. 'vs llm.c' is partition's "
              "bf16 tokens/s over llm.c's on the same model and batch.", ""]
    if report.get("notes"):
        lines += ["## Notes", ""] + [f"- {n}" for n in report["notes"]]
    text = "\n".join(lines) + "\n"
    with open(os.path.join(out, "summary.md"), "w") as f:
        f.write(text)
    print(text)


def main():
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="mode", required=True)
    p = sub.add_parser("gpu-test-targets")
    p.add_argument("--build", required=True)
    p = sub.add_parser("prepare")
    p.add_argument("--build", required=True)
    p.add_argument("--src", required=True)
    p.add_argument("--dir", required=True)
    p.add_argument("--no-size-limit", action="store_true")
    p = sub.add_parser("run")
    p.add_argument("--dir", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--src")
    p.add_argument("--llmc-bin")
    args = parser.parse_args()
    {"gpu-test-targets": gpu_test_targets, "prepare": prepare,
     "run": run_all}[args.mode](args)


if __name__ == "__main__":
    main()
