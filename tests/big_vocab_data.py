"""big_vocab_data.py — writes the synthetic data of test_big_vocab.sh: llm.c 32-bit token shards
(magic 20240801, version 7, uint32 tokens) whose ids lie mostly above 65,535, with structure a
model can learn, and small helpers (a uint32 .npy writer, a safetensors row reader).

  python3 big_vocab_data.py shards DIR SEED       DIR/x_train.bin, DIR/x_val.bin
  python3 big_vocab_data.py npy OUT ROWS...        ROWS: comma-separated ids, one row each
  python3 big_vocab_data.py rows ST NAME ID...      prints max |value| of each row of tensor NAME
  python3 big_vocab_data.py widen IN OUT V          IN's tensors with [V0, C] ones widened to V rows
  python3 big_vocab_data.py config ST OUT           a Hugging Face llama config.json for ST's model
  python3 big_vocab_data.py compare A B             max |a - b| / max |a| over all tensors
"""
import json, random, struct, sys

# 50 ids: 48 above 65,535 (up to 69,999) and two below, so both halves of the id range are used
IDS = [65536 + 71 * k for k in range(48)] + [7, 40000]


def shard(path, toks):
    with open(path, "wb") as f:
        head = [20240801, 7, len(toks)] + [0] * 253
        f.write(struct.pack("<256i", *head))
        f.write(struct.pack("<%dI" % len(toks), *toks))


def stream(rng, n):
    # each id is followed by one fixed successor 90% of the time: about 0.5 nats/token to learn
    succ = {a: IDS[(i * 7 + 3) % len(IDS)] for i, a in enumerate(IDS)}
    cur, out = IDS[0], []
    for _ in range(n):
        out.append(cur)
        cur = succ[cur] if rng.random() < 0.9 else rng.choice(IDS)
    return out


def npy_u32(path, rows):
    w = len(rows[0])
    head = "{'descr': '<u4', 'fortran_order': False, 'shape': (%d, %d), }" % (len(rows), w)
    head += " " * (63 - (10 + len(head)) % 64) + "\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(head)) + head.encode())
        for r in rows:
            f.write(struct.pack("<%dI" % w, *r))


def rows(path, name, ids):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        hdr = json.loads(f.read(n))
        t = hdr[name]
        assert t["dtype"] == "F32", t
        cols = t["shape"][1]
        base = 8 + n + t["data_offsets"][0]
        for i in ids:
            f.seek(base + i * cols * 4)
            v = struct.unpack("<%df" % cols, f.read(cols * 4))
            print("%.9g" % max(abs(x) for x in v))


def read_st(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        hdr = json.loads(f.read(n))
        data = f.read()
    out = {}
    for k, t in hdr.items():
        if k == "__metadata__":
            continue
        a, b = t["data_offsets"]
        out[k] = (t["shape"], list(struct.unpack("<%df" % ((b - a) // 4), data[a:b])))
    return out


def write_st(path, tensors):
    hdr, off, blobs = {}, 0, []
    for k, (shape, vals) in tensors.items():
        blob = struct.pack("<%df" % len(vals), *vals)
        hdr[k] = {"dtype": "F32", "shape": shape, "data_offsets": [off, off + len(blob)]}
        off += len(blob)
        blobs.append(blob)
    h = json.dumps(hdr).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def widen(src, dst, v):
    # new rows: small deterministic values, so the widened model's logits stay near the old ones
    rng = random.Random(5)
    t = read_st(src)
    for k, (shape, vals) in t.items():
        if len(shape) == 2 and k in ("model.embed_tokens.weight", "lm_head.weight"):
            extra = [rng.uniform(-0.02, 0.02) for _ in range((v - shape[0]) * shape[1])]
            t[k] = ([v, shape[1]], vals + extra)
    write_st(dst, t)


def config(st, out):
    t = read_st(st)
    v, c = t["model.embed_tokens.weight"][0]
    f = t["model.layers.0.mlp.gate_proj.weight"][0][0]
    kv = t["model.layers.0.self_attn.k_proj.weight"][0][0]
    layers = len([k for k in t if k.endswith("input_layernorm.weight")])
    heads = c // 8  # the test's models: head size 8
    json.dump({"model_type": "llama", "hidden_size": c, "intermediate_size": f, "num_attention_heads": heads,
               "num_key_value_heads": kv // 8, "num_hidden_layers": layers, "vocab_size": v,
               "max_position_embeddings": 16, "rope_theta": 10000.0, "rms_norm_eps": 1e-5,
               "tie_word_embeddings": "lm_head.weight" not in t}, open(out, "w"))


def compare(a, b):
    ta, tb = read_st(a), read_st(b)
    assert ta.keys() == tb.keys()
    worst = 0.0
    for k in ta:
        x, y = ta[k][1], tb[k][1]
        scale = max(max(abs(v) for v in x), 1e-30)
        worst = max(worst, max(abs(p - q) for p, q in zip(x, y)) / scale)
    print("%.3g" % worst)


if __name__ == "__main__":
    cmd = sys.argv[1]
    if cmd == "shards":
        rng = random.Random(int(sys.argv[3]))
        shard(sys.argv[2] + "/x_train.bin", stream(rng, 20000))
        shard(sys.argv[2] + "/x_val.bin", stream(rng, 2000))
    elif cmd == "npy":
        npy_u32(sys.argv[2], [[int(x) for x in r.split(",")] for r in sys.argv[3:]])
    elif cmd == "rows":
        rows(sys.argv[2], sys.argv[3], [int(x) for x in sys.argv[4:]])
    elif cmd == "widen":
        widen(sys.argv[2], sys.argv[3], int(sys.argv[4]))
    elif cmd == "config":
        config(sys.argv[2], sys.argv[3])
    elif cmd == "compare":
        compare(sys.argv[2], sys.argv[3])
