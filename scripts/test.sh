#!/usr/bin/env bash
# test.sh — sets up a fresh Debian 12 machine (idempotent), builds wgtrain and runs every test:
# each WGSL kernel against its C reference on the software GPU (Mesa lavapipe), the C reference
# against finite differences and PyTorch, and the trainer end to end; then the file-format, CLI
# and fault tests and a short fuzz pass again under AddressSanitizer + UBSan (make sanitize).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
make -j"$(nproc)" all
bash tests/run_all.sh
make -j"$(nproc)" sanitize
