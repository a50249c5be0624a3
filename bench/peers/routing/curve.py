"""Val-only: refusal-budget curves with val-calibrated and CV-calibrated thresholds."""
import sys, json, numpy as np, exp
BUDGETS = [0.0, 0.005, 0.01, 0.015, 0.02, 0.025, 0.03, 0.04]


def curve(cfg, cond, tag, out="res_curve.jsonl"):
    tr, y, sw, has_oos = exp.build_train(cfg, cond)
    X = exp.featurize(cfg, tr); X, _ = exp.compress(X, tr)
    m = exp.fit(cfg, X, tr, y, sw)
    Sv = exp.scores(m, X[exp.rows("val")], cfg); yv = exp.labels("val")
    Sov = exp.scores(m, X[exp.rows("oos_val")], cfg)
    Scv = exp.cv_scores(cfg, cond, X, tr, y, sw)
    ins = y != exp.OOS
    rows = []
    variants = [("argmax_oos", Sv, Sov, Scv, has_oos)]
    if has_oos:   # same model, but the background class never wins: refusal only by threshold
        variants.append(("thr_only", Sv[:, :exp.K], Sov[:, :exp.K], Scv[:, :exp.K], False))
    for vname, Sv, Sov, Scv, has_oos in variants:
      for b in BUDGETS:
        tv = exp.choose_t(Sv, b, has_oos); tc = exp.choose_t(Scv[ins], b, has_oos)
        r = dict(tag=tag, variant=vname, cond=cond, cfg=cfg, budget=b, t_val=float(tv), t_cv=float(tc),
                 val_valt=exp.metrics(Sv, yv, Sov, tv, has_oos), val_cvt=exp.metrics(Sv, yv, Sov, tc, has_oos))
        if (y == exp.OOS).any():
            r["cv_neg_recall"] = float(np.mean(exp.decide(Scv[y == exp.OOS], tc, has_oos) == -1))
        rows.append(r)
        a, c = r["val_valt"], r["val_cvt"]
        print(f"{tag} {vname} {cond} r={b:.3f} | val-t: acc={a['acc']:.4f} ref={a['refused']:.3f} oosv={a['oos_recall']:.2f} | cv-t={tc:.3f}: acc={c['acc']:.4f} ref={c['refused']:.3f} oosv={c['oos_recall']:.2f} bgCV={r.get('cv_neg_recall', 0):.2f}", flush=True)
    with open(out, "a") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")


if __name__ == "__main__":
    se1 = dict(table="wordemb", center=True)
    which = sys.argv[1]
    if which == "k10":
        runs = [("k10_b2_nw0.1", dict(semb=se1, idf=False, C=1, logD=14, beta=2, negw=0.1)),
                ("k10_b3_nw0.1", dict(semb=se1, idf=False, C=1, logD=14, beta=3, negw=0.1)),
                ("k10_b2_nobg", dict(semb=se1, idf=False, C=1, logD=14, beta=2, bg=False)),
                ("k10_b2_nw0.1_oostr", dict(semb=se1, idf=False, C=1, logD=14, beta=2, negw=0.1, oos_train=True))]
        if len(sys.argv) > 2:   # second round (after adding the thr_only variant)
            runs = [("k10_b2_nw0.1", runs[0][1]), ("k10_b2_nw0.05", dict(runs[0][1], negw=0.05)),
                    ("k10_b1_nw0.1", dict(runs[0][1], beta=1))]
        for tag, c in runs:
            curve(c, "k10", tag)
    else:
        for tag, c in [("full_b1_nw1", dict(semb=se1, idf=False, C=1, logD=14, beta=1, negw=1.0)),
                       ("full_b2_nw1", dict(semb=se1, idf=False, C=1, logD=14, beta=2, negw=1.0)),
                       ("full_b1_nw1_oostr", dict(semb=se1, idf=False, C=1, logD=14, beta=1, negw=1.0, oos_train=True))]:
            curve(c, "full", tag)
