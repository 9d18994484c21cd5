#!/usr/bin/env python3
# nv_sass.py — the machine code that NVIDIA's Vulkan driver compiled for our WGSL kernels, read from
# the driver's shader disk cache: register count and an instruction histogram per pipeline, and
# optionally the whole listing. This is how the GEMM was found to be issue-bound, and why its 8x8
# tile first ran slower than 8x4 (docs/kernels.md#the-gemm-kernel).
#
# Usage (on the NVIDIA machine):
#   export __GL_SHADER_DISK_CACHE=1 __GL_SHADER_DISK_CACHE_PATH=/tmp/glc __GL_SHADER_DISK_CACHE_SKIP_CLEANUP=1
#   rm -rf /tmp/glc; mkdir -p /tmp/glc   # the driver writes nothing into a directory that is missing
#   WGTRAIN_MM_TILE=128x128x8/8x8 build/bench/bench_matmul --only matmul --reps 2
#   python3 bench/nv_sass.py --cache /tmp/glc [--nvdisasm PATH] [--arch SM90] [--listing out.sass]
#
# What the cache holds is the driver's business, not a documented format; what this reads was
# seen with the H200's driver: each cache file is a sequence of zstd frames, and a frame of a
# compiled compute pipeline carries its 16-byte instructions from byte 8 on, which nvdisasm
# decodes in raw mode (its header section names the register count). A frame with fewer than 32
# FFMA instructions is skipped (small helper pipelines). Needs the `zstd` program (Debian's zstd)
# and nvdisasm (the CUDA toolkit's, or the copy that ships with Triton's NVIDIA backend).
import argparse
import collections
import glob
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile

ZSTD_MAGIC = b'\x28\xb5\x2f\xfd'
FFMA_OPCODE = 0x223  # low 12 bits of the first word of an FFMA (register form) on sm_80 and later


def find_nvdisasm(given):
    if given:
        return given
    p = shutil.which('nvdisasm')
    if p:
        return p
    try:
        import triton  # its NVIDIA backend bundles nvdisasm
        p = os.path.join(os.path.dirname(triton.__file__), 'backends', 'nvidia', 'bin', 'nvdisasm')
        if os.path.exists(p):
            return p
    except ImportError:
        pass
    sys.exit('nv_sass: nvdisasm not found; give --nvdisasm PATH')


def frames(data):
    """The zstd frames of one cache file, decompressed."""
    starts = [m.start() for m in re.finditer(re.escape(ZSTD_MAGIC), data)]
    for i, s in enumerate(starts):
        e = starts[i + 1] if i + 1 < len(starts) else len(data)
        # the bytes up to the next frame end with the cache's own records, which zstd reports as
        # trailing garbage after it has written the frame: the output counts, not the status
        p = subprocess.run(['zstd', '-dc'], input=data[s:e], capture_output=True)
        if p.stdout:
            yield p.stdout


def ffma_count(blob):
    return sum(1 for o in range(8, len(blob) - 15, 16)
               if (struct.unpack_from('<Q', blob, o)[0] & 0xfff) == FFMA_OPCODE)


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument('--cache', required=True, help='the __GL_SHADER_DISK_CACHE_PATH of the run')
    ap.add_argument('--nvdisasm')
    ap.add_argument('--arch', default='SM90')
    ap.add_argument('--listing', help='write every listing to this file')
    a = ap.parse_args()
    if not shutil.which('zstd'):
        sys.exit('nv_sass: the zstd program is needed (Debian package zstd)')
    nvd = find_nvdisasm(a.nvdisasm)
    files = sorted(glob.glob(os.path.join(a.cache, '**', '*.bin'), recursive=True))
    if not files:
        sys.exit(f'nv_sass: no *.bin under {a.cache}; was __GL_SHADER_DISK_CACHE_PATH set for the run?')
    out = open(a.listing, 'w') if a.listing else None
    n = 0
    with tempfile.TemporaryDirectory() as tmp:
        for f in files:
            for blob in frames(open(f, 'rb').read()):
                nff = ffma_count(blob)
                if nff < 32:
                    continue
                raw = os.path.join(tmp, f'p{n}.bin')
                open(raw, 'wb').write(blob[8:])
                q = subprocess.run([nvd, '-b', a.arch, raw], capture_output=True, text=True)
                text = q.stdout
                regs = re.search(r'Register count=(\d+)', text)
                ops = collections.Counter(
                    o.split('.')[0] for o in re.findall(r'/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)', text))
                print(f'pipeline {n}: {regs.group(1) if regs else "?"} registers, {sum(ops.values())} instructions, '
                      f'{nff} FFMA; most frequent: ' + ', '.join(f'{k} {v}' for k, v in ops.most_common(12)))
                if out:
                    out.write(f'##### pipeline {n} ({f})\n{text}\n')
                n += 1
    if not n:
        sys.exit('nv_sass: no pipeline with FMAs found in the cache')


if __name__ == '__main__':
    main()
