#!/usr/bin/env bash
# Installs what is missing, builds, and runs every test (lit + GoogleTest)
# under ctest, whose summary closes the output.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/setup.sh"
"$root/scripts/build.sh"
cd "${PARTITION_BUILD_DIR:-$root/build}"
ctest --output-on-failure -j "${PARTITION_JOBS:-2}"
