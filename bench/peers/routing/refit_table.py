#!/usr/bin/env python3
"""A refit of the classifier's 64-dimension word-piece table on sentences (the study in METHOD.md,
"A refit of the word vectors on sentences"; measured, not shipped).

The shipped table (`shared/core/src/classify/word_vectors.bin`) gives each word piece the vector
MiniLM gives the piece alone. The refit trains the table so that a text's static vector, as the
classifier computes it (`vectors.rs`: the normalised sum of its content words, each the
normalised mean of its pieces), points where MiniLM's vector of the whole text points (centred,
PCA to 64 dimensions), over ~200,000 general English texts. The start is the shipped table rotated
onto the sentence vectors' axes (orthogonal Procrustes); the table written is `share` x refit +
(1 - share) x start, normalised per piece, int8, with the shipped table's header and pieces.

    python refit_table.py corpus WORDNET_DIR FORTUNES_DIR CHATTERBOT_ENGLISH_DIR > corpus.txt
    cargo run --release -p switchyard-encoder --example embed -- MODEL_DIR sentences.f32 < corpus.txt
    python refit_table.py table corpus.txt sentences.f32 refit.bin [SHARE]

The corpus folders come from the Debian packages wordnet-base, fortunes and fortunes-min
(`apt-get download`, `dpkg -x`) and the PyPI package chatterbot-corpus 1.3.3 (`pip download
--no-deps`, unzipped). Needs numpy, scipy and pyyaml.
"""
import glob
import os
import random
import re
import struct
import sys

import numpy as np
import yaml
from scipy import sparse

DIMS = 64
REPO = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..")
TABLE = os.path.join(REPO, "shared", "core", "src", "classify", "word_vectors.bin")
# Adam's step, passes over the corpus, texts per step, texts held out to report the fit.
REFIT_STEP = 0.01
REFIT_PASSES = 4
REFIT_BATCH = 512
REFIT_HELD_OUT = 5000
REFIT_SHARE = 0.5


def read_table(path):
    """The shipped table: its bytes up to the vectors, its pieces, its vectors (unit rows)."""
    data = open(path, "rb").read()
    n, dims, _ = struct.unpack_from("<III", data, 8)
    offsets = struct.unpack_from(f"<{n + 1}I", data, 100)
    base = 100 + 4 * (n + 1)
    pieces = [data[base + offsets[i]:base + offsets[i + 1]].decode() for i in range(n)]
    start = base + offsets[n]
    vectors = np.frombuffer(data, dtype=np.int8, count=n * dims, offset=start).reshape(n, dims) / 127.0
    return data[:start], pieces, vectors.astype(np.float32)


def stop_words():
    """The classifier's stop words, read from its source so the two never differ."""
    text = open(os.path.join(REPO, "shared", "core", "src", "classify", "text.rs"), encoding="utf-8").read()
    block = text[text.index("pub(crate) const STOP_WORDS"):]
    return set(re.findall(r'"([^"]+)"', block[:block.index("];")]))


def text_matrices(texts, tokens):
    """The classifier's static vector of each text as sparse sums (vectors.rs): S (text x word)
    counts each text's content words, P (word x piece) each word's pieces."""
    index = {t: i for i, t in enumerate(tokens)}
    stop = stop_words()

    def pieces(word):
        if len(word) > 40 or not (word.isascii() and word.isalpha() and word.islower()):
            return None
        rows, start = [], 0
        while start < len(word):
            end, found = len(word), None
            while start < end:
                found = index.get(("##" if start else "") + word[start:end])
                if found is not None:
                    break
                end -= 1
            if found is None or len(rows) == 8:
                return None
            rows.append(found)
            start = end
        return rows or None

    word_ids, word_pieces, rows, cols = {}, [], [], []
    for i, text in enumerate(texts):
        for word in re.findall(r"[^\W_]+", text.lower()):
            if len(word) < 2 or any(c.isdigit() for c in word) or word in stop:
                continue
            if word not in word_ids:
                found = pieces(word)
                word_ids[word] = len(word_pieces) if found else -1
                if found:
                    word_pieces.append(found)
            if word_ids[word] >= 0:
                rows.append(i)
                cols.append(word_ids[word])
    s = sparse.csr_matrix((np.ones(len(rows), np.float32), (rows, cols)), shape=(len(texts), len(word_pieces)))
    pr = [j for j, found in enumerate(word_pieces) for _ in found]
    pc = [r for found in word_pieces for r in found]
    p = sparse.csr_matrix((np.ones(len(pr), np.float32), (pr, pc)), shape=(len(word_pieces), len(tokens)))
    return s, p


def static_vectors(s, p, table):
    """Forward pass: word vectors (normalised piece sums), then text vectors (normalised sums)."""
    a = p @ table
    a_norm = np.linalg.norm(a, axis=1, keepdims=True) + 1e-9
    u = a / a_norm
    t = s @ u
    t_norm = np.linalg.norm(t, axis=1, keepdims=True) + 1e-9
    return a_norm, u, t_norm, t / t_norm


def refit(tokens, table, texts, sentence_vectors, share=REFIT_SHARE):
    """Step 2: the table trained so that each text's static vector points where the encoder's
    vector of the text points; returns the kept blend of start and refit."""
    s, p = text_matrices(texts, tokens)
    used = np.asarray(s.sum(1)).ravel() > 0
    s, target = s[used], sentence_vectors[used]
    centred = target - target.mean(0)
    _, _, vt = np.linalg.svd(centred[::4], full_matrices=False)
    target = centred @ vt[:DIMS].T
    target /= np.linalg.norm(target, axis=1, keepdims=True) + 1e-9
    # The start, rotated onto the targets' axes (orthogonal Procrustes; the cosine is blind to it).
    u, _, w = np.linalg.svd(static_vectors(s, p, table)[-1].T @ target)
    start = table @ (u @ w)
    held, train = np.arange(REFIT_HELD_OUT), np.arange(REFIT_HELD_OUT, s.shape[0])
    fit = lambda t: float((static_vectors(s[held], p, t)[-1] * target[held]).sum(1).mean())
    print(f"refit: {s.shape[0]} texts, {s.shape[1]} words; held-out cosine {fit(start):.4f} at the start",
          file=sys.stderr)
    x, m, v, step = start.copy(), np.zeros_like(start), np.zeros_like(start), 0
    rng = np.random.default_rng(0)
    for epoch in range(REFIT_PASSES):
        rng.shuffle(train)
        for b in range(0, len(train), REFIT_BATCH):
            batch = train[b:b + REFIT_BATCH]
            sb = s[batch]
            words = np.unique(sb.indices)
            sb, pb = sb[:, words], p[words]
            a_norm, uw, t_norm, out = static_vectors(sb, pb, x)
            g_out = -target[batch] / len(batch)
            g_t = (g_out - out * (out * g_out).sum(1, keepdims=True)) / t_norm
            g_u = sb.T @ g_t
            g_a = (g_u - uw * (uw * g_u).sum(1, keepdims=True)) / a_norm
            rows = np.unique(pb.indices)
            g = np.asarray(pb.T @ g_a)[rows]
            step += 1
            m[rows] = 0.9 * m[rows] + 0.1 * g
            v[rows] = 0.999 * v[rows] + 0.001 * g * g
            x[rows] -= REFIT_STEP * (m[rows] / (1 - 0.9 ** step)) / (np.sqrt(v[rows] / (1 - 0.999 ** step)) + 1e-8)
            x[rows] /= np.linalg.norm(x[rows], axis=1, keepdims=True) + 1e-9
        print(f"refit: pass {epoch + 1}, held-out cosine {fit(x):.4f}", file=sys.stderr)
    kept = share * x + (1 - share) * start
    kept /= np.linalg.norm(kept, axis=1, keepdims=True) + 1e-9
    print(f"refit: kept table, held-out cosine {fit(kept):.4f}", file=sys.stderr)
    return kept


def corpus(wordnet, fortunes, chatterbot):
    """The refit's texts, one per line: WordNet's glosses and quoted examples, the fortune files'
    sentences, the chatterbot corpus' English lines (folders of the unpacked packages)."""
    texts = set()
    for path in glob.glob(os.path.join(wordnet, "data.*")):
        for line in open(path, encoding="latin-1"):
            if line.startswith("  ") or "|" not in line:
                continue
            for part in line.split("|", 1)[1].strip().split(";"):
                part = part.strip().strip('"').strip()
                if len(part.split()) >= 3:
                    texts.add(part)
    for path in glob.glob(os.path.join(fortunes, "*")):
        if path.endswith((".dat", ".u8")) or os.path.isdir(path):
            continue
        for block in open(path, encoding="utf-8", errors="ignore").read().split("\n%\n"):
            for sentence in re.split(r"(?<=[.?!])\s+", " ".join(block.split())):
                if 3 <= len(sentence.split()) <= 40:
                    texts.add(sentence)
    for path in glob.glob(os.path.join(chatterbot, "*.yml")):
        for conversation in (yaml.safe_load(open(path, encoding="utf-8")) or {}).get("conversations", []):
            for line in conversation:
                line = str(line).strip()
                if 2 <= len(line.split()) <= 40:
                    texts.add(line)
    lines = sorted(texts)
    random.Random(0).shuffle(lines)
    return lines


def main():
    if sys.argv[1:2] == ["corpus"] and len(sys.argv) == 5:
        sys.stdout.write("".join(line + "\n" for line in corpus(*sys.argv[2:5])))
    elif sys.argv[1:2] == ["table"] and len(sys.argv) in (5, 6):
        share = float(sys.argv[5]) if len(sys.argv) == 6 else REFIT_SHARE
        header, pieces, table = read_table(TABLE)
        texts = open(sys.argv[2], encoding="utf-8").read().split("\n")[:-1]
        sentence_vectors = np.fromfile(sys.argv[3], dtype="<f4").reshape(len(texts), -1)
        kept = refit(pieces, table, texts, sentence_vectors, share)
        quantised = np.clip(np.round(kept * 127.0), -127, 127).astype(np.int8)
        open(sys.argv[4], "wb").write(header + quantised.tobytes())
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
