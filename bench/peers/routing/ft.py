"""fastText-style joint model in torch (reference for a Rust trainer):
 logits = W_ng . x_ngram  +  W_e . (beta * l2norm(mean_{t in wordpieces} E[t] - mu))  + b
 x_ngram = the hashed tf-idf n-gram vector from feats.py (columns compressed to those seen in training),
 E initialised from MiniLM input token embeddings (optionally trainable), mu = mean sentence vector of
 the training rows at init (a constant). Loss: softmax cross-entropy (+ L2 on W, L2 of E-E0).
 Optimiser: Adam, minibatch, fixed epochs, deterministic seed."""
import os, time, numpy as np, torch, scipy.sparse as sp
import exp
torch.set_num_threads(1)


def _bags(rows_, X, ids):
    """Flatten sparse rows and wordpiece ids for EmbeddingBag."""
    Xr = X[rows_]
    ng = (torch.from_numpy(Xr.indices.astype(np.int64)), torch.from_numpy(Xr.indptr[:-1].astype(np.int64)),
          torch.from_numpy(Xr.data.astype(np.float32)))
    wl = [ids[r] if len(ids[r]) else [0] for r in rows_]
    wp = (torch.tensor([t for u in wl for t in u], dtype=torch.int64),
          torch.tensor(np.cumsum([0] + [len(u) for u in wl[:-1]]), dtype=torch.int64))
    return ng, wp


class Net(torch.nn.Module):
    def __init__(self, nfeat, T0, mu, ncls, beta, train_E, use_ng, use_emb):
        super().__init__()
        self.use_ng, self.use_emb, self.beta = use_ng, use_emb, beta
        if use_ng:
            self.ng = torch.nn.EmbeddingBag(nfeat, ncls, mode="sum", sparse=True)
            torch.nn.init.zeros_(self.ng.weight)
        if use_emb:
            self.E = torch.nn.EmbeddingBag.from_pretrained(torch.from_numpy(T0), freeze=not train_E, mode="mean", sparse=True)
            self.E0 = torch.from_numpy(T0)
            self.mu = torch.from_numpy(mu)
            self.lin = torch.nn.Linear(T0.shape[1], ncls, bias=False)
            torch.nn.init.zeros_(self.lin.weight)
        self.b = torch.nn.Parameter(torch.zeros(ncls))

    def forward(self, ng, wp):
        out = self.b
        if self.use_ng:
            out = out + self.ng(ng[0], ng[1], per_sample_weights=ng[2])
        if self.use_emb:
            e = self.E(wp[0], wp[1]) - self.mu
            e = torch.nn.functional.normalize(e, dim=1) * self.beta
            out = out + self.lin(e)
        return out


def batches(n, bs, rng):
    p = rng.permutation(n)
    for i in range(0, n, bs):
        yield p[i:i + bs]


def train(cfg, X, tr, y, ids, T0, sw=None):
    torch.manual_seed(cfg.get("seed", 0)); rng = np.random.RandomState(cfg.get("seed", 0))
    ncls = int(y.max()) + 1
    # mu: mean (unnormalised) sentence vector over training rows
    mu = np.mean([T0[ids[r]].mean(0) if len(ids[r]) else np.zeros(T0.shape[1], np.float32) for r in tr], 0).astype(np.float32)
    net = Net(X.shape[1], T0.copy(), mu, ncls, cfg.get("beta", 1.0), cfg.get("train_E", True),
              cfg.get("ngram", True), cfg.get("emb", True))
    dense = [net.b] + ([net.lin.weight] if cfg.get("emb", True) else [])
    sparse_g = []
    if cfg.get("ngram", True):
        sparse_g.append({"params": [net.ng.weight], "lr": cfg.get("lr", 3e-3)})
    if cfg.get("train_E", True) and cfg.get("emb", True):
        sparse_g.append({"params": [net.E.weight], "lr": cfg.get("lrE", 1e-3)})
    opts = [torch.optim.Adam(dense, lr=cfg.get("lr", 3e-3))]
    if sparse_g:
        opts.append(torch.optim.SparseAdam(sparse_g))
    yt = torch.from_numpy(y.astype(np.int64))
    swt = torch.from_numpy((sw if sw is not None else np.ones(len(y))).astype(np.float32))
    l2 = cfg.get("l2", 1e-5); l2E = cfg.get("l2E", 0.0); wdrop = cfg.get("wdrop", 0.0)
    bs = cfg.get("bs", 32)
    for ep in range(cfg.get("epochs", 10)):
        for b in batches(len(tr), bs, rng):
            rows_ = tr[b]
            ng, wp = _bags(rows_, X, ids) if not wdrop else _bags_drop(rows_, X, ids, wdrop, rng)
            logits = net(ng, wp)
            loss = (torch.nn.functional.cross_entropy(logits, yt[b], reduction="none") * swt[b]).sum() / swt[b].sum()
            reg = 0
            if cfg.get("ngram", True) and l2:
                u = torch.unique(ng[0])
                reg = reg + l2 * net.ng(u, torch.arange(len(u)), ).pow(2).sum()
            if cfg.get("emb", True):
                reg = reg + l2 * net.lin.weight.pow(2).sum()
                if l2E and cfg.get("train_E", True):
                    u = torch.unique(wp[0])
                    reg = reg + l2E * (net.E(u, torch.arange(len(u))) - net.E0[u]).pow(2).sum()
            for o in opts: o.zero_grad()
            (loss + reg).backward()
            for o in opts: o.step()
    return net


def _bags_drop(rows_, X, ids, p, rng):
    ng, wp = _bags(rows_, X, ids)
    return ng, wp  # (token dropout not used in the reported runs)


def predict(net, X, rows_, ids, bs=2048):
    out = []
    with torch.no_grad():
        for i in range(0, len(rows_), bs):
            ng, wp = _bags(rows_[i:i + bs], X, ids)
            out.append(net(ng, wp).numpy())
    return np.vstack(out)


def run(cfg, cond, budget, eval_test=False, do_cv=False):
    t0 = time.time()
    tr, y, sw, has_oos = exp.build_train(cfg, cond)
    ncfg = dict(cfg.get("feat", {}))
    X = exp._featurize_orig(dict(ncfg, emb=None), tr) if cfg.get("ngram", True) else sp.csr_matrix((len(exp.TEXTS), 1), dtype=np.float32)
    X, _ = exp.compress(X, tr) if cfg.get("ngram", True) else (X, None)
    X = X.astype(np.float32)
    ids = exp.wp_ids(); T0 = exp.table(cfg.get("table", "wordemb"))
    tf = time.time()
    net = train(cfg, X, tr, y, ids, T0, sw)
    res = dict(cfg=cfg, cond=cond, budget=budget, train_time=time.time() - tf)
    sc = lambda s: predict(net, X, exp.rows(s), ids)
    Sv, Sov = sc("val"), sc("oos_val"); yv = exp.labels("val")
    if cfg.get("prob", True):
        sm = lambda S: np.exp(S - S.max(1, keepdims=True)) / np.exp(S - S.max(1, keepdims=True)).sum(1, keepdims=True)
    else:
        sm = lambda S: S
    Sv, Sov = sm(Sv), sm(Sov)
    tv = exp.choose_t(Sv, budget, has_oos)
    res["t_val"] = float(tv); res["val"] = exp.metrics(Sv, yv, Sov, tv, has_oos)
    if do_cv:
        nfold = 5
        fold = np.zeros(len(tr), int)
        for c in np.unique(y):
            ii = np.where(y == c)[0]; fold[ii] = np.arange(len(ii)) % nfold
        Scv = np.zeros((len(tr), int(y.max()) + 1), np.float32)
        for f in range(nfold):
            te = fold == f
            nf = train(cfg, X, tr[~te], y[~te], ids, T0, None if sw is None else sw[~te])
            Scv[te] = sm(predict(nf, X, tr[te], ids))
        ins = y != exp.OOS
        tcv = exp.choose_t(Scv[ins], budget, has_oos)
        res["t_cv"] = float(tcv); res["val_cvt"] = exp.metrics(Sv, yv, Sov, tcv, has_oos)
        if has_oos:
            res["cv_neg_recall"] = float(np.mean(exp.decide(Scv[y == exp.OOS], tcv, has_oos) == -1))
    if eval_test:
        St, Sot = sm(sc("test")), sm(sc("oos_test")); yt = exp.labels("test")
        res["test_valt"] = exp.metrics(St, yt, Sot, tv, has_oos)
        if do_cv:
            res["test_cvt"] = exp.metrics(St, yt, Sot, res["t_cv"], has_oos)
    res["wall"] = time.time() - t0
    return res, net, X
