"""Self-contained reference predictor for the recommended recipe (what the Rust code reproduces).

Query -> score vector:
  x_ng  = hashed n-grams (feats.py): word 1-2 + char_wb 2-5, murmur3_32 & (D-1), word block [0,D),
          char block [D,2D); tf' = 1+ln(tf); each block l2-normalised (no idf)
  e_i   = mean of table_i rows over the query's WordPiece ids (BERT-uncased, no [CLS]/[SEP]),
          u_i = (e_i - mu_i)/||e_i - mu_i||, e = beta/sqrt(2) * [u_1 ; u_2]   (two tables)
  s     = W^T [x_ng ; e] + b        (K intents + 1 background column)
  pred  = argmax s ; refuse if pred is the background column, or s[pred] < thresh
"""
import math, time, numpy as np
from collections import Counter
import feats


class Predictor:
    def __init__(self, W, b, mus, tables, beta, D, thresh, intents, tokenizer):
        self.W, self.b, self.mus, self.tables = W, b, mus, tables
        self.beta, self.D, self.thresh, self.intents = beta, D, thresh, intents
        self.tok = tokenizer
        self.K = len(intents)

    def features(self, text):
        ws, cs = feats.grams(text)
        idx, val = [], []
        for off, g in ((0, ws), (self.D, cs)):
            c = Counter(feats.h32(s) & (self.D - 1) for s in g)
            if not c:
                continue
            v = np.array([1 + math.log(n) for n in c.values()], np.float32)
            v /= np.linalg.norm(v)
            idx += [off + k for k in c.keys()]; val += list(v)
        ids = self.tok(text, add_special_tokens=False)["input_ids"]
        parts = []
        for T, mu in zip(self.tables, self.mus):
            e = (T[ids].mean(0) if ids else np.zeros(T.shape[1], np.float32)) - mu
            n = np.linalg.norm(e)
            parts.append(e / n if n > 0 else e)
        e = np.concatenate(parts) * (self.beta / math.sqrt(len(parts)) if len(parts) > 1 else self.beta)
        return np.array(idx, np.int64), np.array(val, np.float32), e

    def scores(self, text):
        idx, val, e = self.features(text)
        return val @ self.W[idx] + e @ self.W[2 * self.D:] + self.b

    def predict(self, text):
        s = self.scores(text)
        k = int(s.argmax())
        if k >= self.K or s[k] < self.thresh:
            return None, float(s[k])
        return self.intents[k], float(s[k])


def time_it(fn, texts):
    ts = []
    for t in texts:
        t0 = time.perf_counter(); fn(t); ts.append(time.perf_counter() - t0)
    ts = np.array(ts) * 1e6
    return float(np.median(ts)), float(np.mean(ts))
