"""Reference featuriser (the spec the Rust code should reproduce).

text -> lowercase (Python str.lower) -> tokens = regex \w+ (Unicode word chars)
word n-grams n=wmin..wmax over tokens, feature string  "w|" + " ".join(gram)
char n-grams per token, padded " "+tok+" " (sklearn char_wb style: if the padded token is
   shorter than n, the whole padded token is emitted once and longer n are skipped),
   n=cmin..cmax, feature string "c|" + gram
hash: h = MurmurHash3_x86_32(utf8(feature), seed=0) as u32; bucket = h & (D-1)  (D power of 2)
word block occupies [0,D), char block [D,2D).
weighting (fit on the training docs): tf' = 1+ln(tf); idf = ln((1+N)/(1+df)) + 1 (df per bucket);
   each block l2-normalised separately, then scaled by its block weight.
"""
import re, os, numpy as np, scipy.sparse as sp
from sklearn.utils import murmurhash3_32

TOK = re.compile(r"\w+")
DMAX = 1 << 20


def tokens(text):
    return TOK.findall(text.lower())


def char_grams(tok, nmin, nmax):
    w = " " + tok + " "
    L = len(w)
    out = []
    for n in range(nmin, nmax + 1):
        if L <= n:  # short padded token: emitted once, stop (matches sklearn char_wb)
            out.append(w)
            break
        for i in range(L - n + 1):
            out.append(w[i:i + n])
    return out


def grams(text, wr=(1, 2), cr=(2, 5)):
    toks = tokens(text)
    ws = []
    for n in range(wr[0], wr[1] + 1):
        for i in range(len(toks) - n + 1):
            ws.append("w|" + " ".join(toks[i:i + n]))
    cs = []
    if cr:
        for t in toks:
            cs += ["c|" + g for g in char_grams(t, cr[0], cr[1])]
    return ws, cs


def h32(s):
    return murmurhash3_32(s.encode("utf-8"), seed=0, positive=True)


def raw_counts(texts, wr, cr, D=DMAX):
    """Two CSR count matrices (word block, char block) with buckets in [0, D)."""
    mats = []
    for block in (0, 1):
        rows, cols = [], []
        for r, t in enumerate(texts):
            g = grams(t, wr, cr)[block]
            for s in g:
                rows.append(r); cols.append(h32(s) & (D - 1))
        m = sp.csr_matrix((np.ones(len(rows), np.float32), (rows, cols)), shape=(len(texts), D))
        m.sum_duplicates()
        mats.append(m)
    return mats


def fold(m, D):
    """Re-bucket a 2^20 count matrix to D (h & (D-1) == (h & (2^20-1)) & (D-1))."""
    if m.shape[1] == D:
        return m
    c = m.tocoo()
    out = sp.csr_matrix((c.data, (c.row, c.col & (D - 1))), shape=(m.shape[0], D))
    out.sum_duplicates()
    return out


class Weighter:
    """sublinear tf, smoothed idf fit on training rows, per-block l2 norm, block weights."""

    def __init__(self, use_idf=True, wweight=1.0, cweight=1.0):
        self.use_idf, self.ww, self.cw = use_idf, wweight, cweight

    def fit(self, W, C):
        self.idf = []
        for m in (W, C):
            N = m.shape[0]
            df = np.bincount(m.indices, minlength=m.shape[1])
            self.idf.append((np.log((1 + N) / (1 + df)) + 1).astype(np.float32))
        return self

    def _blk(self, m, idf, wt):
        m = m.copy().astype(np.float32)
        m.data = 1 + np.log(m.data)
        if self.use_idf:
            m = m.multiply(idf[None, :]).tocsr()
        n = np.sqrt(np.asarray(m.multiply(m).sum(1)).ravel()); n[n == 0] = 1
        m = sp.diags(1 / n) @ m
        return (m * wt).tocsr()

    def transform(self, W, C):
        return sp.hstack([self._blk(W, self.idf[0], self.ww), self._blk(C, self.idf[1], self.cw)]).tocsr()
