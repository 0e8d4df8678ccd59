#!/usr/bin/env python3
"""A disk that fills during training, for the offload's fault test.

  full_disk.py PARTITION_RUN PROGRAM CHECKPOINT --save-every K [ARGS...]

Starts `PARTITION_RUN PROGRAM --save CHECKPOINT --save-every K ARGS...` on
one rank, waits until the checkpoint of step K is on disk (written
atomically: its file appears complete), then lowers the run's file-size
limit (RLIMIT_FSIZE, as `prlimit --fsize`) to one 4096-byte block. From the
next step on, every write past the first block of any file fails with EFBIG,
as writes to a full disk fail with ENOSPC: the offload's next write-back of
an optimizer state slice fails well before the next checkpoint (K steps
later). Prints the run's exit code and the last line of its stderr, and
fails if the run ended before the limit was lowered.
"""

import os
import resource
import subprocess
import sys
import time

BLOCK = 4096


def main():
    if len(sys.argv) < 6 or sys.argv[4] != "--save-every":
        sys.exit(__doc__)
    run, program, checkpoint = sys.argv[1:4]
    command = [run, program, "--save", checkpoint] + sys.argv[4:]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, text=True)
    saved = os.path.join(checkpoint, "checkpoint.safetensors")
    deadline = time.monotonic() + 120
    while not os.path.exists(saved):
        if process.poll() is not None:
            sys.exit(f"full_disk.py: the run ended (exit {process.returncode})"
                     f" before its first checkpoint: {process.stderr.read()}")
        if time.monotonic() > deadline:
            process.kill()
            sys.exit("full_disk.py: no checkpoint within 120 s")
        time.sleep(0.002)
    try:
        resource.prlimit(process.pid, resource.RLIMIT_FSIZE, (BLOCK, BLOCK))
    except ProcessLookupError:
        sys.exit("full_disk.py: the run ended before the disk filled")
    try:
        _, errors = process.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        process.kill()
        sys.exit("full_disk.py: the run went on past a full disk for 120 s")
    lines = [line for line in errors.splitlines() if line.strip()]
    print(f"exit {process.returncode}")
    print(lines[-1] if lines else "(no message)")
    print(f"{len(lines)} line(s) on stderr")


if __name__ == "__main__":
    main()
