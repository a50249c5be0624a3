"""The val-only exploration grids run for this report (each was run as an inline call; collected here
so they reproduce). Usage: python explore.py stage1_emb|stage1_comb|stage1_semb|stage2|k10|stage3|ft
Results append to res_*.jsonl; test is never touched here."""
import sys
from grid import go
se1 = dict(table="wordemb", center=True)
se = dict(table="wordemb", center=True, table2="m2vraw")
s = sys.argv[1]
if s == "stage1_emb":
    go([dict(ngram=False, emb=e, model="svm", C=C) for e in ["st", "m2v128", "m2v256", "m2v384", "tokmean"] for C in [1, 10]],
       "full", 0.025, "res_stage1_emb.jsonl")
elif s == "stage1_comb":
    go([dict(C=C) for C in [0.3, 3]] + [dict(emb="tokmean", beta=b, C=C) for b in [1, 2, 3] for C in [0.3, 1]],
       "full", 0.025, "res_stage1_comb.jsonl")
elif s == "stage1_semb":
    sembs = [dict(table="wordemb"), dict(table="wordemb", center=True), dict(table="wordemb", weight="idf"),
             dict(table="wordemb", weight="sif"), dict(table="wordemb", weight="idf", center=True),
             dict(table="wordemb", center=True, abtt=2), dict(table="m2vraw"), dict(table="m2vraw", center=True),
             dict(table="m2vraw", weight="idf", center=True)]
    cf = [dict(ngram=False, semb=x, C=1) for x in sembs]
    cf += [dict(ngram=False, semb=dict(table="wordemb", center=True, pool="meanmax"), C=1),
           dict(ngram=False, semb=se, C=1), dict(ngram=False, semb=se1, model="lr", C=10),
           dict(ngram=False, semb=se1, C=1, mc="crammer_singer"), dict(ngram=False, semb=se1, C=0.3)]
    go(cf, "full", 0.025, "res_stage1_semb.jsonl")
elif s == "stage2":
    go([dict(ngram=False, semb=se1, model="lr", C=100), dict(semb=se1, beta=1, model="lr", C=30),
        dict(semb=se1, beta=1, model="lr", C=100), dict(semb=se1, beta=1, C=1, mc="crammer_singer"),
        dict(semb=se, beta=1, C=1), dict(semb=se, wr=(1, 3), C=1), dict(semb=se, cr=(1, 5), C=1),
        dict(semb=se, cr=(3, 5), C=1), dict(semb=se, idf=False, C=1), dict(semb=se, beta=1.5, C=1),
        dict(semb=se, C=1, cw=0.7)], "full", 0.025, "res_stage2.jsonl")
elif s == "stage3":
    go([dict(semb=se1, idf=False, C=1)] + [dict(semb=se, idf=False, C=1, logD=d) for d in [16, 20, 14]],
       "full", 0.025, "res_stage3.jsonl")
elif s == "k10":
    go([dict(idf=False, C=1), dict(ngram=False, semb=se, C=1), dict(semb=se, idf=False, C=1),
        dict(semb=se, idf=False, C=0.3), dict(semb=se, idf=False, C=3), dict(semb=se, idf=False, C=1, negw=0.2),
        dict(semb=se, idf=False, C=1, bg=False), dict(semb=se, idf=False, C=1, beta=2), dict(semb=se, C=1),
        dict(semb=se1, idf=False, C=1, beta=2, negw=0.2), dict(semb=se, idf=False, C=1, beta=3, negw=0.2),
        dict(semb=se, idf=False, C=3, beta=2, negw=0.2), dict(semb=se, idf=False, C=1, beta=2, negw=0.1)],
       "k10", 0.04, "res_k10.jsonl")
elif s == "ft":
    from gridft import go as goft
    goft([dict(train_E=False, epochs=10), dict(train_E=True, epochs=10), dict(train_E=True, epochs=10, lrE=3e-3)],
         "full", 0.025, "res_ft.jsonl")
