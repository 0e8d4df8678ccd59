"""What every fuzz-session driver (run_*fuzz.py) does last: run the fuzzer,
show the tail of its log (libFuzzer's is long; the tail says what happened)
and fail the ctest session when the fuzzer failed."""

import subprocess
import sys


def run_fuzzer(driver, command, env=None):
    """Runs `command`; exits non-zero, naming `driver`, if it failed."""
    print(" ".join(command), flush=True)
    result = subprocess.run(command, capture_output=True, text=True, env=env)
    output = result.stdout + result.stderr
    print("\n".join(output.splitlines()[-25:]))
    if result.returncode != 0:
        sys.exit(f"{driver}: the fuzzer failed (exit {result.returncode}); "
                 "see above")
