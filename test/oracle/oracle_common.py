"""What the transformers oracles (hf_oracle.py, hf_families.py and
hf_mixtral.py) share.

The tools under test by name, running them (a failure stops the oracle
with the command and its output), reading --metrics-out and --dump-logits,
and the frame of an oracle: its command line (--bin, --work, --keep),
SKIPPED (exit 77) where torch or transformers is not installed, torch on
one thread with transformers' logging quiet, a work directory removed
afterwards unless kept, and the verdict (exit 0 or 1).
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

SKIP = 77
TOOLS = ["partition-import", "partition-compile", "partition-run",
         "partition-export"]


def run(command, **kwargs):
    result = subprocess.run(command, capture_output=True, text=True, **kwargs)
    if result.returncode != 0:
        sys.exit(f"FAILED: {' '.join(command)}\n{result.stdout}{result.stderr}")
    return result.stdout


def metrics(path):
    """The per-step records of a --metrics-out file."""
    with open(path) as f:
        return [json.loads(line) for line in f if '"step"' in line]


def dumped_logits(path):
    """input_ids and logits (fp32) of a partition-run --dump-logits file."""
    import numpy as np
    with np.load(path) as archive:
        return archive["input_ids"], archive["logits"]


def token_batches(work, batch, seq, steps, windows=16):
    """Random token ids written as partition-run's raw --data file, and the
    (inputs, targets) of each of `steps` training batches as the runtime's
    BatchLoader reads them: batch s is the window tokens[s*B*T :
    (s+1)*B*T + 1]. Returns (the data file's path, the batches)."""
    import numpy as np
    import torch
    generator = np.random.default_rng(7)
    tokens = generator.integers(0, 256, size=windows * batch * seq,
                                dtype=np.uint16)
    data = os.path.join(work, "tokens.bin")
    tokens.tofile(data)
    batches = []
    for step in range(steps):
        window = torch.from_numpy(
            tokens[step * batch * seq:(step + 1) * batch * seq + 1].astype(
                np.int64))
        batches.append((window[:-1].reshape(batch, seq),
                        window[1:].reshape(batch, seq)))
    return data, batches


def logits_error(ours, theirs):
    """max |ours - theirs| / max |theirs|: the largest difference relative
    to the largest logit. fp32 rounding is relative to the magnitudes the
    sums went through, not to each element (a logit near zero is the
    difference of large terms), so a per-element relative error would
    measure cancellation, not agreement."""
    import numpy as np
    ours = np.asarray(ours, dtype=np.float64)
    theirs = np.asarray(theirs, dtype=np.float64)
    if ours.shape != theirs.shape:
        return float("inf")
    scale = np.abs(theirs).max()
    return float(np.abs(ours - theirs).max() / (scale if scale > 0 else 1.0))


def oracle_main(description, body, passed, with_families=False):
    """Parses --bin/--work/--keep (and, with_families, --family NAME for
    `body` to read), imports torch and transformers (SKIPPED without them),
    and returns the exit code of body(args, tools, work, torch,
    transformers), which returns its failures (strings); `passed` is the
    closing line."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--bin", required=True,
                        help="the directory of the partition tools")
    parser.add_argument("--work", help="keep the files here")
    parser.add_argument("--keep", action="store_true",
                        help="keep the temporary work directory")
    if with_families:
        parser.add_argument("--family", action="append",
                            help="only this family (repeatable)")
    args = parser.parse_args()
    try:
        import torch
        import transformers
    except ImportError as error:
        print(f"SKIPPED: {error.name} is not installed "
              "(scripts/oracle.sh installs torch and transformers)")
        return SKIP
    torch.set_num_threads(1)
    transformers.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    tools = {name: os.path.join(args.bin, name) for name in TOOLS}
    for name, path in tools.items():
        if not os.access(path, os.X_OK):
            print(f"FAILED: {path} is missing; build the tools first "
                  "(scripts/build.sh) or give --bin")
            return 1
    work = args.work or tempfile.mkdtemp(prefix="hf-oracle-")
    os.makedirs(work, exist_ok=True)
    print(f"torch {torch.__version__}, transformers {transformers.__version__}")
    try:
        failures = body(args, tools, work, torch, transformers)
    finally:
        if not args.keep and not args.work:
            shutil.rmtree(work, ignore_errors=True)
    if failures:
        print("FAILED: " + "; ".join(failures))
        return 1
    print(passed)
    return 0
