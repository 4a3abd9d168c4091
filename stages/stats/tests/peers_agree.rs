//! Differential test of every statistic against scipy / statsmodels / scikit-learn / numpy
//! (`tests/peers/stats_peer.py`, run live; `pip install scipy statsmodels scikit-learn numpy`).
//!
//! Data: the real per-configuration scores of the six llm4ci models (`tests/data/llm4ci_scores.csv`,
//! extracted from the warehouse of `examples/llm4ci.toml` by `tests/data/extract_scores.py`) and
//! crafted inputs with ties, zeros and tiny n that drive every branch (exact, permutation, normal).
//! Statistics must agree to 1e-9 relative, p-values to 1e-6 (relative below 1e-6, so tiny p count too).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;

use doc2ci_stats as st;
use serde_json::{json, Value};

fn manifest_dir() -> PathBuf {
    PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"))
}

struct Real {
    /// model → pair_id → (cosine, tree_edit, rouge_l, schema_ok)
    by_model: BTreeMap<String, BTreeMap<String, (f64, f64, f64, bool)>>,
    size: BTreeMap<String, f64>,
    code: BTreeMap<String, bool>,
}

fn real() -> Real {
    let path = manifest_dir().join("tests/data/llm4ci_scores.csv");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut lines = text.lines();
    assert_eq!(
        lines.next(),
        Some("pair_id,model,cosine,tree_edit,rouge_l,schema_ok,size_b,code"),
        "header of {}",
        path.display()
    );
    let mut r = Real { by_model: BTreeMap::new(), size: BTreeMap::new(), code: BTreeMap::new() };
    for (i, line) in lines.enumerate() {
        let f: Vec<&str> = line.split(',').collect();
        assert_eq!(f.len(), 8, "{}:{}", path.display(), i + 2);
        let p = |s: &str| s.parse::<f64>().unwrap_or_else(|e| panic!("{}:{}: {e}", path.display(), i + 2));
        r.by_model
            .entry(f[1].to_string())
            .or_default()
            .insert(f[0].to_string(), (p(f[2]), p(f[3]), p(f[4]), f[5] == "true"));
        if !f[6].is_empty() {
            r.size.insert(f[1].to_string(), p(f[6]));
            r.code.insert(f[1].to_string(), f[7] == "true");
        }
    }
    assert_eq!(r.by_model.len(), 6, "six llm4ci models");
    r
}

/// Deterministic pseudo-random values rounded to `step`, so ties are plentiful.
fn values(seed: u64, n: usize, step: f64) -> Vec<f64> {
    let mut rng = st::Rng::new(seed);
    (0..n).map(|_| ((rng.next_u64() % 1000) as f64 / 1000.0 / step).round() * step).collect()
}

fn close(ours: f64, peer: &Value, tol: f64, what: &str) {
    match peer.as_f64() {
        None => assert!(ours.is_nan(), "{what}: ours {ours}, peer null/NaN"),
        Some(p) => {
            let err = (ours - p).abs();
            let rel = err / p.abs().max(f64::MIN_POSITIVE);
            assert!(err <= tol * p.abs().max(1.0) || rel <= tol, "{what}: ours {ours:e}, peer {p:e} (|Δ| {err:e})");
        }
    }
}

/// Tolerance for a p-value: 1e-6 absolute, and relative once it is smaller than that.
fn close_p(ours: f64, peer: &Value, what: &str) {
    let p = peer.as_f64().unwrap_or(f64::NAN);
    if p.is_nan() {
        assert!(ours.is_nan(), "{what}: ours {ours}, peer NaN");
        return;
    }
    let err = (ours - p).abs();
    assert!(err <= 1e-6 && (p > 1e-6 || err <= 1e-6 * p.max(1e-300)), "{what}: p ours {ours:e}, peer {p:e}");
}

enum Ours {
    Test(Option<st::TestResult>),
    Wil(Option<st::Wilcoxon>),
    Mwu(Option<st::TestResult>, f64),
    Holm(Vec<f64>),
    Kappa(Option<f64>),
    Pair(f64, f64),
    Boot(f64, f64),
    Value(f64),
}

/// One case: its name, the peer's input, and our answer.
type Case = (String, Value, Ours);

/// Crafted inputs: ties, zeros, tiny n; every method branch.
fn crafted_cases() -> Vec<Case> {
    let mut cases: Vec<Case> = Vec::new();
    let mut add = |name: String, input: Value, ours: Ours| cases.push((name, input, ours));
    let wil_cases: Vec<(&str, Vec<f64>, Vec<f64>)> = vec![
        ("n=5 exact", vec![1.1, 2.3, 0.4, 5.0, 3.3], vec![0.2, 2.9, 1.0, 1.0, 0.2]),
        ("n=6 one sign exact", vec![2.0, 3.0, 4.5, 5.0, 6.25, 7.0], vec![1.0; 6]),
        ("n=10 ties permutation", values(1, 10, 0.25), values(2, 10, 0.25)),
        (
            "n=10 zeros permutation",
            vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0],
            vec![1.0, 2.5, 2.0, 4.0, 3.0, 7.5, 1.0, 8.0, 11.0, 0.0],
        ),
        ("n=13 tie+zero permutation", values(3, 13, 0.1), values(4, 13, 0.1)),
        ("n=14 ties normal", values(5, 14, 0.1), values(6, 14, 0.1)),
        ("n=30 exact", values(7, 30, 0.001), values(8, 30, 0.001)),
        ("n=50 exact", values(9, 50, 0.0001), values(10, 50, 0.0001)),
        ("n=51 normal", values(11, 51, 0.0001), values(12, 51, 0.0001)),
        ("n=200 ties zeros normal", values(13, 200, 0.05), values(14, 200, 0.05)),
    ];
    for (name, x, y) in wil_cases {
        add(format!("wilcoxon {name}"), json!({"kind": "wilcoxon", "x": x, "y": y}), Ours::Wil(st::wilcoxon(&x, &y)));
    }
    let mwu_cases: Vec<(&str, Vec<f64>, Vec<f64>)> = vec![
        ("3 vs 4 exact", vec![0.1, 0.5, 0.9], vec![0.2, 0.3, 0.4, 0.6]),
        (
            "8 vs 100 exact",
            values(20, 8, 1e-9).iter().map(|v| v + 0.5e-9).collect(),
            (0..100).map(|i| i as f64 / 100.0).collect(),
        ),
        ("5 vs 7 ties normal", values(21, 5, 0.25), values(22, 7, 0.25)),
        ("20 vs 25 normal", values(23, 20, 0.001), values(24, 25, 0.001)),
        ("300 vs 200 ties normal", values(25, 300, 0.05), values(26, 200, 0.05)),
    ];
    for (name, x, y) in mwu_cases {
        add(
            format!("mannwhitneyu {name}"),
            json!({"kind": "mannwhitneyu", "x": x, "y": y}),
            Ours::Mwu(st::mann_whitney(&x, &y), st::cliffs_delta(&x, &y)),
        );
    }
    let blocks: Vec<Vec<f64>> = (0..12).map(|i| values(30 + i, 4, 0.25)).collect();
    add(
        "friedman crafted ties 12x4".into(),
        json!({"kind": "friedman", "blocks": blocks}),
        Ours::Test(st::friedman(&blocks)),
    );
    let blocks3: Vec<Vec<f64>> = vec![vec![1.0, 2.0, 3.0], vec![2.0, 1.0, 3.0]];
    add("friedman 2 blocks".into(), json!({"kind": "friedman", "blocks": blocks3}), Ours::Test(st::friedman(&blocks3)));
    let sp: Vec<(&str, Vec<f64>, Vec<f64>)> = vec![
        ("n=3", vec![1.0, 2.0, 3.0], vec![0.3, 0.1, 0.9]),
        ("n=4 ties", vec![7.0, 8.0, 12.0, 7.0], vec![0.57, 0.60, 0.58, 0.57]),
        // A perfect correlation has p = 0 analytically; numpy's last-bit rho (0.9999999999999999) makes
        // it 1e-24, so a near-perfect case stands in for it.
        ("near-perfect", vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0], vec![2.0, 4.0, 6.0, 10.0, 8.0, 12.0]),
        ("n=100 ties", values(40, 100, 0.1), values(41, 100, 0.1)),
    ];
    for (name, x, y) in sp {
        add(format!("spearman {name}"), json!({"kind": "spearman", "x": x, "y": y}), Ours::Test(st::spearman(&x, &y)));
    }
    for (b, c) in [(0u64, 0u64), (0, 5), (3, 9), (12, 12), (24, 0), (13, 12), (30, 12), (100, 140), (500, 20)] {
        add(
            format!("mcnemar b={b} c={c}"),
            json!({"kind": "mcnemar", "b": b, "c": c}),
            Ours::Test(Some(st::mcnemar(b, c))),
        );
    }
    let ps = vec![0.01, 0.04, 0.03, 0.04, 0.5, 1e-12, 0.2, 0.2];
    add("holm ties".into(), json!({"kind": "holm", "p": ps}), Ours::Holm(st::holm(&ps)));
    let a = ["usable", "partial", "unusable", "usable", "usable", "partial", "unusable", "partial", "usable", "usable"];
    let b =
        ["usable", "usable", "unusable", "usable", "partial", "partial", "unusable", "unusable", "usable", "usable"];
    add("kappa 3-point".into(), json!({"kind": "kappa", "a": a, "b": b}), Ours::Kappa(st::cohen_kappa(&a, &b)));
    let b2 = ["usable", "usable", "usable", "usable", "usable", "usable", "usable", "usable", "usable", "partial"];
    add("kappa skewed".into(), json!({"kind": "kappa", "a": a, "b": b2}), Ours::Kappa(st::cohen_kappa(&a, &b2)));
    let v = values(50, 37, 0.001);
    add(
        "percentile".into(),
        json!({"kind": "percentile", "x": v, "q": [2.5, 97.5]}),
        Ours::Pair(st::percentile(&v, 2.5), st::percentile(&v, 97.5)),
    );
    let boot = st::bootstrap_means(&v, 42, 999);
    add(
        "percentile of our bootstrap".into(),
        json!({"kind": "percentile", "x": boot, "q": [2.5, 97.5]}),
        Ours::Pair(
            st::bootstrap_mean_ci(&v, 42, 999, 0.95).unwrap().0,
            st::bootstrap_mean_ci(&v, 42, 999, 0.95).unwrap().1,
        ),
    );
    for (n, c, k) in [(10u64, 3u64, 1u64), (10, 3, 5), (20, 0, 5), (5, 4, 2), (200, 17, 10)] {
        add(
            format!("pass@k n={n} c={c} k={k}"),
            json!({"kind": "pass_at_k", "n": n, "c": c, "k": k}),
            Ours::Value(st::pass_at_k(n, c, k)),
        );
    }
    cases
}

/// The six llm4ci models on their 725 common GitHub Actions pairs, tested as the study tests them.
fn real_cases() -> Vec<Case> {
    let mut cases: Vec<Case> = Vec::new();
    let mut add = |name: String, input: Value, ours: Ours| cases.push((name, input, ours));
    let r = real();
    let models: Vec<&String> = r.by_model.keys().collect();
    let pairs: Vec<&String> =
        r.by_model[models[0]].keys().filter(|p| models.iter().all(|m| r.by_model[*m].contains_key(*p))).collect();
    assert!(pairs.len() > 500, "common pairs: {}", pairs.len());
    for (mi, metric) in ["cosine", "tree_edit", "rouge_l"].iter().enumerate() {
        let get = |m: &String, p: &String| {
            let v = r.by_model[m][p];
            [v.0, v.1, v.2][mi]
        };
        let blocks: Vec<Vec<f64>> = pairs.iter().map(|p| models.iter().map(|m| get(m, p)).collect()).collect();
        add(
            format!("friedman real {metric}"),
            json!({"kind": "friedman", "blocks": blocks}),
            Ours::Test(st::friedman(&blocks)),
        );
        let mut wil_p = Vec::new();
        for i in 0..models.len() {
            for j in i + 1..models.len() {
                let x: Vec<f64> = pairs.iter().map(|p| get(models[i], p)).collect();
                let y: Vec<f64> = pairs.iter().map(|p| get(models[j], p)).collect();
                let w = st::wilcoxon(&x, &y);
                wil_p.push(w.as_ref().map_or(f64::NAN, |w| w.p));
                add(
                    format!("wilcoxon real {metric} {} vs {}", models[i], models[j]),
                    json!({"kind": "wilcoxon", "x": x, "y": y}),
                    Ours::Wil(w),
                );
                // A small real subsample: the exact branch on real values.
                let (xs, ys) = (&x[..20], &y[..20]);
                add(
                    format!("wilcoxon real n=20 {metric} {} vs {}", models[i], models[j]),
                    json!({"kind": "wilcoxon", "x": xs, "y": ys}),
                    Ours::Wil(st::wilcoxon(xs, ys)),
                );
            }
        }
        add(format!("holm real {metric}"), json!({"kind": "holm", "p": wil_p}), Ours::Holm(st::holm(&wil_p)));
        // General vs code, per configuration (open models only), as RQ2.
        let (mut gen, mut code) = (Vec::new(), Vec::new());
        for m in &models {
            let Some(&is_code) = r.code.get(*m) else { continue };
            let vals = pairs.iter().map(|p| get(m, p));
            if is_code {
                code.extend(vals)
            } else {
                gen.extend(vals)
            }
        }
        add(
            format!("mannwhitneyu real {metric} general vs code"),
            json!({"kind": "mannwhitneyu", "x": gen, "y": code}),
            Ours::Mwu(st::mann_whitney(&gen, &code), st::cliffs_delta(&gen, &code)),
        );
        // Size vs per-model mean.
        let (sizes, means): (Vec<f64>, Vec<f64>) = models
            .iter()
            .filter_map(|m| {
                r.size.get(*m).map(|s| (*s, pairs.iter().map(|p| get(m, p)).sum::<f64>() / pairs.len() as f64))
            })
            .unzip();
        add(
            format!("spearman real size vs {metric}"),
            json!({"kind": "spearman", "x": sizes, "y": means}),
            Ours::Test(st::spearman(&sizes, &means)),
        );
        let all: Vec<f64> = pairs.iter().map(|p| get(models[0], p)).collect();
        add(
            format!("bootstrap real {metric} (scipy, loose)"),
            json!({"kind": "bootstrap", "x": all, "resamples": 2000}),
            Ours::Boot(
                st::bootstrap_mean_ci(&all, 1, 2000, 0.95).unwrap().0,
                st::bootstrap_mean_ci(&all, 1, 2000, 0.95).unwrap().1,
            ),
        );
    }
    for i in 0..models.len() {
        for j in i + 1..models.len() {
            let (mut b, mut c) = (0, 0);
            for p in &pairs {
                match (r.by_model[models[i]][*p].3, r.by_model[models[j]][*p].3) {
                    (true, false) => b += 1,
                    (false, true) => c += 1,
                    _ => {}
                }
            }
            add(
                format!("mcnemar real schema_ok {} vs {}", models[i], models[j]),
                json!({"kind": "mcnemar", "b": b, "c": c}),
                Ours::Test(Some(st::mcnemar(b, c))),
            );
        }
    }
    cases
}

/// The peer's answer to every case, from one run of `peers/stats.py`.
fn peer_answers(cases: &[Case]) -> Vec<Value> {
    let dir = std::env::temp_dir().join(format!("doc2ci-stats-peer-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let input = dir.join("cases.json");
    let inputs: Vec<&Value> = cases.iter().map(|c| &c.1).collect();
    std::fs::write(&input, serde_json::to_vec(&inputs).unwrap()).unwrap();
    let out = Command::new("python3")
        .current_dir(manifest_dir().join("../.."))
        .args(["-m", "peers.stats"])
        .arg(&input)
        .output()
        .expect("python3 runs");
    assert!(out.status.success(), "peers/stats.py failed:\n{}", String::from_utf8_lossy(&out.stderr));
    let peer: Vec<Value> = serde_json::from_slice(&out.stdout).expect("peer prints JSON");
    assert_eq!(peer.len(), cases.len());
    let _ = std::fs::remove_dir_all(&dir);
    peer
}

/// Asserts that our answer to one case agrees with the peer's; counts the p-value method taken.
fn agree(name: &str, ours: &Ours, pv: &Value, methods: &mut BTreeMap<String, usize>) {
    match ours {
        Ours::Test(t) => match t {
            None => assert!(pv["statistic"].is_null() && pv["p"].is_null(), "{name}: ours None, peer {pv}"),
            Some(t) => {
                close(t.statistic, &pv["statistic"], 1e-9, name);
                close_p(t.p, &pv["p"], name);
                *methods.entry(format!("{} {}", name.split(' ').next().unwrap(), t.method)).or_default() += 1;
            }
        },
        Ours::Wil(w) => {
            let w = w.as_ref().expect(name);
            close(w.statistic, &pv["statistic"], 1e-9, name);
            close_p(w.p, &pv["p"], name);
            close(w.rank_biserial, &pv["rank_biserial"], 1e-9, name);
            *methods.entry(format!("wilcoxon {}", w.method)).or_default() += 1;
        }
        Ours::Mwu(t, delta) => {
            let t = t.as_ref().expect(name);
            close(t.statistic, &pv["statistic"], 1e-9, name);
            close_p(t.p, &pv["p"], name);
            close(*delta, &pv["cliffs_delta"], 1e-9, name);
            *methods.entry(format!("mannwhitneyu {}", t.method)).or_default() += 1;
        }
        Ours::Holm(h) => {
            let pa = pv["adjusted"].as_array().unwrap();
            assert_eq!(h.len(), pa.len(), "{name}");
            for (o, p) in h.iter().zip(pa) {
                close_p(*o, p, name);
            }
        }
        Ours::Kappa(k) => close(k.expect(name), &pv["kappa"], 1e-9, name),
        Ours::Pair(lo, hi) => {
            close(*lo, &pv["low"], 1e-12, name);
            close(*hi, &pv["high"], 1e-12, name);
        }
        Ours::Boot(lo, hi) => {
            // Different resamples: agree to a small fraction of the interval's width.
            let (pl, ph) = (pv["low"].as_f64().unwrap(), pv["high"].as_f64().unwrap());
            let w = ph - pl;
            assert!(
                (lo - pl).abs() < 0.1 * w && (hi - ph).abs() < 0.1 * w,
                "{name}: ours [{lo}, {hi}], scipy [{pl}, {ph}]"
            );
        }
        Ours::Value(v) => close(*v, &pv["value"], 1e-12, name),
    }
}

#[test]
fn statistics_match_scipy_statsmodels_sklearn() {
    let mut cases = crafted_cases();
    cases.extend(real_cases());
    let peer = peer_answers(&cases);
    let mut methods: BTreeMap<String, usize> = BTreeMap::new();
    for ((name, _, ours), pv) in cases.iter().zip(&peer) {
        agree(name, ours, pv, &mut methods);
    }
    // Every p-value branch was exercised.
    for m in [
        "wilcoxon exact",
        "wilcoxon permutation",
        "wilcoxon normal",
        "mannwhitneyu exact",
        "mannwhitneyu normal",
        "mcnemar binomial",
        "mcnemar chi2",
    ] {
        assert!(methods.contains_key(m), "no case took the {m} branch: {methods:?}");
    }
    eprintln!("{} cases agree; branches {methods:?}", cases.len());
}

/// Issue 46: `compare` of every pair of the six llm4ci models against a pandas join and the same
/// tests in scipy/statsmodels: the joined and unmatched samples, each metric's mean difference,
/// its paired bootstrap CI (scipy.stats.bootstrap fed our resample indices), Wilcoxon, McNemar,
/// Cliff's δ (counted pair by pair), Holm over the metrics, the flipped samples and the swings.
#[test]
fn compare_matches_a_pandas_join_and_scipy_statsmodels_on_every_model_pair() {
    use st::compare::{compare, Metric, Params, Side};
    use st::study::Unit;
    let r = real();
    let models: Vec<&String> = r.by_model.keys().collect();
    assert_eq!(models.len(), 6);
    let names = ["cosine", "tree_edit", "rouge_l", "schema_ok"];
    let metrics: Vec<Metric> = names
        .iter()
        .map(|n| Metric { name: n.to_string(), binary: *n == "schema_ok", higher_is_better: true, caveat: None })
        .collect();
    let p = Params { resamples: 1000, ..Params::default() };
    // Each side misses a few pairs (a different few per model), so both unmatched lists are tested.
    let side_units = |model: &str, drop: usize| -> Vec<Unit> {
        r.by_model[model]
            .iter()
            .enumerate()
            .filter(|(i, _)| i % 97 != drop)
            .map(|(_, (pid, v))| Unit {
                service: "github-actions".into(),
                pair_id: pid.clone(),
                model: model.into(),
                sample: 0,
                round: 0,
                values: [("cosine", v.0), ("tree_edit", v.1), ("rouge_l", v.2), ("schema_ok", v.3 as u8 as f64)]
                    .into_iter()
                    .collect(),
            })
            .collect()
    };
    let rows_json = |units: &[Unit]| -> Vec<Value> {
        units
            .iter()
            .map(|u| {
                let mut o = serde_json::Map::new();
                o.insert("pair_id".into(), json!(u.pair_id));
                for n in names {
                    o.insert(n.into(), json!(u.values[n]));
                }
                Value::Object(o)
            })
            .collect()
    };
    let mut cases = Vec::new();
    let mut ours = Vec::new();
    let mut blob: Vec<u8> = Vec::new();
    for i in 0..models.len() {
        for j in i + 1..models.len() {
            let (ua, ub) = (side_units(models[i], i), side_units(models[j], j + 50));
            fn side<'a>(label: &str, u: &'a [Unit]) -> Side<'a> {
                Side {
                    label: label.into(),
                    units: u.iter().collect(),
                    references: Default::default(),
                    errored: Default::default(),
                }
            }
            let rows = compare(&side(models[i], &ua), &side(models[j], &ub), &metrics, &p);
            let test = rows.iter().find(|r| r.kind == "test").expect("tests");
            let seed: u64 = test.method.rsplit("seed ").next().unwrap().parse().expect("the row states its seed");
            let n = test.n as usize;
            let offset = blob.len();
            for resample in st::compare::bootstrap_indices(n, seed, p.resamples) {
                blob.extend(resample.iter().flat_map(|&k| (k as u16).to_le_bytes()));
            }
            cases.push(json!({
                "a": rows_json(&ua), "b": rows_json(&ub), "resamples": p.resamples, "n_indices": n,
                "offset": offset, "swings": p.swings,
                "metrics": metrics.iter().map(|m| json!({"name": m.name, "binary": m.binary})).collect::<Vec<_>>(),
            }));
            ours.push((format!("{} vs {}", models[i], models[j]), rows));
        }
    }
    let dir = std::env::temp_dir().join(format!("doc2ci-compare-peer-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (input, indices) = (dir.join("cases.json"), dir.join("indices.bin"));
    std::fs::write(&input, serde_json::to_vec(&cases).unwrap()).unwrap();
    std::fs::write(&indices, &blob).unwrap();
    let out = Command::new("python3")
        .current_dir(manifest_dir().join("../.."))
        .args(["-m", "peers.compare"])
        .arg(&input)
        .arg(&indices)
        .output()
        .expect("python3 runs");
    let _ = std::fs::remove_dir_all(&dir);
    assert!(out.status.success(), "peers/compare.py failed:\n{}", String::from_utf8_lossy(&out.stderr));
    let peer: Vec<Value> = serde_json::from_slice(&out.stdout).expect("peer prints JSON");
    assert_eq!(peer.len(), 15, "every pair of the six models");
    let (mut flipped, mut discordant_exact) = (0usize, 0usize);
    for ((name, rows), pv) in ours.iter().zip(&peer) {
        let ids = |kind: &str, metric: &str| -> Vec<String> {
            let mut v: Vec<String> = rows
                .iter()
                .filter(|r| r.kind == kind && r.metric == metric)
                .map(|r| r.pair_id.clone().unwrap())
                .collect();
            if kind != "swing" {
                v.sort();
            }
            v
        };
        let strings = |v: &Value| -> Vec<String> {
            v.as_array().unwrap().iter().map(|s| s.as_str().unwrap().to_string()).collect()
        };
        assert_eq!(ids("only_a", ""), strings(&pv["only_a"]), "{name}: only in A");
        assert_eq!(ids("only_b", ""), strings(&pv["only_b"]), "{name}: only in B");
        assert!(!ids("only_a", "").is_empty() && !ids("only_b", "").is_empty());
        for m in names {
            let t = rows.iter().find(|r| r.kind == "test" && r.metric == m).unwrap();
            let q = &pv["tests"][m];
            let what = format!("{name} {m}");
            assert_eq!(t.n, q["n"].as_u64().unwrap(), "{what}: n");
            close(t.value_a.unwrap(), &q["mean_a"], 1e-12, &what);
            close(t.value_b.unwrap(), &q["mean_b"], 1e-12, &what);
            close(t.diff.unwrap(), &q["diff"], 1e-12, &what);
            close(t.ci_low.unwrap(), &q["ci_low"], 1e-12, &format!("{what} CI low"));
            close(t.ci_high.unwrap(), &q["ci_high"], 1e-12, &format!("{what} CI high"));
            close(t.cliffs_delta.unwrap(), &q["cliffs_delta"], 1e-12, &format!("{what} Cliff's δ"));
            close(t.statistic.unwrap(), &q["statistic"], 1e-9, &format!("{what} statistic"));
            close_p(t.p.unwrap(), &q["p"], &what);
            close_p(t.p_holm.unwrap(), &q["p_holm"], &format!("{what} Holm"));
            if m == "schema_ok" {
                assert_eq!((t.a_only, t.b_only), (q["a_only"].as_u64(), q["b_only"].as_u64()), "{what}");
                assert_eq!(ids("flip", m), strings(&pv["flips"][m]), "{what}: flipped samples");
                flipped += ids("flip", m).len();
                discordant_exact += t.method.contains("binomial") as usize;
            } else {
                assert_eq!(ids("swing", m), strings(&pv["swings"][m]), "{what}: largest swings");
            }
        }
    }
    assert!(flipped > 100, "the real models differ on many samples: {flipped}");
    eprintln!("15 model pairs agree; {flipped} flipped samples; {discordant_exact} exact McNemar");
}
