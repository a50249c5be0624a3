//! CLINC150 with the router: train on `train` (or its first N per intent), report on `val`
//! and, with `CLINC_REPORT_TEST=1` (once per change, never while tuning), `test`. `cargo run --release -p switchyard-intents --example clinc -- <data_full.json> [shots] [C] [bits] [budget]`.
use std::collections::BTreeMap;
use std::time::Instant;
use switchyard_intents::{FeatureSpec, Router, SvmSpec, TrainSpec, TrainingSet};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let data: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&args[1]).expect("read")).expect("json");
    let shots: usize = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(0);
    let c: f32 = args.get(3).and_then(|s| s.parse().ok()).unwrap_or(1.0);
    let bits: u32 = args.get(4).and_then(|s| s.parse().ok()).unwrap_or(18);
    let budget: f32 = args.get(5).and_then(|s| s.parse().ok()).unwrap_or(0.02);
    let rows = |k: &str| -> Vec<(String, String)> {
        data[k]
            .as_array()
            .expect(k)
            .iter()
            .map(|r| (r[0].as_str().unwrap().to_string(), r[1].as_str().unwrap().to_string()))
            .collect()
    };
    let mut intents: Vec<String> = rows("train").iter().map(|r| r.1.clone()).collect();
    intents.sort();
    intents.dedup();
    let id: BTreeMap<&str, usize> = intents.iter().enumerate().map(|(i, s)| (s.as_str(), i)).collect();
    let mut per = vec![0usize; intents.len()];
    let mut examples = Vec::new();
    for (t, l) in rows("train") {
        let i = id[l.as_str()];
        if shots == 0 || per[i] < shots {
            per[i] += 1;
            examples.push((t, i));
        }
    }
    let set = TrainingSet { intents: intents.clone(), examples };
    let spec = TrainSpec {
        features: FeatureSpec { hash_bits: bits, ..FeatureSpec::default() },
        svm: SvmSpec { c, ..SvmSpec::default() },
        refuse_budget: budget,
        ..TrainSpec::default()
    };
    let t0 = Instant::now();
    let router = Router::train(&set, &spec).expect("train");
    let train_s = t0.elapsed().as_secs_f64();
    let bytes = switchyard_intents::artifact::encode(&router, 0);
    let report_test = std::env::var_os("CLINC_REPORT_TEST").is_some();
    for split in ["val", "test"].into_iter().filter(|s| *s == "val" || report_test) {
        let ins = rows(split);
        let oos = rows(&format!("oos_{split}"));
        let (mut right, mut plain, mut refused) = (0, 0, 0);
        let mut times = Vec::new();
        for (t, l) in &ins {
            let s = Instant::now();
            let r = router.route(t);
            times.push(s.elapsed().as_nanos() as f64 / 1000.0);
            let ok = intents[r.intent] == *l;
            plain += usize::from(ok);
            right += usize::from(ok && r.in_scope);
            refused += usize::from(!r.in_scope);
        }
        let oos_refused = oos.iter().filter(|(t, _)| !router.route(t).in_scope).count();
        times.sort_by(f64::total_cmp);
        println!(
            "{split}: in-scope {:.2} % (plain {:.2} %), refused {:.2} %, oos recall {:.1} %, p50 {:.1} µs p99 {:.1} µs",
            100.0 * right as f64 / ins.len() as f64,
            100.0 * plain as f64 / ins.len() as f64,
            100.0 * refused as f64 / ins.len() as f64,
            100.0 * oos_refused as f64 / oos.len() as f64,
            times[times.len() / 2],
            times[times.len() * 99 / 100]
        );
    }
    println!(
        "train {train_s:.1} s, artifact {:.1} MB, rows {}, threshold {:.3}",
        bytes.len() as f64 / 1e6,
        router.weights.rows.len(),
        router.threshold
    );
}
