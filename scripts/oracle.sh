#!/usr/bin/env bash
# Installs torch, transformers and safetensors with pip when they are
# missing (idempotent: a no-op when `import torch, transformers` works),
# builds the tools, and runs the transformers oracle tests
# (test/oracle/hf_oracle.py: loss and one AdamW step of GPT-2 and Llama
# against PyTorch; test/oracle/hf_families.py: Llama 3, Llama 3.2, Mistral,
# Qwen2 and yarn-scaled Llama, logits and 10 AdamW steps under three plans;
# test/oracle/hf_mixtral.py: Mixtral, logits, 10 AdamW steps and the final
# parameters; all share test/oracle/oracle_common.py). PYTHON picks the interpreter (default python3).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${PARTITION_BUILD_DIR:-$root/build}
python=${PYTHON:-python3}
if ! "$python" -c "import torch, transformers, safetensors" 2>/dev/null; then
  # Debian's Python is externally managed (PEP 668): install beside it.
  "$python" -m pip install --break-system-packages torch transformers safetensors ||
    "$python" -m pip install torch transformers safetensors
fi
"$root/scripts/build.sh"
OMP_NUM_THREADS=1 "$python" "$root/test/oracle/hf_oracle.py" --bin "$build/bin"
OMP_NUM_THREADS=1 "$python" "$root/test/oracle/hf_families.py" --bin "$build/bin"
OMP_NUM_THREADS=1 "$python" "$root/test/oracle/hf_mixtral.py" --bin "$build/bin"
