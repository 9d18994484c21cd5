#!/usr/bin/env bash
# test.sh — sets up a fresh Debian 12 machine (idempotent), builds wgtrain and runs every test:
# each WGSL kernel against its C reference on the software GPU (Mesa lavapipe), the C reference
# against finite differences and PyTorch, and the trainer end to end; then the file-format, CLI
# and fault tests and a short fuzz pass again under AddressSanitizer + UBSan (make sanitize).
# Both builds (and the benchmarks, which test_bench_flags.sh checks) are one make (the jobserver keeps
# every core busy), and the tests run one per core.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
make -j"$(nproc)" all bench sanitize-build
export RUN_JOBS=${RUN_JOBS:-$(nproc)}
bash tests/run_all.sh
make -j"$(nproc)" sanitize
