//! The study's tests over the warehouse rows (SPEC §7), as tidy [`StatRow`]s: what the `stats`
//! table holds and the report reads.
//!
//! Units: zero-shot = round 0, sample 0. Paired tests pair on (service, pair_id) and use only the
//! pairs every compared group has. Holm families: one per (test, service, metric).

use std::collections::{BTreeMap, BTreeSet, HashMap};

use doc2ci_rows::{Lint, MetricInfo, MetricKind, ModelRow, RowKey, Score, Validation};
use serde::{Deserialize, Serialize};

use crate::{
    bootstrap_mean_ci, cliffs_delta, friedman, holm, mann_whitney, mcnemar, mean, pass_at_k, spearman, wilcoxon, Tier,
};

/// One row of the `stats` table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StatRow {
    /// `mean`, `friedman`, `wilcoxon`, `mann_whitney`, `spearman`, `mcnemar`, `pass_at_k`.
    pub test: String,
    /// A service name, or `all` for tests over every service.
    pub service: String,
    pub metric: String,
    pub group_a: String,
    pub group_b: String,
    pub n: u64,
    pub statistic: Option<f64>,
    pub p: Option<f64>,
    pub p_holm: Option<f64>,
    pub effect: Option<f64>,
    /// `mean`, `rank_biserial`, `cliffs_delta`, `kendall_w`, `rho`, `net_valid_change`, `pass@k`.
    pub effect_name: String,
    pub ci_low: Option<f64>,
    pub ci_high: Option<f64>,
    /// McNemar: valid→invalid (first valid, second not) and invalid→valid counts.
    pub b: Option<u64>,
    pub c: Option<u64>,
    /// How the p-value was obtained (`exact`, `permutation`, `normal`, `chi2`, `t`, `binomial`).
    pub method: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Params {
    pub seed: u64,
    pub resamples: usize,
    /// Metrics whose means get bootstrap CIs (cost grows with groups × resamples × n).
    pub ci_metrics: Vec<String>,
    /// The score stage's metrics (`doc2ci_score::metric_infos()`): which `scores` columns the
    /// tests cover, in report order. The default has none, so only validity is tested.
    #[serde(skip)]
    pub metrics: Vec<MetricInfo>,
}

impl Default for Params {
    fn default() -> Self {
        Self {
            seed: 20_260_601,
            resamples: 2000,
            ci_metrics: ["cosine", "parse_ok", "schema_ok"].map(String::from).to_vec(),
            metrics: Vec::new(),
        }
    }
}

/// Validity indicators, joined from `validations` and `lints` (they are not score metrics), in
/// report order: the validity ladder parse → schema → lint (the service's own validator, as written
/// and fragment-aware), then the security audit.
pub const VALIDATION_INDICATORS: &[&str] =
    &["parse_ok", "schema_ok", "fragment", "lint_as_is_ok", "lint_ok", "audit_ok"];

/// Every metric the study tests, in report order: the score metrics it covers (`in_study`, in
/// registry order), then the validation indicators. What `ci_metrics` may name.
pub fn tested_metrics(metrics: &[MetricInfo]) -> Vec<&'static str> {
    metrics.iter().filter(|m| m.in_study).map(|m| m.name).chain(VALIDATION_INDICATORS.iter().copied()).collect()
}

/// The graded similarity metrics the study tests (`in_study` f64 columns): the ones compared with
/// Friedman, Wilcoxon and Spearman, and drawn as box plots. Rates (a bool metric such as `exact`,
/// the validation indicators) get means and group comparisons only.
pub fn similarity_metrics(metrics: &[MetricInfo]) -> Vec<&'static str> {
    metrics.iter().filter(|m| m.in_study && m.kind == MetricKind::Float).map(|m| m.name).collect()
}

/// The binary outcomes the study tests with McNemar: its bool score metrics (`exact`,
/// `tree_exact`, `sem_exact`, `sem_contains`, …) and the validity indicators but `fragment` (a
/// description of the answer, not something to be better or worse at).
pub fn binary_outcomes(metrics: &[MetricInfo]) -> Vec<&'static str> {
    metrics
        .iter()
        .filter(|m| m.in_study && m.kind == MetricKind::Bool)
        .map(|m| m.name)
        .chain(VALIDATION_INDICATORS.iter().copied().filter(|m| *m != "fragment"))
        .collect()
}

/// Marks the method of base-vs-fine-tuned rows.
pub const FINE_TUNE_TAG: &str = "fine-tuned vs base";

/// Everything the tests need about one output.
#[derive(Debug, Clone)]
pub struct Unit {
    pub service: String,
    pub pair_id: String,
    pub model: String,
    pub sample: u32,
    pub round: u32,
    pub values: BTreeMap<&'static str, f64>,
}

/// Joins scores, validations and lints on (service, pair, model, sample, round); a side missing
/// leaves its metrics out of that unit. Of the scores, the `metrics` the study tests (`in_study`)
/// are kept, a bool as 0 or 1. A lint verdict counts only where a tool judged the text: with
/// several tools of one kind, the text passes when every one that judged it passes.
pub fn units(scores: &[Score], validations: &[Validation], lints: &[Lint], metrics: &[MetricInfo]) -> Vec<Unit> {
    type K = (String, String, String, u32, u32);
    let studied: Vec<&'static str> = metrics.iter().filter(|m| m.in_study).map(|m| m.name).collect();
    let mut map: BTreeMap<K, BTreeMap<&'static str, f64>> = BTreeMap::new();
    for s in scores {
        let e = map.entry((s.service.clone(), s.pair_id.clone(), s.model.clone(), s.sample, s.round)).or_default();
        for name in &studied {
            if let Some(v) = s.get(name) {
                e.insert(name, v.as_f64());
            }
        }
    }
    for v in validations.iter().filter(|v| v.model != "reference") {
        let e = map.entry((v.service.clone(), v.pair_id.clone(), v.model.clone(), v.sample, v.round)).or_default();
        e.insert("parse_ok", v.parse_ok as u8 as f64);
        e.insert("schema_ok", v.schema_ok as u8 as f64);
        e.insert("fragment", v.fragment as u8 as f64);
    }
    for l in lints.iter().filter(|l| l.model != "reference") {
        let e = map.entry((l.service.clone(), l.pair_id.clone(), l.model.clone(), l.sample, l.round)).or_default();
        let verdicts: [(&'static str, Option<bool>); 2] = match l.kind.as_str() {
            "audit" => [("audit_ok", l.ok), ("", None)],
            _ => [("lint_ok", l.ok), ("lint_as_is_ok", l.as_is_ok)],
        };
        for (name, ok) in verdicts {
            if let Some(ok) = ok {
                let v = e.entry(name).or_insert(1.0);
                *v = v.min(ok as u8 as f64);
            }
        }
    }
    map.into_iter()
        .map(|((service, pair_id, model, sample, round), values)| Unit {
            service,
            pair_id,
            model,
            sample,
            round,
            values,
        })
        .collect()
}

/// A Spearman row over all services; a single test, so its Holm p is its p.
fn spearman_row(metric: &str, a: &str, b: &str, t: &crate::TestResult, n: usize) -> StatRow {
    let mut r = row("spearman", "all", metric, a, b, n);
    r.statistic = fin(t.statistic);
    r.p = fin(t.p);
    r.p_holm = r.p;
    r.effect = fin(t.statistic);
    r.effect_name = "rho".into();
    r.method = t.method.into();
    r
}

/// A Wilcoxon signed-rank row with its matched-pairs rank-biserial r; `method_note` is appended
/// to the p-value method (e.g. what the pairs are).
pub(crate) fn wilcoxon_row(
    service: &str,
    metric: &str,
    a: &str,
    b: &str,
    w: &crate::Wilcoxon,
    n: usize,
    method_note: &str,
) -> StatRow {
    let mut r = row("wilcoxon", service, metric, a, b, n);
    r.statistic = fin(w.statistic);
    r.p = fin(w.p);
    r.effect = Some(w.rank_biserial);
    r.effect_name = "rank_biserial".into();
    r.method = format!("{}{method_note}", w.method);
    r
}

pub(crate) fn row(test: &str, service: &str, metric: &str, a: &str, b: &str, n: usize) -> StatRow {
    StatRow {
        test: test.into(),
        service: service.into(),
        metric: metric.into(),
        group_a: a.into(),
        group_b: b.into(),
        n: n as u64,
        statistic: None,
        p: None,
        p_holm: None,
        effect: None,
        effect_name: String::new(),
        ci_low: None,
        ci_high: None,
        b: None,
        c: None,
        method: String::new(),
    }
}

pub(crate) fn fin(v: f64) -> Option<f64> {
    v.is_finite().then_some(v)
}

/// Open models (not proprietary) with a known size: the population of RQ2.
fn open(m: &ModelRow) -> bool {
    m.proprietary != Some(true)
}

pub fn tier_of(m: &ModelRow) -> Option<Tier> {
    m.size_b.map(Tier::of)
}

/// All the study's tests. A model with a `base_model` is compared with its base (RQ6).
/// `errors` are the requests that failed (no unit: nobody's answer): a pair whose answer is
/// missing that way is left out of every paired test of its model, and each such test says how
/// many pairs it left out.
pub fn run(units: &[Unit], models: &[ModelRow], errors: &[RowKey], p: &Params) -> Vec<StatRow> {
    let s = Study::new(units, models, p);
    let mut out = Vec::new();
    s.means(&mut out);
    s.friedman_over_models(&mut out);
    s.wilcoxon_between_models(&mut out);
    s.mcnemar_between_models(&mut out);
    s.between_services(&mut out);
    s.size_and_specialization(&mut out);
    s.metric_agreement(&mut out);
    // RQ6: repair (every round vs zero-shot, passItr@k) and fine-tuning (vs base), paired.
    out.extend(crate::repair::rows(units, errors, &s.services, &s.sims, &s.outcomes));
    s.fine_tuning(&mut out);
    pass_at_k_rows(units, &mut out);
    out
}

/// What every test of [`run`] reads: the zero-shot units, grouped.
struct Study<'a> {
    /// Zero-shot units (round 0, sample 0).
    zs: Vec<&'a Unit>,
    services: BTreeSet<&'a str>,
    model_names: BTreeSet<&'a str>,
    meta: HashMap<&'a str, &'a ModelRow>,
    /// The tested metrics the units hold, in report order; `sims` the similarities of them and
    /// `outcomes` the binary ones.
    metrics: Vec<&'static str>,
    sims: Vec<&'static str>,
    outcomes: Vec<&'static str>,
    /// (service, model) → pair → unit values.
    cell: Cell<'a>,
    fine_tuned: Vec<(&'a str, &'a str)>,
    p: &'a Params,
}

impl<'a> Study<'a> {
    fn new(units: &'a [Unit], models: &'a [ModelRow], p: &'a Params) -> Study<'a> {
        let zs: Vec<&Unit> = units.iter().filter(|u| u.round == 0 && u.sample == 0).collect();
        let metrics: Vec<&'static str> =
            tested_metrics(&p.metrics).into_iter().filter(|m| zs.iter().any(|u| u.values.contains_key(m))).collect();
        let similarity = similarity_metrics(&p.metrics);
        let binaries = binary_outcomes(&p.metrics);
        let mut cell: Cell = BTreeMap::new();
        for u in &zs {
            cell.entry((u.service.as_str(), u.model.as_str())).or_default().insert(u.pair_id.as_str(), &u.values);
        }
        Study {
            services: zs.iter().map(|u| u.service.as_str()).collect(),
            model_names: zs.iter().map(|u| u.model.as_str()).collect(),
            meta: models.iter().map(|m| (m.model.as_str(), m)).collect(),
            sims: metrics.iter().copied().filter(|m| similarity.contains(m)).collect(),
            outcomes: metrics.iter().copied().filter(|m| binaries.contains(m)).collect(),
            metrics,
            cell,
            fine_tuned: models.iter().filter_map(|m| Some((m.model.as_str(), m.base_model.as_deref()?))).collect(),
            zs,
            p,
        }
    }

    /// A model's values of `metric` in one service (or all).
    fn vals(&self, svc: Option<&str>, model: &str, metric: &str) -> Vec<f64> {
        self.zs
            .iter()
            .filter(|u| u.model == model && svc.is_none_or(|s| u.service == s))
            .filter_map(|u| u.values.get(metric).copied())
            .collect()
    }

    /// Every service, then `None` for all of them.
    fn scopes(&self) -> impl Iterator<Item = Option<&'a str>> + '_ {
        self.services.iter().map(|s| Some(*s)).chain([None])
    }

    /// The models with answers in `svc`.
    fn models_in(&self, svc: &str) -> Vec<&'a str> {
        self.model_names.iter().copied().filter(|m| self.cell.contains_key(&(svc, *m))).collect()
    }

    /// Means with bootstrap CIs: per (service|all, model), per service over all models, and over
    /// all services by tier and type.
    fn means(&self, out: &mut Vec<StatRow>) {
        let p = self.p;
        let mut seed = p.seed;
        for metric in &self.metrics {
            let with_ci = p.ci_metrics.iter().any(|m| m == metric);
            for svc in self.scopes() {
                let svc_name = svc.unwrap_or("all");
                for m in &self.model_names {
                    let v = self.vals(svc, m, metric);
                    if v.is_empty() {
                        continue;
                    }
                    out.push(mean_row(svc_name, metric, m, &v, with_ci, &mut seed, p));
                }
                let all: Vec<f64> = self
                    .zs
                    .iter()
                    .filter(|u| svc.is_none_or(|s| u.service == s))
                    .filter_map(|u| u.values.get(metric).copied())
                    .collect();
                if !all.is_empty() {
                    out.push(mean_row(svc_name, metric, "all models", &all, with_ci, &mut seed, p));
                }
            }
            for (g, v) in &self.groups(metric) {
                out.push(mean_row("all", metric, g, v, with_ci, &mut seed, p));
            }
        }
    }

    /// The values of `metric` by tier and by type (open models only) and of proprietary models,
    /// all services.
    fn groups(&self, metric: &str) -> BTreeMap<String, Vec<f64>> {
        let mut groups: BTreeMap<String, Vec<f64>> = BTreeMap::new();
        for m in &self.model_names {
            let Some(mr) = self.meta.get(m) else { continue };
            let v = self.vals(None, m, metric);
            if !open(mr) {
                groups.entry("proprietary".into()).or_default().extend(&v);
                continue;
            }
            if let Some(t) = tier_of(mr) {
                groups.entry(format!("tier:{}", t.name())).or_default().extend(&v);
                if let Some(code) = mr.code {
                    groups
                        .entry(format!("tier:{}:{}", t.name(), if code { "code" } else { "general" }))
                        .or_default()
                        .extend(&v);
                }
            }
            if let Some(code) = mr.code {
                groups.entry(if code { "type:code" } else { "type:general" }.into()).or_default().extend(&v);
            }
        }
        groups
    }

    /// Friedman over models within each service (blocks = pairs every model answered).
    fn friedman_over_models(&self, out: &mut Vec<StatRow>) {
        let cell = &self.cell;
        for svc in &self.services {
            let ms = self.models_in(svc);
            if ms.len() < 3 {
                continue;
            }
            let common: Vec<&str> = cell[&(*svc, ms[0])]
                .keys()
                .copied()
                .filter(|pid| ms.iter().all(|m| cell[&(*svc, *m)].contains_key(pid)))
                .collect();
            let answered: BTreeSet<&str> = ms.iter().flat_map(|m| cell[&(*svc, *m)].keys().copied()).collect();
            let left_out = answered.len() - common.len();
            for metric in &self.sims {
                let blocks: Vec<Vec<f64>> = common
                    .iter()
                    .filter_map(|pid| {
                        ms.iter().map(|m| cell[&(*svc, *m)][pid].get(metric).copied()).collect::<Option<Vec<f64>>>()
                    })
                    .collect();
                if blocks.is_empty() {
                    continue;
                }
                if let Some(t) = friedman(&blocks) {
                    let mut r = row("friedman", svc, metric, &format!("{} models", ms.len()), "", blocks.len());
                    r.statistic = fin(t.statistic);
                    r.p = fin(t.p);
                    r.p_holm = r.p;
                    let (n, k) = (blocks.len() as f64, ms.len() as f64);
                    r.effect = fin(t.statistic / (n * (k - 1.0)));
                    r.effect_name = "kendall_w".into();
                    r.method = left_out_note(t.method, left_out, "not answered by every model");
                    out.push(r);
                }
            }
        }
    }

    /// Pairwise Wilcoxon between models, per service and over all services; Holm per family.
    fn wilcoxon_between_models(&self, out: &mut Vec<StatRow>) {
        let (cell, services) = (&self.cell, &self.services);
        let ms: Vec<&str> = self.model_names.iter().copied().collect();
        for svc in self.scopes() {
            let svc_name = svc.unwrap_or("all");
            for metric in &self.sims {
                let mut fam = Vec::new();
                for i in 0..ms.len() {
                    for j in i + 1..ms.len() {
                        let (x, y) = paired(cell, svc, ms[i], ms[j], metric, services);
                        if x.is_empty() {
                            continue;
                        }
                        let Some(w) = wilcoxon(&x, &y) else { continue };
                        let mut r = wilcoxon_row(svc_name, metric, ms[i], ms[j], &w, x.len(), "");
                        r.method = left_out_note(&r.method, one_sided(cell, svc, ms[i], ms[j], services), ONE_SIDED);
                        fam.push(r);
                    }
                }
                push_holm(out, fam);
            }
        }
    }

    /// McNemar on every binary outcome between models, per service; Holm per (service, outcome).
    fn mcnemar_between_models(&self, out: &mut Vec<StatRow>) {
        let (cell, services) = (&self.cell, &self.services);
        for indicator in binary_outcomes(&self.p.metrics).into_iter().filter(|m| self.metrics.contains(m)) {
            for svc in services {
                let ms = self.models_in(svc);
                let mut fam = Vec::new();
                for i in 0..ms.len() {
                    for j in i + 1..ms.len() {
                        let (x, y) = paired(cell, Some(svc), ms[i], ms[j], indicator, services);
                        if x.is_empty() {
                            continue;
                        }
                        let mut r = mcnemar_row(svc, indicator, ms[i], ms[j], &x, &y);
                        let left_out = one_sided(cell, Some(svc), ms[i], ms[j], services);
                        r.method = left_out_note(&r.method, left_out, ONE_SIDED);
                        fam.push(r);
                    }
                }
                push_holm(out, fam);
            }
        }
    }

    /// Services: Friedman on per-model means (blocks = models), Wilcoxon pairs on those means, and
    /// Mann-Whitney with Cliff's δ on the units.
    fn between_services(&self, out: &mut Vec<StatRow>) {
        let svcs: Vec<&str> = self.services.iter().copied().collect();
        for metric in &self.metrics {
            let full: Vec<&str> = self
                .model_names
                .iter()
                .copied()
                .filter(|m| svcs.iter().all(|s| self.cell.contains_key(&(*s, *m))))
                .collect();
            let means: Vec<Vec<f64>> =
                full.iter().map(|m| svcs.iter().map(|s| mean(&self.vals(Some(s), m, metric))).collect()).collect();
            if svcs.len() >= 3 && !full.is_empty() && means.iter().flatten().all(|v| v.is_finite()) {
                if let Some(t) = friedman(&means) {
                    let mut r = row(
                        "friedman",
                        "all",
                        metric,
                        &format!("{} services", svcs.len()),
                        "per-model means",
                        full.len(),
                    );
                    r.statistic = fin(t.statistic);
                    r.p = fin(t.p);
                    r.p_holm = r.p;
                    r.effect = fin(t.statistic / (full.len() as f64 * (svcs.len() as f64 - 1.0)));
                    r.effect_name = "kendall_w".into();
                    r.method = t.method.into();
                    out.push(r);
                }
            }
            let of = |svc: &str| -> Vec<f64> {
                self.zs.iter().filter(|u| u.service == svc).filter_map(|u| u.values.get(metric).copied()).collect()
            };
            let mut fam_w = Vec::new();
            let mut fam_u = Vec::new();
            for i in 0..svcs.len() {
                for j in i + 1..svcs.len() {
                    if full.len() >= 2 {
                        let x: Vec<f64> = means.iter().map(|m| m[i]).collect();
                        let y: Vec<f64> = means.iter().map(|m| m[j]).collect();
                        if let Some(w) = wilcoxon(&x, &y) {
                            fam_w.push(wilcoxon_row(
                                "all",
                                metric,
                                svcs[i],
                                svcs[j],
                                &w,
                                full.len(),
                                " (per-model means)",
                            ));
                        }
                    }
                    if let Some(r) = mwu_row("all", metric, svcs[i], svcs[j], &of(svcs[i]), &of(svcs[j])) {
                        fam_u.push(r);
                    }
                }
            }
            push_holm(out, fam_w);
            push_holm(out, fam_u);
        }
    }

    /// RQ2: size (Spearman on per-model means) and specialization (general against code, and
    /// tiers pairwise), open models only.
    fn size_and_specialization(&self, out: &mut Vec<StatRow>) {
        let open_models: Vec<&str> =
            self.model_names.iter().copied().filter(|m| self.meta.get(m).is_some_and(|mr| open(mr))).collect();
        for metric in &self.metrics {
            let mut by_tier: BTreeMap<Tier, Vec<f64>> = BTreeMap::new();
            let (mut gen, mut code) = (Vec::new(), Vec::new());
            let (mut sizes, mut means) = (Vec::new(), Vec::new());
            for m in &open_models {
                let mr = self.meta[m];
                let v = self.vals(None, m, metric);
                if let Some(t) = tier_of(mr) {
                    by_tier.entry(t).or_default().extend(&v);
                }
                match mr.code {
                    Some(true) => code.extend(&v),
                    Some(false) => gen.extend(&v),
                    None => {}
                }
                if let (Some(s), false) = (mr.size_b, v.is_empty()) {
                    sizes.push(s);
                    means.push(mean(&v));
                }
            }
            if let Some(t) = spearman(&sizes, &means) {
                out.push(spearman_row(metric, "size_b", "per-model mean", &t, sizes.len()));
            }
            if let Some(r) = mwu_row("all", metric, "general", "code", &gen, &code) {
                out.push(r);
            }
            let tiers: Vec<Tier> = by_tier.keys().copied().collect();
            let mut fam = Vec::new();
            for i in 0..tiers.len() {
                for j in i + 1..tiers.len() {
                    let (a, b) = (&by_tier[&tiers[i]], &by_tier[&tiers[j]]);
                    if let Some(r) = mwu_row("all", metric, tiers[i].name(), tiers[j].name(), a, b) {
                        fam.push(r);
                    }
                }
            }
            push_holm(out, fam);
        }
    }

    /// Metric agreement: Spearman between per-model mean cosine and each other metric (RQ1).
    fn metric_agreement(&self, out: &mut Vec<StatRow>) {
        if !self.metrics.contains(&"cosine") {
            return;
        }
        let cos: Vec<f64> = self.model_names.iter().map(|m| mean(&self.vals(None, m, "cosine"))).collect();
        for metric in self.sims.iter().filter(|m| **m != "cosine") {
            let other: Vec<f64> = self.model_names.iter().map(|m| mean(&self.vals(None, m, metric))).collect();
            if let Some(t) = spearman(&cos, &other) {
                out.push(spearman_row(metric, "cosine", "per-model means", &t, cos.len()));
            }
        }
    }

    /// RQ6's fine-tuning: each fine-tuned model against its base, paired, on every similarity
    /// (Wilcoxon) and binary outcome (McNemar).
    fn fine_tuning(&self, out: &mut Vec<StatRow>) {
        let (cell, services) = (&self.cell, &self.services);
        for svc in self.scopes() {
            let svc_name = svc.unwrap_or("all");
            for &(ft, base) in &self.fine_tuned {
                for metric in self.sims.iter().chain(&self.outcomes).copied() {
                    let (x, y) = paired(cell, svc, base, ft, metric, services);
                    if x.is_empty() {
                        continue;
                    }
                    let left_out = one_sided(cell, svc, base, ft, services);
                    if self.outcomes.contains(&metric) {
                        let mut r = mcnemar_row(svc_name, metric, base, ft, &x, &y);
                        r.p_holm = r.p;
                        r.method = left_out_note(&format!("{}; {FINE_TUNE_TAG}", r.method), left_out, ONE_SIDED);
                        out.push(r);
                    } else if let Some(w) = wilcoxon(&x, &y) {
                        let tag = format!("; {FINE_TUNE_TAG}");
                        let mut r = wilcoxon_row(svc_name, metric, base, ft, &w, x.len(), &tag);
                        r.p_holm = r.p;
                        r.method = left_out_note(&r.method, left_out, ONE_SIDED);
                        out.push(r);
                    }
                }
            }
        }
    }
}

/// pass@k of schema validity when models have several samples (round 0).
fn pass_at_k_rows(units: &[Unit], out: &mut Vec<StatRow>) {
    let mut samples: BTreeMap<(&str, &str, &str), (u64, u64)> = BTreeMap::new();
    for u in units.iter().filter(|u| u.round == 0) {
        if let Some(ok) = u.values.get("schema_ok") {
            let e = samples.entry((u.service.as_str(), u.model.as_str(), u.pair_id.as_str())).or_default();
            e.0 += 1;
            e.1 += (*ok > 0.5) as u64;
        }
    }
    let mut per: BTreeMap<(&str, &str), Vec<(u64, u64)>> = BTreeMap::new();
    for ((s, m, _), nc) in &samples {
        per.entry((*s, *m)).or_default().push(*nc);
    }
    for ((s, m), ncs) in per {
        let max_n = ncs.iter().map(|x| x.0).max().unwrap_or(0);
        if max_n < 2 {
            continue;
        }
        for k in [1u64, 5, 10].into_iter().filter(|k| *k <= max_n) {
            let v: Vec<f64> = ncs.iter().filter(|(n, _)| *n >= k).map(|(n, c)| pass_at_k(*n, *c, k)).collect();
            let mut r = row("pass_at_k", s, "schema_ok", m, &format!("k={k}"), v.len());
            r.effect = fin(mean(&v));
            r.effect_name = format!("pass@{k}");
            out.push(r);
        }
    }
}

fn mean_row(svc: &str, metric: &str, group: &str, v: &[f64], with_ci: bool, seed: &mut u64, p: &Params) -> StatRow {
    let mut r = row("mean", svc, metric, group, "", v.len());
    r.effect = fin(mean(v));
    r.effect_name = "mean".into();
    if with_ci {
        *seed = seed.wrapping_add(1);
        if let Some((lo, hi)) = bootstrap_mean_ci(v, *seed, p.resamples, 0.95) {
            r.ci_low = Some(lo);
            r.ci_high = Some(hi);
            r.method = format!("percentile bootstrap, {} resamples", p.resamples);
        }
    }
    r
}

fn mwu_row(svc: &str, metric: &str, a: &str, b: &str, x: &[f64], y: &[f64]) -> Option<StatRow> {
    let t = mann_whitney(x, y)?;
    let mut r = row("mann_whitney", svc, metric, a, b, x.len() + y.len());
    r.statistic = fin(t.statistic);
    r.p = fin(t.p);
    r.p_holm = r.p;
    r.effect = fin(cliffs_delta(x, y));
    r.effect_name = "cliffs_delta".into();
    r.method = t.method.into();
    Some(r)
}

pub(crate) fn mcnemar_row(svc: &str, metric: &str, a: &str, b: &str, x: &[f64], y: &[f64]) -> StatRow {
    let (mut vb, mut vc) = (0u64, 0u64);
    for (p, q) in x.iter().zip(y) {
        match (*p > 0.5, *q > 0.5) {
            (true, false) => vb += 1,
            (false, true) => vc += 1,
            _ => {}
        }
    }
    let t = mcnemar(vb, vc);
    let mut r = row("mcnemar", svc, metric, a, b, x.len());
    r.statistic = fin(t.statistic);
    r.p = fin(t.p);
    r.effect = Some((vc as f64 - vb as f64) / x.len() as f64);
    r.effect_name = "net_valid_change".into();
    r.b = Some(vb);
    r.c = Some(vc);
    r.method = t.method.into();
    r
}

/// Holm over one family; the rows keep their order.
pub(crate) fn push_holm(out: &mut Vec<StatRow>, mut fam: Vec<StatRow>) {
    let ps: Vec<f64> = fam.iter().map(|r| r.p.unwrap_or(f64::NAN)).collect();
    for (r, h) in fam.iter_mut().zip(holm(&ps)) {
        r.p_holm = fin(h);
    }
    out.append(&mut fam);
}

type Cell<'a> = BTreeMap<(&'a str, &'a str), BTreeMap<&'a str, &'a BTreeMap<&'static str, f64>>>;

/// Values of two models on the pairs both answered (one service, or all services).
fn paired(
    cell: &Cell,
    svc: Option<&str>,
    a: &str,
    b: &str,
    metric: &str,
    services: &BTreeSet<&str>,
) -> (Vec<f64>, Vec<f64>) {
    let (mut x, mut y) = (Vec::new(), Vec::new());
    for s in services.iter().filter(|s| svc.is_none_or(|v| v == **s)) {
        let (Some(ca), Some(cb)) = (cell.get(&(*s, a)), cell.get(&(*s, b))) else { continue };
        for (pid, va) in ca {
            if let (Some(vb), Some(p)) = (cb.get(pid), va.get(metric)) {
                if let Some(q) = vb.get(metric) {
                    x.push(*p);
                    y.push(*q);
                    let _ = pid;
                }
            }
        }
    }
    (x, y)
}

/// Why a paired test between two groups left pairs out.
const ONE_SIDED: &str = "answered by one side only (an errored request, or not asked)";

/// `method` with the count of pairs a paired test left out and why, when there are any: a pair
/// one side has no answer for is never counted as that side's failure.
pub(crate) fn left_out_note(method: &str, n: usize, why: &str) -> String {
    match n {
        0 => method.to_string(),
        1 => format!("{method}; 1 pair left out: {why}"),
        n => format!("{method}; {n} pairs left out: {why}"),
    }
}

/// Pairs (one service, or all) that exactly one of two groups answered: what pairing dropped.
fn one_sided(cell: &Cell, svc: Option<&str>, a: &str, b: &str, services: &BTreeSet<&str>) -> usize {
    let mut n = 0;
    for s in services.iter().filter(|s| svc.is_none_or(|v| v == **s)) {
        let empty = BTreeMap::new();
        let ca = cell.get(&(*s, a)).unwrap_or(&empty);
        let cb = cell.get(&(*s, b)).unwrap_or(&empty);
        n += ca.keys().filter(|p| !cb.contains_key(*p)).count() + cb.keys().filter(|p| !ca.contains_key(*p)).count();
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unit(model: &str, pair: usize, round: u32, schema_ok: bool, cosine: f64) -> Unit {
        Unit {
            service: "s".into(),
            pair_id: format!("p{pair:02}"),
            model: model.into(),
            sample: 0,
            round,
            values: [("schema_ok", schema_ok as u8 as f64), ("cosine", cosine)].into_iter().collect(),
        }
    }

    fn errored(model: &str, pair: usize, round: u32) -> RowKey {
        RowKey { pair_id: format!("p{pair:02}"), service: "s".into(), model: model.into(), sample: 0, round }
    }

    fn params() -> Params {
        let cosine = MetricInfo { name: "cosine", kind: MetricKind::Float, in_study: true, higher_is_better: true };
        Params { resamples: 20, metrics: vec![cosine], ..Params::default() }
    }

    fn find<'a>(rows: &'a [StatRow], test: &str, metric: &str, a: &str, b: &str) -> &'a StatRow {
        rows.iter()
            .find(|r| r.test == test && r.metric == metric && r.group_a == a && r.group_b == b && r.service == "s")
            .unwrap_or_else(|| panic!("no {test} {metric} {a} {b}"))
    }

    /// Issue 44: a pair a model has no answer for (its request errored) is left out of that
    /// model's paired tests, which say how many; it is never counted as the model failing.
    #[test]
    fn errored_pairs_are_left_out_of_paired_tests_with_the_count_stated() {
        let mut units = Vec::new();
        for i in 0..20 {
            units.push(unit("a", i, 0, i % 3 == 0, 0.5 + i as f64 / 100.0));
            // b errored on pairs 0 and 1: no unit.
            if i >= 2 {
                units.push(unit("b", i, 0, i % 2 == 0, 0.4 + i as f64 / 90.0));
            }
        }
        let errors = [errored("b", 0, 0), errored("b", 1, 0)];
        let rows = run(&units, &[], &errors, &params());
        let w = find(&rows, "wilcoxon", "cosine", "a", "b");
        assert_eq!(w.n, 18);
        assert!(w.method.ends_with("; 2 pairs left out: answered by one side only (an errored request, or not asked)"));
        let m = find(&rows, "mcnemar", "schema_ok", "a", "b");
        assert!(m.method.contains("2 pairs left out"), "{}", m.method);
        // The means are over answers only.
        let mean_b = find(&rows, "mean", "cosine", "b", "");
        assert_eq!(mean_b.n, 18);
        // Nothing left out, nothing said.
        let full: Vec<Unit> = units.iter().filter(|u| u.pair_id.as_str() >= "p02").cloned().collect();
        let rows = run(&full, &[], &[], &params());
        assert!(!find(&rows, "wilcoxon", "cosine", "a", "b").method.contains("left out"));
    }

    /// A repair whose last request errored leaves its pair's outcome unknown: out of the
    /// zero-shot vs repaired contrasts, counted; a later answered round settles it again.
    #[test]
    fn a_repair_that_errored_last_leaves_its_pair_out_of_the_repair_contrast() {
        let mut units = Vec::new();
        for i in 0..12 {
            units.push(unit("a", i, 0, false, 0.3));
            // Pairs 0..8 repaired to valid in round 1; 8 and 9 errored in round 1; 9 answered in round 2.
            if i < 8 {
                units.push(unit("a", i, 1, true, 0.6));
            }
        }
        units.push(unit("a", 9, 2, true, 0.6));
        let errors = [errored("a", 8, 1), errored("a", 9, 1)];
        let rows = run(&units, &[], &errors, &params());
        let m = find(&rows, "mcnemar", "schema_ok", "a", "a repaired");
        assert_eq!((m.n, m.c), (11, Some(9)), "pair 8 is out; pair 9 counts with its round-2 answer");
        assert!(m.method.ends_with("; 1 pair left out: the last request errored"), "{}", m.method);
    }
}
