# make_corpus.py — the synthetic corpus the trainer tests train on: DOCS documents (default 240)
# of 3 to 8 sentences "Subject verb object place." drawn with random.Random(SEED), separated by
# <|endoftext|>. Usage: python3 tests/make_corpus.py OUT SEED [DOCS]
import random
import sys

out, seed = sys.argv[1], int(sys.argv[2])
ndocs = int(sys.argv[3]) if len(sys.argv) > 3 else 240
r = random.Random(seed)
subj = ["the cat", "a dog", "the old man", "my sister", "the teacher", "a small bird", "the farmer", "our neighbour"]
verb = ["sees", "likes", "follows", "finds", "watches", "carries", "paints", "remembers"]
obj = ["the red ball", "a green apple", "the long road", "a quiet river", "the blue house", "an open door"]
place = ["in the garden", "near the station", "at the market", "by the sea", "under the bridge", "after dinner"]
docs = [" ".join(f"{r.choice(subj).capitalize()} {r.choice(verb)} {r.choice(obj)} {r.choice(place)}."
                 for _ in range(r.randint(3, 8))) for _ in range(ndocs)]
open(out, "w").write("\n<|endoftext|>\n".join(docs) + "\n")
