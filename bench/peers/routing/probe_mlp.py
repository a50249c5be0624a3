"""Probe (val only): does a 1-hidden-layer MLP on the static embedding beat the linear model?"""
import numpy as np, exp, time
from sklearn.neural_network import MLPClassifier
se = dict(table="wordemb", center=True, table2="m2vraw")
for cond in ["full", "k10"]:
    tr, y = exp.train_rows(cond)
    E = exp.static_emb(dict(semb=se), tr)
    for h in [512]:
        t = time.time()
        m = MLPClassifier(hidden_layer_sizes=(h,), alpha=1e-4, max_iter=200, early_stopping=False, random_state=0)
        m.fit(E[tr], y)
        print(cond, "mlp", h, "val plain", np.mean(m.predict(E[exp.rows("val")]) == exp.labels("val")), time.time() - t, flush=True)
