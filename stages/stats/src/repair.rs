//! RQ6's repair contrasts (issue 46): every repair round against round 0, not only the last, on
//! every binary outcome (McNemar) and similarity metric (Wilcoxon), and passItr@k, the share of
//! pairs valid within k feedback rounds (DPIaC-Eval's measure), with Wilson CIs.
//!
//! "As of round k" is each pair's answer at its last round ≤ k (sample 0): a pair that was valid
//! before k was not asked again and keeps that answer. A pair whose last request up to k failed
//! has no known outcome at k: it is left out of that round's tests and rates, which say how many.
//! Holm families: the final round's contrasts per (service, metric) over models, as before, and
//! the per-round contrasts per (service, metric) over models × rounds.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use doc2ci_rows::RowKey;

use crate::study::{fin, left_out_note, mcnemar_row, push_holm, row, wilcoxon_row, StatRow, Unit};
use crate::{wilcoxon, wilson_ci};

/// Why a zero-shot vs repaired test left pairs out.
const ERRORED: &str = "the last request errored";
/// The outcomes passItr@k is reported on: validity by the schema and by the service's validator.
const PASS_ITR: [&str; 2] = ["schema_ok", "lint_ok"];

type PairOf<'a> = (&'a str, &'a str, &'a str);

/// The repair rows of `stats`: `mcnemar`/`wilcoxon` with `group_b` = `{model} repaired` (the final
/// round) and `{model} round {k}` (each round), and `pass_itr` (`group_b` = `k=K`, effect the
/// share valid as of round K, CI Wilson 95%).
pub fn rows(
    units: &[Unit],
    errors: &[RowKey],
    services: &BTreeSet<&str>,
    sims: &[&'static str],
    outcomes: &[&'static str],
) -> Vec<StatRow> {
    let mut out = Vec::new();
    let zs: Vec<&Unit> = units.iter().filter(|u| u.round == 0 && u.sample == 0).collect();
    let mut max_round: BTreeMap<&str, u32> = BTreeMap::new();
    for u in units.iter().filter(|u| u.round > 0 && u.sample == 0) {
        let e = max_round.entry(u.model.as_str()).or_default();
        *e = (*e).max(u.round);
    }
    let last = max_round.values().copied().max().unwrap_or(0);
    // As of each round (u32::MAX: the final one), and which pairs are unknown then.
    let as_of: BTreeMap<u32, (HashMap<PairOf, &Unit>, BTreeSet<PairOf>)> =
        (0..=last).chain([u32::MAX]).map(|k| (k, (answers_as_of(units, k), unanswered(units, errors, k)))).collect();
    for svc in services.iter().map(|s| Some(*s)).chain([None]) {
        let svc_name = svc.unwrap_or("all");
        let errored = |m: &str, unknown: &BTreeSet<PairOf>| {
            unknown.iter().filter(|k| k.1 == m && svc.is_none_or(|s| k.0 == s)).count()
        };
        for metric in outcomes.iter().chain(sims) {
            let binary = outcomes.contains(metric);
            let contrast = |m: &str, k: u32, label: String| -> Option<StatRow> {
                let (answers, unknown) = &as_of[&k];
                let (x, y) = zero_vs_round(&zs, answers, unknown, svc, m, metric);
                let mut r = if binary {
                    (!x.is_empty()).then(|| mcnemar_row(svc_name, metric, m, &label, &x, &y))?
                } else {
                    wilcoxon_row(svc_name, metric, m, &label, &wilcoxon(&x, &y)?, x.len(), "")
                };
                r.method = left_out_note(&r.method, errored(m, unknown), ERRORED);
                Some(r)
            };
            let finals = max_round.keys().filter_map(|m| contrast(m, u32::MAX, format!("{m} repaired"))).collect();
            push_holm(&mut out, finals);
            let rounds = max_round
                .iter()
                .flat_map(|(m, &top)| (1..=top).map(move |k| (*m, k)))
                .filter_map(|(m, k)| contrast(m, k, format!("{m} round {k}")))
                .collect();
            push_holm(&mut out, rounds);
        }
        // passItr@k: valid as of round k, k = 0 (zero-shot) to the model's last round.
        for metric in PASS_ITR.iter().filter(|m| outcomes.contains(m)) {
            for (m, &top) in &max_round {
                for k in 0..=top {
                    let (answers, unknown) = &as_of[&k];
                    let (_, y) = zero_vs_round(&zs, answers, unknown, svc, m, metric);
                    if y.is_empty() {
                        continue;
                    }
                    let valid = y.iter().filter(|v| **v > 0.5).count() as u64;
                    let (lo, hi) = wilson_ci(valid, y.len() as u64, 0.95);
                    let mut r = row("pass_itr", svc_name, metric, m, &format!("k={k}"), y.len());
                    r.effect = fin(valid as f64 / y.len() as f64);
                    r.effect_name = format!("passItr@{k}");
                    (r.ci_low, r.ci_high) = (fin(lo), fin(hi));
                    r.method = left_out_note("Wilson 95% CI", errored(m, unknown), ERRORED);
                    out.push(r);
                }
            }
        }
    }
    out
}

/// (service, model, pair) of sample 0 whose last request up to round `k` errored: no answer at
/// round 0, or a repair round that failed after the last answered one. Its outcome is unknown.
fn unanswered<'a>(units: &'a [Unit], errors: &'a [RowKey], k: u32) -> BTreeSet<PairOf<'a>> {
    let mut last: HashMap<PairOf, u32> = HashMap::new();
    for u in units.iter().filter(|u| u.sample == 0 && u.round <= k) {
        let e = last.entry((u.service.as_str(), u.model.as_str(), u.pair_id.as_str())).or_insert(u.round);
        *e = (*e).max(u.round);
    }
    errors
        .iter()
        .filter(|e| e.sample == 0 && e.round <= k)
        .map(|e| ((e.service.as_str(), e.model.as_str(), e.pair_id.as_str()), e.round))
        .filter(|(key, round)| last.get(key).is_none_or(|l| round > l))
        .map(|(key, _)| key)
        .collect()
}

/// (service, model, pair) → its answer (sample 0) at its last round ≤ `k`.
fn answers_as_of(units: &[Unit], k: u32) -> HashMap<PairOf<'_>, &Unit> {
    let mut m: HashMap<PairOf, &Unit> = HashMap::new();
    for u in units.iter().filter(|u| u.sample == 0 && u.round <= k) {
        let key = (u.service.as_str(), u.model.as_str(), u.pair_id.as_str());
        match m.get(&key) {
            Some(prev) if prev.round >= u.round => {}
            _ => {
                m.insert(key, u);
            }
        }
    }
    m
}

/// Zero-shot vs as-of-round values of one model: pairs never repaired keep their zero-shot value,
/// so the contrast is the effect of running repair over the whole set. Unknown pairs are out.
fn zero_vs_round(
    zs: &[&Unit],
    answers: &HashMap<PairOf, &Unit>,
    unknown: &BTreeSet<PairOf>,
    svc: Option<&str>,
    model: &str,
    metric: &str,
) -> (Vec<f64>, Vec<f64>) {
    let (mut x, mut y) = (Vec::new(), Vec::new());
    for u in zs.iter().filter(|u| u.model == model && svc.is_none_or(|s| u.service == s)) {
        let key = (u.service.as_str(), u.model.as_str(), u.pair_id.as_str());
        if unknown.contains(&key) {
            continue;
        }
        let now = answers.get(&key).copied().unwrap_or(*u);
        if let (Some(a), Some(b)) = (u.values.get(metric), now.values.get(metric)) {
            x.push(*a);
            y.push(*b);
        }
    }
    (x, y)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unit(pair: usize, round: u32, schema_ok: bool, exact: bool) -> Unit {
        Unit {
            service: "s".into(),
            pair_id: format!("p{pair:02}"),
            model: "m".into(),
            sample: 0,
            round,
            values: [("schema_ok", schema_ok as u8 as f64), ("exact", exact as u8 as f64), ("cosine", 0.5)]
                .into_iter()
                .collect(),
        }
    }

    fn find<'a>(rows: &'a [StatRow], test: &str, metric: &str, b: &str) -> &'a StatRow {
        rows.iter()
            .find(|r| r.test == test && r.metric == metric && r.group_b == b && r.service == "s")
            .unwrap_or_else(|| panic!("no {test} {metric} {b}: {rows:?}"))
    }

    /// 20 pairs, none valid zero-shot: round 1 fixes 8, round 2 four more (one of them also
    /// exact); pair 19's round-2 request fails, so its outcome as of round 2 is unknown.
    #[test]
    fn every_round_is_tested_on_every_outcome_and_pass_itr_climbs() {
        let mut units: Vec<Unit> = (0..20).map(|i| unit(i, 0, false, false)).collect();
        for i in 0..20 {
            units.push(unit(i, 1, i < 8, false));
            if (8..12).contains(&i) {
                units.push(unit(i, 2, true, i == 8));
            } else if (12..19).contains(&i) {
                units.push(unit(i, 2, false, false));
            }
        }
        let errors = [RowKey { pair_id: "p19".into(), service: "s".into(), model: "m".into(), sample: 0, round: 2 }];
        let services = BTreeSet::from(["s"]);
        let rows = rows(&units, &errors, &services, &["cosine"], &["schema_ok", "exact"]);
        let r1 = find(&rows, "mcnemar", "schema_ok", "m round 1");
        assert_eq!((r1.n, r1.b, r1.c), (20, Some(0), Some(8)), "p19 answered round 1");
        assert!(!r1.method.contains("left out"), "{}", r1.method);
        let r2 = find(&rows, "mcnemar", "schema_ok", "m round 2");
        assert_eq!((r2.n, r2.c), (19, Some(12)));
        assert!(r2.method.ends_with("1 pair left out: the last request errored"), "{}", r2.method);
        let fin = find(&rows, "mcnemar", "schema_ok", "m repaired");
        assert_eq!((fin.n, fin.c), (r2.n, r2.c), "the final round is round 2");
        assert_eq!(find(&rows, "mcnemar", "exact", "m round 2").c, Some(1), "every binary outcome");
        let pass: Vec<(f64, u64)> = (0..=2)
            .map(|k| {
                let r = find(&rows, "pass_itr", "schema_ok", &format!("k={k}"));
                let (lo, v, hi) = (r.ci_low.unwrap(), r.effect.unwrap(), r.ci_high.unwrap());
                assert!(lo - 1e-12 <= v && v <= hi + 1e-12, "{lo} {v} {hi}");
                (r.effect.unwrap(), r.n)
            })
            .collect();
        assert_eq!(pass, [(0.0, 20), (8.0 / 20.0, 20), (12.0 / 19.0, 19)], "p19 is unknown as of round 2");
        let (lo, hi) = wilson_ci(12, 19, 0.95);
        let r = find(&rows, "pass_itr", "schema_ok", "k=2");
        assert_eq!((r.ci_low, r.ci_high), (Some(lo), Some(hi)));
    }
}
