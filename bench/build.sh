#!/usr/bin/env bash
# build.sh — builds every bench/bench_*.c into build/bench/ the way the Makefile builds a test:
# the same flags, linked against the library objects (every src/**/*.c except src/cli, plus the
# embedded WGSL) that `make` has just brought up to date. Kept out of the Makefile so that
# `make` / `make test` never depend on benchmark code.
set -euo pipefail
cd "$(dirname "$0")/.."
make -s -j"$(nproc)" build/wgtrain    # compiles every library object and the WGSL table
objs=()
while IFS= read -r src; do objs+=("build/${src%.c}.o"); done < <(find src -name '*.c' -not -path 'src/cli/*' | sort)
objs+=(build/gen/wgsl_sources.o)
mkdir -p build/bench
for src in bench/bench_*.c; do
    name=$(basename "$src" .c)
    ${CC:-gcc} -O2 -g -std=c11 -D_GNU_SOURCE -Wall -Wextra -Wno-unused-parameter -fopenmp -Iinclude -Isrc \
        -Ibench -o "build/bench/$name" "$src" "${objs[@]}" \
        -Lbuild -lwebgpu_wrapper -Wl,-rpath,'$ORIGIN/..' -lopenblas -lcjson -lz -lm -lpthread -fopenmp
    echo "built build/bench/$name"
done
