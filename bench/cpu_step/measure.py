"""What bench/cpu_step measures with: commands, thread counts, the machine's
name and load, and the CPU other processes take while a system runs (a
2-core machine's figures mean little when anything else is busy)."""

import os
import platform
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def log(message):
    print(f"[cpu_step] {message}", file=sys.stderr, flush=True)


def load():
    return [round(x, 2) for x in os.getloadavg()]


def thread_env(threads):
    """The environment of every peer: this one, with its thread counts fixed
    (OPENBLAS_CORETYPE and everything else left as they are)."""
    env = dict(os.environ)
    env["OMP_NUM_THREADS"] = str(threads)
    env["OPENBLAS_NUM_THREADS"] = str(threads)
    env["MKL_NUM_THREADS"] = str(threads)
    return env


def run(cmd, env=None, cwd=None, capture=True):
    log("$ " + " ".join(cmd))
    result = subprocess.run(cmd, env=env, cwd=cwd, text=True,
                            stdout=subprocess.PIPE if capture else None,
                            stderr=subprocess.PIPE if capture else None)
    if result.returncode != 0:
        sys.stderr.write((result.stdout or "") + (result.stderr or ""))
        raise SystemExit(f"[cpu_step] failed ({result.returncode}): {' '.join(cmd)}")
    return result


def cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def git_state():
    try:
        head = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"],
                              text=True, capture_output=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", ROOT, "status", "--porcelain",
                                "--untracked-files=no"],
                               text=True, capture_output=True).stdout.strip()
        return head + ("+dirty" if dirty else "")
    except OSError:
        return "unknown"


def cpu_busy_seconds():
    """CPU seconds the whole machine has spent busy (steal included: on a VM
    it is time someone else had) since boot."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    user, nice, system, idle, iowait, irq, softirq, steal = (fields + [0] * 8)[:8]
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


def own_cpu_seconds():
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


class Meter:
    """Wall time of a block and the CPU that other processes used meanwhile,
    in cores: on this 2-core machine anything above ~0.1 distorts the times."""

    def __enter__(self):
        self.wall0, self.busy0, self.own0 = time.time(), cpu_busy_seconds(), own_cpu_seconds()
        self.load_before = load()
        return self

    def __exit__(self, *exc):
        wall = time.time() - self.wall0
        others = (cpu_busy_seconds() - self.busy0) - (own_cpu_seconds() - self.own0)
        self.wall = wall
        self.others_cores = max(0.0, others / wall) if wall > 0 else 0.0
        self.load_after = load()
        return False

    def record(self):
        return {"wall_s": round(self.wall, 2), "others_cores": round(self.others_cores, 3),
                "load_before": self.load_before, "load_after": self.load_after}
