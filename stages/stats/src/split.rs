//! The study's numbers on the pairs a model cannot have recalled: each model's means on the pairs
//! its contamination screen found clean, and either side of its knowledge cutoff, with the time
//! split's test (issue 45).
//!
//! Rows: `subset_mean` (like `mean`, `group_b` names the subset: `screen-clean`,
//! `after YYYY-MM-DD`, `before YYYY-MM-DD`) and `time_split` (Mann–Whitney U of the pairs
//! published after the cutoff against those before, Cliff's δ with a percentile-bootstrap CI;
//! `b`/`c` hold how many pairs are after and before). Zero-shot units only, as every mean.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use doc2ci_rows::ModelRow;

use crate::study::{fin, row, tested_metrics, Params, StatRow, Unit};
use crate::{bootstrap_mean_ci, cliffs_delta, holm, mann_whitney, mean, percentile, Rng};

/// The `group_b` of the screen-clean subset.
pub const SCREEN_CLEAN: &str = "screen-clean";

/// When one pair was published (see `doc2ci_rows::Dated`).
#[derive(Debug, Clone, Default)]
pub struct PairDate {
    pub published: Option<String>,
    pub not_before: Option<String>,
}

/// Pairs by (service, pair_id).
pub type PairKey = (String, String);

/// A model's subset of pairs, named.
pub struct Subset<'a> {
    pub model: &'a str,
    pub label: String,
    pub pairs: HashSet<(&'a str, &'a str)>,
}

fn zero_shot(units: &[Unit]) -> impl Iterator<Item = &Unit> {
    units.iter().filter(|u| u.round == 0 && u.sample == 0)
}

/// `subset_mean` rows: per subset, per service and `all`, per tested metric the subset has.
pub fn subset_means(units: &[Unit], subsets: &[Subset], p: &Params) -> Vec<StatRow> {
    let metrics = tested_metrics(&p.metrics);
    let mut out = Vec::new();
    let mut seed = p.seed ^ 0x5b5e7;
    for s in subsets {
        let mine: Vec<&Unit> = zero_shot(units)
            .filter(|u| u.model == s.model && s.pairs.contains(&(u.service.as_str(), u.pair_id.as_str())))
            .collect();
        let services: BTreeSet<&str> = mine.iter().map(|u| u.service.as_str()).collect();
        for svc in std::iter::once("all").chain(services) {
            for &metric in &metrics {
                let v: Vec<f64> = mine
                    .iter()
                    .filter(|u| svc == "all" || u.service == svc)
                    .filter_map(|u| u.values.get(metric).copied())
                    .collect();
                if v.is_empty() {
                    continue;
                }
                let mut r = row("subset_mean", svc, metric, s.model, &s.label, v.len());
                r.effect = fin(mean(&v));
                r.effect_name = "mean".into();
                if p.ci_metrics.iter().any(|m| m == metric) {
                    seed = seed.wrapping_add(1);
                    if let Some((lo, hi)) = bootstrap_mean_ci(&v, seed, p.resamples, 0.95) {
                        (r.ci_low, r.ci_high) = (Some(lo), Some(hi));
                        r.method = format!("percentile bootstrap, {} resamples", p.resamples);
                    }
                }
                out.push(r);
            }
        }
    }
    out
}

/// Each model's screen-clean pairs: `clean` lists (model, service, pair_id) whose real reference
/// the screen measured and did not flag.
pub fn clean_subsets<'a>(clean: &'a [(String, String, String)]) -> Vec<Subset<'a>> {
    let mut by: BTreeMap<&str, HashSet<(&str, &str)>> = BTreeMap::new();
    for (m, s, p) in clean {
        by.entry(m.as_str()).or_default().insert((s.as_str(), p.as_str()));
    }
    by.into_iter().map(|(model, pairs)| Subset { model, label: SCREEN_CLEAN.into(), pairs }).collect()
}

/// Either side of each model's cutoff: pairs published after it, and on or before it.
pub fn cutoff_subsets<'a>(
    units: &'a [Unit],
    models: &'a [ModelRow],
    dates: &HashMap<PairKey, PairDate>,
) -> Vec<Subset<'a>> {
    let mut out = Vec::new();
    for m in models {
        let Some(cut) = m.knowledge_cutoff.as_deref() else { continue };
        let (mut after, mut before) = (HashSet::new(), HashSet::new());
        for u in zero_shot(units).filter(|u| u.model == m.model) {
            let Some(d) = dates.get(&(u.service.clone(), u.pair_id.clone())) else { continue };
            let Some(published) = d.published.as_deref() else { continue };
            let side = if published > cut { &mut after } else { &mut before };
            side.insert((u.service.as_str(), u.pair_id.as_str()));
        }
        if !after.is_empty() {
            out.push(Subset { model: &m.model, label: format!("after {cut}"), pairs: after });
        }
        if !before.is_empty() {
            out.push(Subset { model: &m.model, label: format!("before {cut}"), pairs: before });
        }
    }
    out
}

/// `time_split` rows: per model with a cutoff and dated pairs on both sides, per service and
/// `all`, per tested metric. Holm over the models of one (service, metric).
pub fn time_split(units: &[Unit], models: &[ModelRow], dates: &HashMap<PairKey, PairDate>, p: &Params) -> Vec<StatRow> {
    let metrics = tested_metrics(&p.metrics);
    let mut families: BTreeMap<(String, &str), Vec<StatRow>> = BTreeMap::new();
    let mut seed = p.seed ^ 0x71e5;
    for m in models {
        let Some(cut) = m.knowledge_cutoff.as_deref() else { continue };
        // (service, after?, sure?, values)
        let mine: Vec<(&str, bool, bool, &BTreeMap<&'static str, f64>)> = zero_shot(units)
            .filter(|u| u.model == m.model)
            .filter_map(|u| {
                let d = dates.get(&(u.service.clone(), u.pair_id.clone()))?;
                let published = d.published.as_deref()?;
                let sure = d.not_before.as_deref().is_some_and(|nb| nb >= cut);
                Some((u.service.as_str(), published > cut, sure, &u.values))
            })
            .collect();
        let services: BTreeSet<&str> = mine.iter().map(|x| x.0).collect();
        for svc in std::iter::once("all").chain(services) {
            let here: Vec<_> = mine.iter().filter(|x| svc == "all" || x.0 == svc).collect();
            let sure = here.iter().filter(|x| x.1 && x.2).count();
            for &metric in &metrics {
                let side = |after: bool| -> Vec<f64> {
                    here.iter().filter(|x| x.1 == after).filter_map(|x| x.3.get(metric).copied()).collect()
                };
                let (a, b) = (side(true), side(false));
                let Some(t) = mann_whitney(&a, &b) else { continue };
                let mut r = row("time_split", svc, metric, &m.model, cut, a.len() + b.len());
                r.statistic = fin(t.statistic);
                r.p = fin(t.p);
                r.effect = fin(cliffs_delta(&a, &b));
                r.effect_name = "cliffs_delta".into();
                (r.b, r.c) = (Some(a.len() as u64), Some(b.len() as u64));
                r.method = format!("{}; {sure} of {} after by a re-crawl", t.method, a.len());
                if p.ci_metrics.iter().any(|x| x == metric) {
                    seed = seed.wrapping_add(1);
                    if let Some((lo, hi)) = bootstrap_delta_ci(&a, &b, seed, p.resamples, 0.95) {
                        (r.ci_low, r.ci_high) = (Some(lo), Some(hi));
                        r.method.push_str(&format!("; δ CI: percentile bootstrap, {} resamples", p.resamples));
                    }
                }
                families.entry((svc.to_string(), metric)).or_default().push(r);
            }
        }
    }
    let mut out = Vec::new();
    for (_, mut fam) in families {
        let ps: Vec<f64> = fam.iter().map(|r| r.p.unwrap_or(f64::NAN)).collect();
        for (r, h) in fam.iter_mut().zip(holm(&ps)) {
            r.p_holm = fin(h);
        }
        out.append(&mut fam);
    }
    out
}

/// Percentile bootstrap CI of Cliff's δ, each sample resampled on its own (the two groups are
/// independent); None when either is empty.
pub fn bootstrap_delta_ci(x: &[f64], y: &[f64], seed: u64, resamples: usize, level: f64) -> Option<(f64, f64)> {
    if x.is_empty() || y.is_empty() || resamples == 0 {
        return None;
    }
    let mut rng = Rng::new(seed);
    let (mut xs, mut ys) = (vec![0.0; x.len()], vec![0.0; y.len()]);
    let deltas: Vec<f64> = (0..resamples)
        .map(|_| {
            xs.iter_mut().for_each(|v| *v = x[rng.below(x.len())]);
            ys.iter_mut().for_each(|v| *v = y[rng.below(y.len())]);
            cliffs_delta(&xs, &ys)
        })
        .collect();
    let alpha = (1.0 - level) / 2.0 * 100.0;
    Some((percentile(&deltas, alpha), percentile(&deltas, 100.0 - alpha)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unit(model: &str, pair: &str, cosine: f64) -> Unit {
        Unit {
            service: "gha".into(),
            pair_id: pair.into(),
            model: model.into(),
            sample: 0,
            round: 0,
            values: [("parse_ok", cosine)].into_iter().collect(),
        }
    }

    fn params() -> Params {
        Params { resamples: 500, ci_metrics: vec!["parse_ok".into()], ..Params::default() }
    }

    /// A model better on old pairs than on new ones: δ of after vs before is −1 when every new
    /// pair scores below every old one, the CI excludes 0, and the subsets' means say the same.
    #[test]
    fn the_time_split_sees_a_model_that_recalls_old_pairs() {
        let mut units = Vec::new();
        let mut dates = HashMap::new();
        for i in 0..40 {
            let after = i % 2 == 0;
            let pair = format!("p{i}");
            units.push(unit("m", &pair, if after { 0.0 } else { 1.0 }));
            let published = if after { "2025-01-10" } else { "2023-05-01" };
            let not_before = (after && i < 10).then(|| "2024-12-01".to_string());
            dates.insert(("gha".to_string(), pair), PairDate { published: Some(published.into()), not_before });
        }
        let models = vec![ModelRow {
            model: "m".into(),
            backend: "embedded".into(),
            family: None,
            size_b: None,
            code: None,
            proprietary: None,
            base_model: None,
            knowledge_cutoff: Some("2024-06-30".into()),
        }];
        let rows = time_split(&units, &models, &dates, &params());
        let all = rows.iter().find(|r| r.service == "all").expect("an all row");
        assert_eq!((all.b, all.c, all.n), (Some(20), Some(20), 40));
        assert_eq!(all.effect, Some(-1.0));
        assert!(all.p.unwrap() < 1e-6 && all.ci_high.unwrap() < 0.0, "{all:?}");
        assert!(all.method.contains("5 of 20 after by a re-crawl"), "{}", all.method);
        let subsets = cutoff_subsets(&units, &models, &dates);
        let means = subset_means(&units, &subsets, &params());
        let mean_of = |label: &str| means.iter().find(|r| r.service == "all" && r.group_b == label).unwrap().effect;
        assert_eq!((mean_of("after 2024-06-30"), mean_of("before 2024-06-30")), (Some(0.0), Some(1.0)));
        // A model without a cutoff is not split.
        let undated = vec![ModelRow { knowledge_cutoff: None, ..models[0].clone() }];
        assert!(time_split(&units, &undated, &dates, &params()).is_empty());
    }

    #[test]
    fn clean_subsets_keep_each_models_own_pairs() {
        let clean = vec![
            ("a".to_string(), "gha".to_string(), "p1".to_string()),
            ("b".to_string(), "gha".to_string(), "p2".to_string()),
        ];
        let units = vec![unit("a", "p1", 1.0), unit("a", "p2", 0.0), unit("b", "p1", 0.0), unit("b", "p2", 0.5)];
        let means = subset_means(&units, &clean_subsets(&clean), &params());
        let got: Vec<(&str, Option<f64>, u64)> =
            means.iter().filter(|r| r.service == "all").map(|r| (r.group_a.as_str(), r.effect, r.n)).collect();
        assert_eq!(got, [("a", Some(1.0), 1), ("b", Some(0.5), 1)]);
    }

    /// The bootstrap CI of δ brackets δ and narrows with more data.
    #[test]
    fn the_delta_ci_brackets_delta() {
        let x: Vec<f64> = (0..60).map(|i| (i % 7) as f64).collect();
        let y: Vec<f64> = (0..50).map(|i| (i % 5) as f64 + 0.5).collect();
        let d = cliffs_delta(&x, &y);
        let (lo, hi) = bootstrap_delta_ci(&x, &y, 7, 2000, 0.95).unwrap();
        assert!(lo < d && d < hi && hi - lo < 0.6, "{lo} {d} {hi}");
    }
}
