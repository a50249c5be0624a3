"""Shared data loading for the CLINC150 routing study (bench/peers/routing/METHOD.md)."""
import json, os
import numpy as np

ROOT = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(os.path.dirname(ROOT)))
DATA = os.environ.get("CLINC150", os.path.join(REPO, "..", "shared", "benchmarks", "clinc150", "data_full.json"))
CACHE = os.path.join(ROOT, "cache")
os.makedirs(CACHE, exist_ok=True)

SPLITS = ["train", "val", "test", "oos_train", "oos_val", "oos_test", "background"]


def load():
    d = json.load(open(DATA))
    bg = [l.strip() for l in open(os.path.join(REPO, "shared", "intents", "background.txt")) if l.strip()]
    d["background"] = [[t, "oos"] for t in bg]
    return d


def all_texts(d):
    """Fixed concatenation order used for every embedding cache."""
    texts, index = [], {}
    for s in SPLITS:
        index[s] = (len(texts), len(texts) + len(d[s]))
        texts += [t for t, _ in d[s]]
    return texts, index


def first_k(train, k):
    """Deterministic k-shot: the first k utterances of each intent in file order."""
    seen, out = {}, []
    for t, y in train:
        if seen.get(y, 0) < k:
            out.append([t, y]); seen[y] = seen.get(y, 0) + 1
    return out
