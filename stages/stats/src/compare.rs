//! Two cells compared sample by sample (issue 46): a model against another, a prompt against the
//! old one, this month's run against last month's, joined on the content key (service, pair_id,
//! sample) so every test is paired.
//!
//! What is compared, per service and over all services (`all`), per metric:
//! - every metric: the mean difference B − A with a paired percentile bootstrap CI (the same
//!   resample indices for both sides and for every metric of a scope, [`crate::Rng`] from the
//!   seed the row states, numpy's linear percentile, as
//!   `scipy.stats.bootstrap(paired=True, method="percentile")` computes from those indices), and
//!   Cliff's δ of B's values against A's (positive: B larger);
//! - a graded metric: Wilcoxon signed-rank on A − B with scipy's defaults ([`crate::wilcoxon`]:
//!   `zero_method="wilcox"`, zero differences dropped, and p = 1 when every difference is zero);
//! - a binary outcome: McNemar on the discordant counts ([`crate::mcnemar`], exact below
//!   [`crate::MCNEMAR_EXACT_BELOW`]).
//!
//! Holm runs over one family per scope (a service, or `all`): every metric's test in it. A
//! row's `verdict` says whether B is better or worse than A after Holm at [`Params::alpha`], by
//! the metric's direction. Nothing is dropped in silence: samples only one side has (and why:
//! the other's request errored, or it never asked) and pairs whose reference differs between the
//! sides are rows of their own, out of every test. Each binary outcome that differs on a sample is
//! a `flip` row, and each graded metric's largest differences are `swing` rows.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use serde::{Deserialize, Serialize};

use crate::study::Unit;
use crate::{bootstrap_mean_ci, cliffs_delta, holm, mcnemar, mean, wilcoxon};

/// A sample of one side: (service, pair_id, sample).
pub type Key = (String, String, u32);

/// One side of a comparison: the cell's outputs, one per key.
pub struct Side<'a> {
    /// How the user named it (`model=gpt-4o,round=0`, with its warehouse).
    pub label: String,
    pub units: Vec<&'a Unit>,
    /// (service, pair_id) → a hash of the pair's reference, where the side knows it.
    pub references: HashMap<(String, String), String>,
    /// Keys the side asked whose request failed: no answer, never a wrong one.
    pub errored: HashSet<Key>,
}

/// What the comparison knows of a metric.
#[derive(Debug, Clone)]
pub struct Metric {
    pub name: String,
    /// A 0/1 outcome (McNemar, flips) rather than a graded score (Wilcoxon, swings).
    pub binary: bool,
    pub higher_is_better: bool,
    /// Said in the method of its tests (e.g. why a difference may not be the answers').
    pub caveat: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Params {
    pub seed: u64,
    pub resamples: usize,
    /// Significance level of the verdicts, after Holm.
    pub alpha: f64,
    /// Largest differences kept per graded metric and scope as `swing` rows.
    pub swings: usize,
}

impl Default for Params {
    fn default() -> Self {
        Self { seed: 20_260_601, resamples: 2000, alpha: 0.05, swings: 10 }
    }
}

/// One row of the `comparisons` table. `kind`: `test` (a metric over a scope), `flip` (a binary
/// outcome that differs on one sample), `swing` (one of a graded metric's largest differences),
/// `only_a` / `only_b` (a sample one side lacks), `reference_differs` (a pair whose reference is
/// not the same on both sides).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CompareRow {
    pub a: String,
    pub b: String,
    pub kind: String,
    /// A service, or `all`.
    pub service: String,
    /// The metric (empty for `only_*` and `reference_differs`).
    pub metric: String,
    pub pair_id: Option<String>,
    pub sample: Option<u32>,
    /// Samples in the test (1 for a sample's row).
    pub n: u64,
    /// A's and B's mean (a test) or value (a sample).
    pub value_a: Option<f64>,
    pub value_b: Option<f64>,
    /// B − A.
    pub diff: Option<f64>,
    pub ci_low: Option<f64>,
    pub ci_high: Option<f64>,
    pub statistic: Option<f64>,
    pub p: Option<f64>,
    pub p_holm: Option<f64>,
    /// Cliff's δ of B against A.
    pub cliffs_delta: Option<f64>,
    /// McNemar's discordant counts: A yes B no, A no B yes.
    pub a_only: Option<u64>,
    pub b_only: Option<u64>,
    /// How the p and the CI were obtained, or why a sample is out.
    pub method: String,
    /// `better`, `worse` (B against A, significant after Holm), `no difference`; for a sample's
    /// row `better`/`worse` by the metric's direction.
    pub verdict: String,
}

impl CompareRow {
    fn new(a: &Side, b: &Side, kind: &str, service: &str, metric: &str) -> Self {
        CompareRow {
            a: a.label.clone(),
            b: b.label.clone(),
            kind: kind.into(),
            service: service.into(),
            metric: metric.into(),
            pair_id: None,
            sample: None,
            n: 0,
            value_a: None,
            value_b: None,
            diff: None,
            ci_low: None,
            ci_high: None,
            statistic: None,
            p: None,
            p_holm: None,
            cliffs_delta: None,
            a_only: None,
            b_only: None,
            method: String::new(),
            verdict: String::new(),
        }
    }

    fn at(mut self, k: &Key) -> Self {
        self.pair_id = Some(k.1.clone());
        self.sample = Some(k.2);
        self.n = 1;
        self
    }
}

/// The verdict of B against A.
pub const BETTER: &str = "better";
pub const WORSE: &str = "worse";
pub const NO_DIFFERENCE: &str = "no difference";

fn key(u: &Unit) -> Key {
    (u.service.clone(), u.pair_id.clone(), u.sample)
}

/// Compares B with A on every metric of `metrics` both sides have.
pub fn compare(a: &Side, b: &Side, metrics: &[Metric], p: &Params) -> Vec<CompareRow> {
    let ua: BTreeMap<Key, &Unit> = a.units.iter().map(|u| (key(u), *u)).collect();
    let ub: BTreeMap<Key, &Unit> = b.units.iter().map(|u| (key(u), *u)).collect();
    let mut out = Vec::new();

    // The pairs whose references differ: not the same question, so out of every test.
    let mut differs: BTreeSet<(String, String)> = BTreeSet::new();
    for (pair, ra) in &a.references {
        if b.references.get(pair).is_some_and(|rb| rb != ra) {
            differs.insert(pair.clone());
        }
    }
    for (service, pair_id) in &differs {
        if ua.keys().chain(ub.keys()).any(|k| k.0 == *service && k.1 == *pair_id) {
            let mut r = CompareRow::new(a, b, "reference_differs", service, "");
            r.pair_id = Some(pair_id.clone());
            r.method = "the pair's reference is not the same on both sides: left out of every test".into();
            out.push(r);
        }
    }
    let same_question = |k: &Key| !differs.contains(&(k.0.clone(), k.1.clone()));
    for (mine, theirs, other, kind, name) in [(&ua, &ub, b, "only_a", "B"), (&ub, &ua, a, "only_b", "A")] {
        for k in mine.keys().filter(|k| !theirs.contains_key(*k) && same_question(k)) {
            let mut r = CompareRow::new(a, b, kind, &k.0, "").at(k);
            r.method = if other.errored.contains(k) {
                format!("{name}'s request errored: no answer to compare")
            } else {
                format!("{name} has no answer for this sample (not asked)")
            };
            out.push(r);
        }
    }

    let joined: Vec<(&Key, &Unit, &Unit)> =
        ua.iter().filter(|(k, _)| same_question(k)).filter_map(|(k, x)| Some((k, *x, *ub.get(k)?))).collect();
    let services: BTreeSet<&str> = joined.iter().map(|(k, ..)| k.0.as_str()).collect();
    for (i, scope) in services.iter().copied().chain(["all"]).enumerate() {
        // One seed per scope: every metric of it is resampled with the same indices.
        let seed = p.seed.wrapping_add(i as u64);
        if scope == "all" && services.len() == 1 {
            // One service: `all` would repeat its rows (and double the Holm family).
            continue;
        }
        let here: Vec<&(&Key, &Unit, &Unit)> = joined.iter().filter(|(k, ..)| scope == "all" || k.0 == scope).collect();
        let mut family = Vec::new();
        for m in metrics {
            let name = m.name.as_str();
            let mut both: Vec<(&Key, f64, f64)> = Vec::new();
            for (k, x, y) in &here {
                if let (Some(va), Some(vb)) = (x.values.get(name), y.values.get(name)) {
                    both.push((k, *va, *vb));
                }
            }
            if both.is_empty() {
                continue;
            }
            family.push(test_row(a, b, scope, m, &both, seed, p));
            // A sample's rows belong to its service's scope (`all` would repeat them).
            if scope == "all" {
                continue;
            }
            if m.binary {
                for (k, va, vb) in both.iter().filter(|(_, va, vb)| (*va > 0.5) != (*vb > 0.5)) {
                    out.push(sample_row(a, b, "flip", m, k, *va, *vb));
                }
            } else {
                let mut swings: Vec<&(&Key, f64, f64)> = both.iter().filter(|(_, va, vb)| va != vb).collect();
                swings.sort_by(|x, y| (y.2 - y.1).abs().total_cmp(&(x.2 - x.1).abs()).then_with(|| x.0.cmp(y.0)));
                for (k, va, vb) in swings.into_iter().take(p.swings) {
                    out.push(sample_row(a, b, "swing", m, k, *va, *vb));
                }
            }
        }
        let ps: Vec<f64> = family.iter().map(|r: &CompareRow| r.p.unwrap_or(f64::NAN)).collect();
        for (r, h) in family.iter_mut().zip(holm(&ps)) {
            r.p_holm = h.is_finite().then_some(h);
            r.verdict = verdict(r, metrics, p.alpha).into();
        }
        out.extend(family);
    }
    out
}

fn test_row(
    a: &Side,
    b: &Side,
    scope: &str,
    m: &Metric,
    both: &[(&Key, f64, f64)],
    seed: u64,
    p: &Params,
) -> CompareRow {
    let x: Vec<f64> = both.iter().map(|t| t.1).collect();
    let y: Vec<f64> = both.iter().map(|t| t.2).collect();
    let d: Vec<f64> = both.iter().map(|t| t.2 - t.1).collect();
    let mut r = CompareRow::new(a, b, "test", scope, &m.name);
    r.n = both.len() as u64;
    (r.value_a, r.value_b, r.diff) = (Some(mean(&x)), Some(mean(&y)), Some(mean(&d)));
    if let Some((lo, hi)) = bootstrap_mean_ci(&d, seed, p.resamples, 0.95) {
        (r.ci_low, r.ci_high) = (Some(lo), Some(hi));
    }
    r.cliffs_delta = Some(cliffs_delta(&y, &x));
    let ci = format!("paired percentile bootstrap of the mean difference, {} resamples, seed {seed}", p.resamples);
    if m.binary {
        let a_only = both.iter().filter(|t| t.1 > 0.5 && t.2 <= 0.5).count() as u64;
        let b_only = both.iter().filter(|t| t.1 <= 0.5 && t.2 > 0.5).count() as u64;
        let t = mcnemar(a_only, b_only);
        (r.a_only, r.b_only) = (Some(a_only), Some(b_only));
        (r.statistic, r.p) = (Some(t.statistic), Some(t.p));
        r.method = format!("McNemar {}; {ci}", t.method);
    } else {
        match wilcoxon(&x, &y) {
            Some(w) if w.n_nonzero > 0 => {
                (r.statistic, r.p) = (w.statistic.is_finite().then_some(w.statistic), w.p.is_finite().then_some(w.p));
                let zeros = both.len() - w.n_nonzero;
                r.method = format!("Wilcoxon signed-rank {}, {zeros} zero differences dropped; {ci}", w.method);
            }
            _ => {
                (r.statistic, r.p) = (Some(0.0), Some(1.0));
                r.method = format!("every difference is zero: p = 1; {ci}");
            }
        }
    }
    if let Some(c) = &m.caveat {
        r.method = format!("{}; {c}", r.method);
    }
    r
}

fn sample_row(a: &Side, b: &Side, kind: &str, m: &Metric, k: &Key, va: f64, vb: f64) -> CompareRow {
    let mut r = CompareRow::new(a, b, kind, &k.0, &m.name).at(k);
    (r.value_a, r.value_b, r.diff) = (Some(va), Some(vb), Some(vb - va));
    r.verdict = if (vb > va) == m.higher_is_better { BETTER } else { WORSE }.into();
    r
}

fn verdict(r: &CompareRow, metrics: &[Metric], alpha: f64) -> &'static str {
    let higher = metrics.iter().find(|m| m.name == r.metric).is_none_or(|m| m.higher_is_better);
    match (r.p_holm, r.diff) {
        (Some(ph), Some(d)) if ph < alpha && d != 0.0 => {
            if (d > 0.0) == higher {
                BETTER
            } else {
                WORSE
            }
        }
        _ => NO_DIFFERENCE,
    }
}

/// The resample indices [`crate::bootstrap_mean_ci`] draws for `n` values: what a peer is fed
/// to recompute the same bootstrap.
pub fn bootstrap_indices(n: usize, seed: u64, resamples: usize) -> Vec<Vec<usize>> {
    let mut rng = crate::Rng::new(seed);
    (0..resamples).map(|_| (0..n).map(|_| rng.below(n)).collect()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unit(service: &str, pair: usize, ok: bool, cosine: f64) -> Unit {
        Unit {
            service: service.into(),
            pair_id: format!("p{pair:03}"),
            model: "m".into(),
            sample: 0,
            round: 0,
            values: [("schema_ok", ok as u8 as f64), ("cosine", cosine)].into_iter().collect(),
        }
    }

    fn metrics() -> Vec<Metric> {
        vec![
            Metric { name: "cosine".into(), binary: false, higher_is_better: true, caveat: None },
            Metric { name: "schema_ok".into(), binary: true, higher_is_better: true, caveat: None },
        ]
    }

    fn side<'a>(label: &str, units: &'a [Unit]) -> Side<'a> {
        Side { label: label.into(), units: units.iter().collect(), references: HashMap::new(), errored: HashSet::new() }
    }

    fn test<'a>(rows: &'a [CompareRow], service: &str, metric: &str) -> &'a CompareRow {
        rows.iter().find(|r| r.kind == "test" && r.service == service && r.metric == metric).expect("a test row")
    }

    #[test]
    fn a_side_against_itself_has_no_difference() {
        let units: Vec<Unit> = (0..40).map(|i| unit("s", i, i % 3 == 0, i as f64 / 40.0)).collect();
        let rows = compare(&side("A", &units), &side("A", &units), &metrics(), &Params::default());
        assert!(rows.iter().all(|r| r.kind == "test"), "no flips, swings or unmatched: {rows:?}");
        for m in ["cosine", "schema_ok"] {
            let r = test(&rows, "s", m);
            assert_eq!((r.n, r.diff, r.p, r.verdict.as_str()), (40, Some(0.0), Some(1.0), NO_DIFFERENCE));
            assert_eq!((r.ci_low, r.ci_high), (Some(0.0), Some(0.0)));
        }
    }

    #[test]
    fn a_worse_side_is_worse_and_its_flips_and_swings_are_named() {
        let a: Vec<Unit> = (0..60).map(|i| unit("s", i, true, 0.9)).collect();
        // B loses validity on 30 samples, gains none, and its similarity drops on the same ones.
        let b: Vec<Unit> =
            (0..60).map(|i| unit("s", i, i >= 30, if i < 30 { 0.5 - i as f64 / 100.0 } else { 0.9 })).collect();
        let p = Params { swings: 5, ..Params::default() };
        let rows = compare(&side("A", &a), &side("B", &b), &metrics(), &p);
        let v = test(&rows, "s", "schema_ok");
        assert_eq!((v.a_only, v.b_only, v.verdict.as_str()), (Some(30), Some(0), WORSE));
        assert!(v.method.starts_with("McNemar chi2"), "{}", v.method);
        let flips: Vec<&CompareRow> = rows.iter().filter(|r| r.kind == "flip").collect();
        assert_eq!(flips.len(), 30);
        assert!(flips.iter().all(|r| r.verdict == WORSE && r.value_a == Some(1.0) && r.value_b == Some(0.0)));
        let c = test(&rows, "s", "cosine");
        assert_eq!(c.verdict, WORSE);
        assert!(c.ci_high.unwrap() < 0.0 && c.cliffs_delta.unwrap() < 0.0, "{c:?}");
        let swings: Vec<&str> =
            rows.iter().filter(|r| r.kind == "swing").map(|r| r.pair_id.as_deref().unwrap()).collect();
        assert_eq!(swings, ["p029", "p028", "p027", "p026", "p025"], "largest drops first");
    }

    #[test]
    fn unmatched_samples_and_changed_references_are_rows_not_silence() {
        let a: Vec<Unit> = (0..10).map(|i| unit("s", i, true, 0.5)).collect();
        let b: Vec<Unit> = (5..15).map(|i| unit("s", i, true, 0.5)).collect();
        let mut sa = side("A", &a);
        let mut sb = side("B", &b);
        sb.errored.insert(("s".into(), "p000".into(), 0));
        sa.references.insert(("s".into(), "p005".into()), "x".into());
        sb.references.insert(("s".into(), "p005".into()), "y".into());
        let rows = compare(&sa, &sb, &metrics(), &Params::default());
        let of = |kind: &str| rows.iter().filter(|r| r.kind == kind).collect::<Vec<_>>();
        assert_eq!(of("only_a").len(), 5);
        assert_eq!(of("only_b").len(), 5);
        assert!(of("only_a")[0].method.contains("B's request errored"), "{:?}", of("only_a")[0]);
        assert!(of("only_a")[1].method.contains("not asked"));
        assert_eq!(of("reference_differs").len(), 1);
        assert_eq!(test(&rows, "s", "cosine").n, 4, "p006..p009: p005 is another question");
    }

    #[test]
    fn holm_runs_over_each_scope_and_all_is_added_for_several_services() {
        let mut a = Vec::new();
        let mut b = Vec::new();
        for (s, shift) in [("x", 0.2), ("y", 0.0)] {
            for i in 0..30 {
                a.push(unit(s, i, true, 0.5));
                b.push(unit(s, i, true, 0.5 + shift + i as f64 / 1000.0));
            }
        }
        let rows = compare(&side("A", &a), &side("B", &b), &metrics(), &Params::default());
        assert_eq!(test(&rows, "x", "cosine").verdict, BETTER);
        assert_eq!(test(&rows, "all", "cosine").n, 60);
        let x = test(&rows, "x", "cosine");
        assert!(x.p_holm.unwrap() >= x.p.unwrap());
    }

    #[test]
    fn bootstrap_indices_are_the_ones_the_ci_uses() {
        let d: Vec<f64> = (0..17).map(|i| (i * i % 7) as f64).collect();
        let idx = bootstrap_indices(d.len(), 9, 300);
        let means: Vec<f64> = idx.iter().map(|r| r.iter().map(|&i| d[i]).sum::<f64>() / d.len() as f64).collect();
        let ci = bootstrap_mean_ci(&d, 9, 300, 0.95).unwrap();
        assert_eq!(ci, (crate::percentile(&means, 2.5), crate::percentile(&means, 97.5)));
    }
}
