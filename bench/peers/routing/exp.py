"""Experiment engine: features, models, refusal thresholds, metrics."""
import os, time, json, hashlib
os.environ.setdefault("OMP_NUM_THREADS", "1")
import numpy as np, scipy.sparse as sp
from sklearn.svm import LinearSVC
from sklearn.linear_model import LogisticRegression
from common import load, all_texts, first_k, CACHE
import feats

D = load()
TEXTS, INDEX = all_texts(D)
INTENTS = sorted(set(y for _, y in D["train"]))
LID = {y: i for i, y in enumerate(INTENTS)}
K = len(INTENTS)          # 150 ; label K == "oos" class
OOS = K


def rows(split):
    a, b = INDEX[split]
    return np.arange(a, b)


def train_rows(cond):
    """Global row ids + labels of the training set for a condition ('full' or 'k10')."""
    a, _ = INDEX["train"]
    tr = D["train"]
    if cond == "full":
        sel = list(range(len(tr)))
    else:
        k = int(cond[1:]); seen = {}; sel = []
        for i, (t, y) in enumerate(tr):
            if seen.get(y, 0) < k:
                sel.append(i); seen[y] = seen.get(y, 0) + 1
    return a + np.array(sel), np.array([LID[tr[i][1]] for i in sel])


def labels(split):
    return np.array([LID.get(y, OOS) for _, y in D[split]])


# ---------------------------------------------------------------- features
_raw = {}


def raw(wr, cr):
    key = f"raw_w{wr[0]}{wr[1]}_c{cr[0] if cr else 0}{cr[1] if cr else 0}"
    if key in _raw:
        return _raw[key]
    f = os.path.join(CACHE, key + ".npz")
    if os.path.exists(f):
        z = np.load(f)
        W = sp.csr_matrix((z["wd"], z["wi"], z["wp"]), shape=(len(TEXTS), feats.DMAX))
        C = sp.csr_matrix((z["cd"], z["ci"], z["cp"]), shape=(len(TEXTS), feats.DMAX))
    else:
        W, C = feats.raw_counts(TEXTS, wr, cr)
        np.savez(f, wd=W.data, wi=W.indices, wp=W.indptr, cd=C.data, ci=C.indices, cp=C.indptr)
    _raw[key] = (W, C)
    return W, C


_emb = {}


def emb(name):
    if name not in _emb:
        E = np.load(os.path.join(CACHE, f"emb_{name}.npy")).astype(np.float32)
        n = np.linalg.norm(E, axis=1, keepdims=True); n[n == 0] = 1
        _emb[name] = E / n
    return _emb[name]


def featurize(cfg, fit_rows):
    """Full feature matrix (all texts) for cfg, weights fit on fit_rows. Returns csr or dense."""
    blocks = []
    if cfg.get("ngram", True):
        W, C = raw(tuple(cfg.get("wr", (1, 2))), tuple(cfg.get("cr", (2, 5))) if cfg.get("cr", (2, 5)) else None)
        Dm = 1 << cfg.get("logD", 18)
        W, C = feats.fold(W, Dm), feats.fold(C, Dm)
        wt = feats.Weighter(cfg.get("idf", True), cfg.get("ww", 1.0), cfg.get("cw", 1.0)).fit(W[fit_rows], C[fit_rows])
        blocks.append(wt.transform(W, C))
    if cfg.get("emb"):
        E = emb(cfg["emb"]) * cfg.get("beta", 1.0)
        blocks.append(sp.csr_matrix(E))
    X = sp.hstack(blocks).tocsr() if len(blocks) > 1 else blocks[0]
    return X


def compress(X, fit_rows):
    """Keep only columns seen in training rows (unseen columns get zero weight anyway)."""
    if not sp.issparse(X):
        return X, None
    cols = np.unique(X[fit_rows].indices)
    return X[:, cols].tocsr(), cols


# ---------------------------------------------------------------- models
def make_model(cfg):
    kind = cfg.get("model", "svm")
    if kind == "svm":
        return LinearSVC(C=cfg.get("C", 1.0), loss="squared_hinge", dual=True, tol=1e-4, max_iter=5000,
                         multi_class=cfg.get("mc", "ovr"), random_state=0)
    if kind == "lr":
        return LogisticRegression(C=cfg.get("C", 1.0), max_iter=3000, tol=1e-4)
    raise ValueError(kind)


def fit(cfg, X, tr_idx, y, sw=None):
    m = make_model(cfg)
    m.fit(X[tr_idx], y, sample_weight=sw)
    return m


def scores(m, X, cfg):
    if cfg.get("model", "svm") == "lr":
        return m.predict_log_proba(X) if cfg.get("logp") else m.predict_proba(X)
    return m.decision_function(X)


# ---------------------------------------------------------------- refusal
def decide(S, t, has_oos):
    """S: n x (K[+1]) scores. Returns (pred intent or -1 for refused)."""
    am = S.argmax(1)
    top = S[np.arange(len(S)), np.minimum(am, K - 1)] if not has_oos else S[np.arange(len(S)), am]
    pred = am.copy()
    ref = (top < t)
    if has_oos:
        ref |= (am == OOS)
    pred[ref] = -1
    return pred


def choose_t(S, budget, has_oos):
    """Largest threshold whose refusal share on these in-scope scores is <= budget."""
    n = len(S)
    am = S.argmax(1)
    top = S[np.arange(n), am]
    forced = (am == OOS) if has_oos else np.zeros(n, bool)
    allowed = int(np.floor(budget * n)) - forced.sum()
    if allowed < 0:
        return -np.inf
    cand = np.sort(top[~forced])
    if allowed >= len(cand):
        return np.inf
    # refusing the `allowed` lowest: t = cand[allowed] (ties refused only if strictly below)
    return cand[allowed]


def metrics(S_in, y_in, S_oos, t, has_oos):
    p = decide(S_in, t, has_oos)
    acc = float(np.mean(p == y_in))
    refused = float(np.mean(p == -1))
    plain = float(np.mean(S_in[:, :K].argmax(1) == y_in))
    out = dict(acc=acc, refused=refused, plain_acc=plain)
    if S_oos is not None:
        out["oos_recall"] = float(np.mean(decide(S_oos, t, has_oos) == -1))
    return out


# ---------------------------------------------------------------- one experiment
def build_train(cfg, cond):
    tr, y = train_rows(cond)
    neg = []
    if cfg.get("bg", True):
        neg += list(rows("background"))
    if cfg.get("oos_train", False):
        neg += list(rows("oos_train"))
    sw = None
    if neg:
        tr = np.concatenate([tr, np.array(neg)])
        y = np.concatenate([y, np.full(len(neg), OOS)])
        # weight of each negative example (1.0 = same as an in-scope utterance)
        w = cfg.get("negw", 1.0)
        sw = np.where(y == OOS, w, 1.0).astype(np.float64)
    return tr, y, sw, bool(neg)


def cv_scores(cfg, cond, X, tr, y, sw, nfold=5):
    """Held-out scores for every training row by stratified k-fold (deterministic)."""
    fold = np.zeros(len(tr), int)
    for c in np.unique(y):
        ids = np.where(y == c)[0]
        fold[ids] = np.arange(len(ids)) % nfold
    S = None
    for f in range(nfold):
        te = fold == f
        m = fit(cfg, X, tr[~te], y[~te], None if sw is None else sw[~te])
        s = scores(m, X[tr[te]], cfg)
        if S is None:
            S = np.zeros((len(tr), s.shape[1]), np.float32)
        S[te] = s
    return S


def run(cfg, cond, budget, eval_test=False, do_cv=False, t_from="val"):
    t0 = time.time()
    tr, y, sw, has_oos = build_train(cfg, cond)
    X = featurize(cfg, tr)
    X, _ = compress(X, tr)
    tf = time.time()
    m = fit(cfg, X, tr, y, sw)
    train_time = time.time() - tf
    res = dict(cfg=cfg, cond=cond, budget=budget, train_time=train_time)
    Sv = scores(m, X[rows("val")], cfg); yv = labels("val")
    Sov = scores(m, X[rows("oos_val")], cfg)
    tv = choose_t(Sv, budget, has_oos)
    res["t_val"] = float(tv)
    res["val"] = metrics(Sv, yv, Sov, tv, has_oos)
    if do_cv:
        Scv = cv_scores(cfg, cond, X, tr, y, sw)
        inscope = y != OOS
        tcv = choose_t(Scv[inscope], budget, has_oos)
        res["t_cv"] = float(tcv)
        res["val_cvt"] = metrics(Sv, yv, Sov, tcv, has_oos)
        if has_oos:
            bgm = y == OOS
            res["cv_neg_recall"] = float(np.mean(decide(Scv[bgm], tcv, has_oos) == -1))
    if eval_test:
        St = scores(m, X[rows("test")], cfg); yt = labels("test")
        Sot = scores(m, X[rows("oos_test")], cfg)
        res["test_valt"] = metrics(St, yt, Sot, tv, has_oos)
        if do_cv:
            res["test_cvt"] = metrics(St, yt, Sot, res["t_cv"], has_oos)
    res["wall"] = time.time() - t0
    return res, m, X


# ---------------------------------------------------------------- static-table embeddings built here
_tabs = {}
_ids = None


def table(name):
    if name not in _tabs:
        f = {"wordemb": "minilm_wordemb.npy", "m2vraw": "m2v_raw_table.npy"}[name]
        _tabs[name] = np.load(os.path.join(CACHE, f)).astype(np.float32)
    return _tabs[name]


def wp_ids():
    global _ids
    if _ids is None:
        import pickle
        _ids = pickle.load(open(os.path.join(CACHE, "wp_ids.pkl"), "rb"))
    return _ids


def static_emb(cfg, fit_rows):
    """cfg['semb'] = dict(table=..., weight='mean'|'idf'|'sif', center=bool, abtt=int)."""
    s = cfg["semb"]
    T = table(s.get("table", "wordemb"))
    ids = wp_ids()
    V = T.shape[0]
    fit_set = fit_rows
    wvec = np.ones(V, np.float32)
    if s.get("weight", "mean") != "mean":
        df = np.zeros(V); cnt = np.zeros(V)
        for r in fit_set:
            u = ids[r]
            np.add.at(cnt, u, 1); df[np.unique(u)] += 1
        if s["weight"] == "idf":
            N = len(fit_set)
            wvec = (np.log((1 + N) / (1 + df)) + 1).astype(np.float32)
        elif s["weight"] == "sif":
            p = cnt / cnt.sum(); a = s.get("a", 1e-3)
            wvec = (a / (a + p)).astype(np.float32)
    E = np.zeros((len(ids), T.shape[1]), np.float32)
    for r, u in enumerate(ids):
        if len(u):
            w = wvec[u]
            E[r] = (w[:, None] * T[u]).sum(0) / w.sum()
    if s.get("pool") == "meanmax":
        M = np.zeros_like(E)
        for r, u in enumerate(ids):
            if len(u):
                M[r] = T[u].max(0)
        E = np.hstack([E, M])
    if s.get("table2"):
        E2 = static_emb(dict(cfg, semb=dict(s, table=s["table2"], table2=None, pool=None)), fit_rows)
    if s.get("center", False):
        E = E - E[fit_rows].mean(0)
    if s.get("abtt", 0):
        _, _, Vt = np.linalg.svd(E[fit_rows] - E[fit_rows].mean(0), full_matrices=False)
        P = Vt[: s["abtt"]]
        E = E - (E @ P.T) @ P
    def nrm(A):
        n = np.linalg.norm(A, axis=1, keepdims=True); n[n == 0] = 1
        return A / n
    d0 = T.shape[1]
    E = np.hstack([nrm(E[:, :d0]), nrm(E[:, d0:])]) / np.sqrt(2) if E.shape[1] > d0 else nrm(E)
    if s.get("table2"):
        E = np.hstack([E, E2]) / np.sqrt(2)
    return E


_featurize_orig = featurize


def featurize(cfg, fit_rows):
    if "semb" not in cfg:
        return _featurize_orig(cfg, fit_rows)
    E = static_emb(cfg, fit_rows) * cfg.get("beta", 1.0)
    if cfg.get("ngram", True):
        X = _featurize_orig(dict(cfg, emb=None), fit_rows)
        return sp.hstack([X, sp.csr_matrix(E)]).tocsr()
    return sp.csr_matrix(E)
