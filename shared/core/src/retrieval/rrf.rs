//! Reciprocal rank fusion: merge ranked lists by summing `1 / (k + rank)` for every list an
//! item appears in (rank counted from 1). An item found by several lists rises; the scores of
//! the lists themselves (BM25, cosine, a remote service's) never meet, so lists on different
//! scales merge fairly. Each id comes out once: fusion is also the dedupe by `chunk_id`.

pub use switchyard_model::manifest::DEFAULT_RRF_K as DEFAULT_K;

/// Fuse `lists` (each best first; an id repeated inside one list counts at its best rank).
/// Returns `(id, score)` best first; ties keep the order in which ids were first seen.
pub fn fuse<S: AsRef<str>>(lists: &[Vec<S>], k: f64) -> Vec<(String, f64)> {
    let mut order: Vec<String> = Vec::new();
    let mut scores: std::collections::HashMap<String, f64> = std::collections::HashMap::new();
    for list in lists {
        let mut seen = std::collections::HashSet::new();
        let mut rank = 0usize;
        for id in list {
            let id = id.as_ref();
            if !seen.insert(id) {
                continue;
            }
            rank += 1;
            let entry = scores.entry(id.to_string()).or_insert_with(|| {
                order.push(id.to_string());
                0.0
            });
            *entry += 1.0 / (k + rank as f64);
        }
    }
    let mut out: Vec<(usize, String, f64)> =
        order.into_iter().enumerate().map(|(n, id)| (n, id.clone(), scores[&id])).collect();
    out.sort_by(|a, b| b.2.total_cmp(&a.2).then(a.0.cmp(&b.0)));
    out.into_iter().map(|(_, id, s)| (id, s)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-12
    }

    #[test]
    fn fusion_matches_scores_computed_by_hand() {
        // sparse: a b c ; dense: c a d ; k = 60
        // a = 1/61 + 1/62 = 0.0325225…  c = 1/63 + 1/61 = 0.0322664…
        // b = 1/62 = 0.0161290…          d = 1/63 = 0.0158730…
        let fused = fuse(&[vec!["a", "b", "c"], vec!["c", "a", "d"]], 60.0);
        let ids: Vec<&str> = fused.iter().map(|(id, _)| id.as_str()).collect();
        assert_eq!(ids, ["a", "c", "b", "d"]);
        assert!(close(fused[0].1, 1.0 / 61.0 + 1.0 / 62.0));
        assert!(close(fused[1].1, 1.0 / 63.0 + 1.0 / 61.0));
        assert!(close(fused[2].1, 1.0 / 62.0));
        assert!(close(fused[3].1, 1.0 / 63.0));
    }

    #[test]
    fn a_small_k_lets_one_lists_top_item_beat_an_item_both_lists_rank_lower() {
        // x is first in one list; y is second in one and third in the other.
        // k = 1:   x = 1/2 = 0.5,     y = 1/3 + 1/4 = 0.583 → y first.
        // k = 0.1: x = 1/1.1 = 0.909, y = 1/2.1 + 1/3.1 = 0.799 → x first (z ties x, seen later).
        let lists = [vec!["x", "y"], vec!["z", "w", "y"]];
        assert_eq!(fuse(&lists, 1.0)[0].0, "y");
        assert_eq!(fuse(&lists, 0.1)[0].0, "x");
    }

    #[test]
    fn each_id_comes_out_once_even_when_a_list_repeats_it() {
        let fused = fuse(&[vec!["a", "a", "b"], vec!["b"]], 60.0);
        assert_eq!(fused.len(), 2);
        // b: rank 2 in list 1 (the repeat of a does not count), rank 1 in list 2.
        assert_eq!(fused[0].0, "b");
        assert!(close(fused[0].1, 1.0 / 62.0 + 1.0 / 61.0));
    }

    #[test]
    fn ties_keep_first_seen_order_and_empty_lists_fuse_to_nothing() {
        let fused = fuse(&[vec!["p"], vec!["q"]], 60.0);
        assert_eq!(fused.iter().map(|(i, _)| i.as_str()).collect::<Vec<_>>(), ["p", "q"]);
        assert!(fuse::<&str>(&[vec![], vec![]], 60.0).is_empty());
    }
}
