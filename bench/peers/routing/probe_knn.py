"""Probe (val only): kNN-on-embedding term and confidence functions on top of the combined SVM."""
import numpy as np, exp
se = dict(table="wordemb", center=True, table2="m2vraw")
cfg = dict(semb=se, idf=False, C=1)
tr, y, sw, has_oos = exp.build_train(cfg, "full")
X = exp.featurize(cfg, tr); X, _ = exp.compress(X, tr)
m = exp.fit(cfg, X, tr, y, sw)
Sv = m.decision_function(X[exp.rows("val")]); yv = exp.labels("val")
Sov = m.decision_function(X[exp.rows("oos_val")])
E = exp.static_emb(cfg, tr)
Etr, ytr = E[tr], y
def knn(Eq):
    sim = Eq @ Etr.T
    out = np.full((len(Eq), exp.K + 1), -1.0, np.float32)
    for c in range(exp.K + 1):
        out[:, c] = sim[:, ytr == c].max(1)
    return out
Kv, Kov = knn(E[exp.rows("val")]), knn(E[exp.rows("oos_val")])
print("knn alone plain", np.mean(Kv[:, :exp.K].argmax(1) == yv))
for g in [0, 0.5, 1, 2, 4]:
    S, So = Sv + g * Kv, Sov + g * Kov
    t = exp.choose_t(S, 0.025, True)
    print("svm+%.1f*knn" % g, exp.metrics(S, yv, So, t, True))
# confidence variants on the plain svm scores
def margin(S):
    s = np.sort(S, 1); M = S.copy(); am = S.argmax(1)
    M[np.arange(len(S)), am] = s[:, -1] - s[:, -2]
    return M
for name, f in [("top", lambda S: S), ("margin", margin),
                ("softmax5", lambda S: np.exp(5 * S) / np.exp(5 * S).sum(1, keepdims=True)),
                ("softmax10", lambda S: np.exp(10 * S) / np.exp(10 * S).sum(1, keepdims=True))]:
    A, B = f(Sv), f(Sov)
    t = exp.choose_t(A, 0.025, True)
    print(name, exp.metrics(A, yv, B, t, True))
