# shard_helper.py — the Python side of tests/test_sharded.sh: splits a model directory's
# model.safetensors into shards with a model.safetensors.index.json as save_pretrained writes them
# (model-00001-of-0000N.safetensors, {"metadata": {"total_size"}, "weight_map"}), breaks such a
# checkpoint in one named way for the refusal tests, checks an exported sharded checkpoint, and
# joins one back into a single file. Safetensors through finetune_helper.py (struct + json).
import argparse
import json
import os
import shutil
import sys

import numpy as np

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import finetune_helper as fh  # noqa: E402

INDEX = "model.safetensors.index.json"


def shard_file(k, n):
    return f"model-{k + 1:05d}-of-{n:05d}.safetensors"


def cmd_split(a):
    """DST: SRC's config.json and its tensors (in file order, stored as --dtype) in shards of at most
    --max-bytes (a larger tensor alone), with the index; no model.safetensors."""
    os.makedirs(a.dst, exist_ok=True)
    shutil.copy(os.path.join(a.src, "config.json"), os.path.join(a.dst, "config.json"))
    T = fh.st_arrays(os.path.join(a.src, "model.safetensors"))
    esz = 4 if a.dtype == "F32" else 2
    groups, cur, size = [], [], 0
    for name, v in T.items():
        b = v.size * esz
        if cur and size + b > a.max_bytes:
            groups.append(cur)
            cur, size = [], 0
        cur.append(name)
        size += b
    groups.append(cur)
    if a.reverse:  # the shards in another order than the tensors: the reader must not care
        groups = groups[::-1]
    wm = {}
    for k, g in enumerate(groups):
        f = shard_file(k, len(groups))
        fh.write_st(os.path.join(a.dst, f), {n: T[n] for n in g}, a.dtype, {"format": "pt"})
        wm.update({n: f for n in g})
    total = sum(T[n].size * esz for n in T)
    with open(os.path.join(a.dst, INDEX), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": dict(sorted(wm.items()))}, f, indent=2)
    print(len(groups))


def cmd_break(a):
    """A copy of sharded checkpoint SRC broken one way (--case)."""
    if os.path.exists(a.dst):
        shutil.rmtree(a.dst)
    shutil.copytree(a.src, a.dst)
    ip = os.path.join(a.dst, INDEX)
    idx = json.load(open(ip))
    wm = idx["weight_map"]
    names = list(wm)
    files = sorted(set(wm.values()), key=lambda f: -sum(v == f for v in wm.values()))
    first, second = files[0], files[1]  # first: a shard of several tensors
    in_first = [n for n in names if wm[n] == first]
    if a.case == "missing-shard":
        os.remove(os.path.join(a.dst, second))
    elif a.case == "escape":
        wm[in_first[0]] = "../" + first
    elif a.case == "subdir":
        wm[in_first[0]] = "sub/" + first
    elif a.case == "wrong-shard":  # the index names another shard than the one holding it
        wm[in_first[0]] = second
    elif a.case == "unlisted":  # a shard tensor the index does not list
        del wm[in_first[0]]
    elif a.case == "listed-absent":  # an index entry no shard holds
        wm["model.extra.weight"] = first
    elif a.case == "two-shards":  # the same tensor in two shards
        p2 = os.path.join(a.dst, second)
        S = fh.st_arrays(p2)
        S[in_first[0]] = fh.st_arrays(os.path.join(a.dst, first))[in_first[0]]
        fh.write_st(p2, S)
    elif a.case == "no-weight-map":
        idx = {"metadata": {}}
    elif a.case == "perturb":  # a copy (tied lm_head) that differs, in another shard than its source
        for f in files:
            p = os.path.join(a.dst, f)
            S = fh.st_arrays(p)
            if a.tensor in S:
                S[a.tensor] = S[a.tensor].copy()
                S[a.tensor].flat[0] += 1.0
                fh.write_st(p, S)
    with open(ip, "w") as f:
        json.dump(idx, f)


def cmd_check_export(a):
    """An export's sharded checkpoint: the index's files are save_pretrained's names, every tensor
    is in the shard the index names and nowhere else, total_size is the bytes of the tensors, each
    shard but those holding one tensor is within --max-bytes, and no model.safetensors is beside it."""
    idx = json.load(open(os.path.join(a.dir, INDEX)))
    wm = idx["weight_map"]
    files = sorted(set(wm.values()))
    n = len(files)
    errs = []
    if files != [shard_file(k, n) for k in range(n)]:
        errs.append(f"shard names {files}")
    if n < a.min_shards:
        errs.append(f"{n} shards, expected at least {a.min_shards}")
    if os.path.exists(os.path.join(a.dir, "model.safetensors")):
        errs.append("a model.safetensors beside the index")
    total, seen = 0, set()
    for f in files:
        T, meta = fh.read_st(os.path.join(a.dir, f))
        if meta != {"format": "pt"}:
            errs.append(f"{f}: metadata {meta}")
        size = sum(len(v[2]) for v in T.values())
        if size > a.max_bytes and len(T) > 1:
            errs.append(f"{f}: {size} bytes in {len(T)} tensors, above {a.max_bytes}")
        for name, v in T.items():
            total += len(v[2])
            if wm.get(name) != f or name in seen:
                errs.append(f"{name} in {f}, index says {wm.get(name)}")
            seen.add(name)
    if seen != set(wm):
        errs.append(f"index names without a tensor: {sorted(set(wm) - seen)[:3]}")
    if idx.get("metadata", {}).get("total_size") != total:
        errs.append(f"total_size {idx.get('metadata')} but the tensors hold {total} bytes")
    print("; ".join(errs) or f"{n} shards, {len(wm)} tensors, {total} bytes")
    sys.exit(1 if errs else 0)


def cmd_join(a):
    """The tensors of a sharded checkpoint as one F32 safetensors file (for comparisons)."""
    wm = json.load(open(os.path.join(a.dir, INDEX)))["weight_map"]
    out = {}
    for f in sorted(set(wm.values())):
        out.update(fh.st_arrays(os.path.join(a.dir, f)))
    fh.write_st(a.out, {k: out[k] for k in sorted(out)})


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    g = sub.add_parser("split")
    g.add_argument("src")
    g.add_argument("dst")
    g.add_argument("--max-bytes", type=int, required=True)
    g.add_argument("--dtype", choices=["F32", "F16", "BF16"], default="F32")
    g.add_argument("--reverse", action="store_true")
    g = sub.add_parser("break")
    g.add_argument("src")
    g.add_argument("dst")
    g.add_argument("--case", required=True, choices=["missing-shard", "escape", "subdir", "wrong-shard", "unlisted",
                                                     "listed-absent", "two-shards", "no-weight-map", "perturb"])
    g.add_argument("--tensor")
    g = sub.add_parser("check-export")
    g.add_argument("dir")
    g.add_argument("--max-bytes", type=int, required=True)
    g.add_argument("--min-shards", type=int, default=2)
    g = sub.add_parser("join")
    g.add_argument("dir")
    g.add_argument("out")
    a = ap.parse_args()
    globals()["cmd_" + a.cmd.replace("-", "_")](a)


if __name__ == "__main__":
    main()
