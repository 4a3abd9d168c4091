//! The study's report from typed rows: the tables of the paper (Table I per model by tier, Table II
//! per service, RQ2 scale/specialization, RQ3 service effect, RQ6 repair/fine-tuning, fragment
//! rates) as HTML, Markdown and CSV, and its figures as SVG (plotters). Pure: rows in, files out.
//!
//! Owns: presentation only. Never reads the warehouse and never computes a statistic (it formats
//! the `stats` rows). Which metrics exist comes from [`Input::metrics`] (the score stage's
//! registry); what is named here (Table I's cosine and exact) is a choice of what to show.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use doc2ci_rows::{Lint, MetricInfo, ModelRow};
use doc2ci_stats::study::{StatRow, Unit, FINE_TUNE_TAG};
use doc2ci_stats::{mean, Tier};

mod browser;
mod clean;
pub mod compare;
mod figures;
mod lint;
mod repair;

pub use browser::Samples;

/// What the report is built from.
pub struct Input<'a> {
    pub title: &'a str,
    pub models: &'a [ModelRow],
    pub units: &'a [Unit],
    pub stats: &'a [StatRow],
    /// service name → display name.
    pub services: &'a BTreeMap<String, String>,
    /// The score stage's metrics (`doc2ci_score::metric_infos()`), as given to stats.
    pub metrics: &'a [MetricInfo],
    /// The lint rows (their findings give the most frequent rule ids); empty without a lint stage.
    pub lints: &'a [Lint],
    /// model → (degenerate answers, answers) at round 0: empty, prose-only or looping output.
    pub degenerate: &'a BTreeMap<String, (usize, usize)>,
    /// (model, service) → (round-0 requests that errored, errored repair requests): no answer,
    /// in no n, rate, test or figure. Empty: every request was answered.
    pub errors: &'a BTreeMap<(String, String), (usize, usize)>,
    /// The rows behind the sample browser (`samples.html`); all empty: no browser.
    pub samples: &'a Samples<'a>,
}

/// Models whose answers are mostly degenerate (≥ 25%), said before any table: their scores
/// measure that, and nobody should read them as a model's ability.
pub fn degenerate_note(inp: &Input) -> Option<String> {
    let bad: Vec<String> = inp
        .degenerate
        .iter()
        .filter(|(_, &(d, n))| n > 0 && d * 4 >= n)
        .map(|(m, &(d, n))| format!("{m}: {d} of {n} ({:.0}%)", 100.0 * d as f64 / n as f64))
        .collect();
    (!bad.is_empty()).then(|| {
        format!(
            "Degenerate outputs (empty, prose without YAML, or a line repeated to the token cap): {}. \
             Read these models' scores as what such outputs get, not as a result (the default study's \
             SmolLM2-135M is a zero-setup baseline).",
            bad.join("; ")
        )
    })
}

/// Requests that errored, said first: they are missing from every number below, and a reader
/// must know how many before reading any of them.
pub fn errors_note(inp: &Input) -> Option<String> {
    let mut per: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    let mut total = 0;
    for ((model, service), &(zero, repair)) in inp.errors.iter().filter(|(_, &(z, r))| z + r > 0) {
        total += zero + repair;
        let svc = inp.services.get(service).map_or(service.as_str(), String::as_str);
        let what = match (zero, repair) {
            (z, 0) => format!("{svc} {z}"),
            (0, r) => format!("{svc} {r} in repair rounds"),
            (z, r) => format!("{svc} {z}, and {r} in repair rounds"),
        };
        per.entry(model).or_default().push(what);
    }
    (total > 0).then(|| {
        let list: Vec<String> = per.iter().map(|(m, w)| format!("{m}: {}", w.join(", "))).collect();
        format!(
            "{total} requests errored (transport, HTTP, timeout, refused): they are not answers and are left out of \
             every n, rate, test and figure below; the next `doc2ci run` asks them again. {}.",
            list.join("; ")
        )
    })
}

/// A table: caption, header and rows of cells (already formatted). `bold` marks cells to emphasise.
#[derive(Debug, Clone)]
pub struct Table {
    pub id: &'static str,
    pub caption: String,
    pub header: Vec<String>,
    pub rows: Vec<Vec<String>>,
    pub bold: BTreeSet<(usize, usize)>,
    /// Rows that start a group (e.g. a tier), rendered as a spanning line before the row.
    pub groups: BTreeMap<usize, String>,
}

impl Table {
    pub(crate) fn new(id: &'static str, caption: impl Into<String>, header: &[&str]) -> Self {
        Table {
            id,
            caption: caption.into(),
            header: header.iter().map(|s| s.to_string()).collect(),
            rows: vec![],
            bold: BTreeSet::new(),
            groups: BTreeMap::new(),
        }
    }

    pub fn csv(&self) -> String {
        let mut s = String::new();
        let has_group = !self.groups.is_empty();
        let mut head = self.header.clone();
        if has_group {
            head.insert(0, "group".into());
        }
        s.push_str(&head.iter().map(|c| csv_cell(c)).collect::<Vec<_>>().join(","));
        s.push('\n');
        let mut group = String::new();
        for (i, r) in self.rows.iter().enumerate() {
            if let Some(g) = self.groups.get(&i) {
                group = g.clone();
            }
            let mut cells: Vec<String> = r.iter().map(|c| csv_cell(c)).collect();
            if has_group {
                cells.insert(0, csv_cell(&group));
            }
            s.push_str(&cells.join(","));
            s.push('\n');
        }
        s
    }

    fn markdown(&self) -> String {
        let mut s = format!("**{}**\n\n", self.caption);
        s.push_str(&format!("| {} |\n", self.header.join(" | ")));
        s.push_str(&format!("|{}\n", "---|".repeat(self.header.len())));
        for (i, r) in self.rows.iter().enumerate() {
            if let Some(g) = self.groups.get(&i) {
                s.push_str(&format!("| *{}* |{}\n", md_escape(g), " |".repeat(self.header.len() - 1)));
            }
            let cells: Vec<String> = r
                .iter()
                .enumerate()
                .map(|(j, c)| if self.bold.contains(&(i, j)) { format!("**{}**", md_escape(c)) } else { md_escape(c) })
                .collect();
            s.push_str(&format!("| {} |\n", cells.join(" | ")));
        }
        s.push('\n');
        s
    }

    fn html(&self) -> String {
        let mut s = format!("<table id=\"{}\"><caption>{}</caption><thead><tr>", self.id, esc(&self.caption));
        for h in &self.header {
            let _ = write!(s, "<th>{}</th>", esc(h));
        }
        s.push_str("</tr></thead><tbody>");
        for (i, r) in self.rows.iter().enumerate() {
            if let Some(g) = self.groups.get(&i) {
                let _ = write!(s, "<tr class=\"group\"><td colspan=\"{}\">{}</td></tr>", self.header.len(), esc(g));
            }
            s.push_str("<tr>");
            for (j, c) in r.iter().enumerate() {
                if self.bold.contains(&(i, j)) {
                    let _ = write!(s, "<td><strong>{}</strong></td>", esc(c));
                } else {
                    let _ = write!(s, "<td>{}</td>", esc(c));
                }
            }
            s.push_str("</tr>");
        }
        s.push_str("</tbody></table>\n");
        s
    }
}

fn csv_cell(s: &str) -> String {
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

fn md_escape(s: &str) -> String {
    s.replace('|', "\\|")
}

pub fn esc(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

fn f3(v: Option<f64>) -> String {
    v.map_or("–".into(), |v| format!("{v:.3}"))
}

fn pct(v: Option<f64>) -> String {
    v.map_or("–".into(), |v| format!("{:.1}", v * 100.0))
}

pub fn fmt_p(p: Option<f64>) -> String {
    match p {
        None => "–".into(),
        Some(0.0) => "< 1e-300".into(),
        Some(p) if p < 1e-3 => format!("{p:.1e}"),
        Some(p) => format!("{p:.3}"),
    }
}

/// Lookup of `mean` rows: (service, metric, group) → row.
struct Means<'a>(BTreeMap<(&'a str, &'a str, &'a str), &'a StatRow>);

impl<'a> Means<'a> {
    fn new(stats: &'a [StatRow]) -> Self {
        Means(
            stats
                .iter()
                .filter(|r| r.test == "mean")
                .map(|r| ((r.service.as_str(), r.metric.as_str(), r.group_a.as_str()), r))
                .collect(),
        )
    }
    /// Each model's means on a subset of its pairs (`subset_mean` rows whose subset `keep` names),
    /// looked up as its means.
    fn subset(stats: &'a [StatRow], keep: impl Fn(&str) -> bool) -> Self {
        Means(
            stats
                .iter()
                .filter(|r| r.test == "subset_mean" && keep(&r.group_b))
                .map(|r| ((r.service.as_str(), r.metric.as_str(), r.group_a.as_str()), r))
                .collect(),
        )
    }
    fn get(&self, svc: &str, metric: &str, group: &str) -> Option<&'a StatRow> {
        self.0.get(&(svc, metric, group)).copied()
    }
    fn mean(&self, svc: &str, metric: &str, group: &str) -> Option<f64> {
        self.get(svc, metric, group).and_then(|r| r.effect)
    }
    fn with_ci(&self, svc: &str, metric: &str, group: &str, percent: bool) -> String {
        let Some(r) = self.get(svc, metric, group) else { return "–".into() };
        let k = if percent { 100.0 } else { 1.0 };
        let d = if percent { 1 } else { 3 };
        match (r.effect, r.ci_low, r.ci_high) {
            (Some(m), Some(l), Some(h)) => format!("{:.d$} [{:.d$}, {:.d$}]", m * k, l * k, h * k),
            (Some(m), _, _) => format!("{:.d$}", m * k),
            _ => "–".into(),
        }
    }
}

pub fn model_type(m: Option<&ModelRow>) -> &'static str {
    match m.and_then(|m| m.code) {
        Some(true) => "code",
        Some(false) => "general",
        None => "–",
    }
}

/// Tier group of a model for Table I: proprietary first, then small/medium/large, then unknown size.
fn group_of(m: Option<&ModelRow>) -> (u8, String) {
    match m {
        Some(m) if m.proprietary == Some(true) => (0, "Proprietary".into()),
        Some(ModelRow { size_b: Some(s), .. }) => {
            let t = Tier::of(*s);
            (1 + t as u8, t.label().into())
        }
        _ => (9, "Size unknown".into()),
    }
}

/// Every table of the report, in order.
pub fn tables(inp: &Input) -> Vec<Table> {
    let cx = Cx::new(inp);
    let mut out = vec![
        table1(inp, &cx),
        table2(inp, &cx),
        equivalence(inp, &cx),
        per_service_models(inp, &cx),
        rq1_tests(inp, &cx),
        rq2_scale(inp),
        rq2_tiers(&cx),
        rq3_services(inp),
    ];
    out.extend(repair::tables(inp));
    out.push(rq6_means(inp));
    out.push(validity_contrasts(inp, &cx));
    let names: Vec<&str> = cx.models.iter().copied().collect();
    out.extend(lint::tables(inp, &cx.means, &names));
    out.push(fragments(inp, &cx));
    out.push(pass_at_k(inp));
    out.push(contamination_table(inp));
    out.extend(clean::tables(inp));
    out.push(tests_run(inp));
    out
}

/// What the tables share: the stats' means by (service, metric, group), each model's row, and
/// the models of the study (those with an overall mean cosine).
struct Cx<'a> {
    means: Means<'a>,
    meta: BTreeMap<&'a str, &'a ModelRow>,
    models: BTreeSet<&'a str>,
}

impl<'a> Cx<'a> {
    fn new(inp: &Input<'a>) -> Cx<'a> {
        let means = Means::new(inp.stats);
        let meta: BTreeMap<&str, &ModelRow> = inp.models.iter().map(|m| (m.model.as_str(), m)).collect();
        let models: BTreeSet<&str> = inp
            .stats
            .iter()
            .filter(|r| {
                r.test == "mean"
                    && r.service == "all"
                    && r.metric == "cosine"
                    && !r.group_a.contains(':')
                    && r.group_a != "all models"
                    && r.group_a != "proprietary"
            })
            .map(|r| r.group_a.as_str())
            .collect();
        Cx { means, meta, models }
    }
}

/// Table I: per-model quality across services by size tier, the best of each tier in bold.
fn table1(inp: &Input, cx: &Cx) -> Table {
    let mut t = Table::new("table1", "Table I. Per-model quality across services, grouped by size tier and ranked by mean cosine (95% bootstrap CI). Bold: best within tier.", &["Model", "Type", "Size (B)", "Cosine", "Exact%", "SemExact%", "Contains%", "Parse%", "Schema%", "Fragment%", "n"]);
    let mut ordered: Vec<(u8, String, f64, &str)> = cx
        .models
        .iter()
        .map(|m| {
            let (g, label) = group_of(cx.meta.get(m).copied());
            (g, label, cx.means.mean("all", "cosine", m).unwrap_or(f64::NAN), *m)
        })
        .collect();
    ordered.sort_by(|a, b| a.0.cmp(&b.0).then(b.2.total_cmp(&a.2)).then(a.3.cmp(b.3)));
    // Errored requests beside n, in a study that has any: n counts answers only.
    let zero_shot_errors =
        |m: &str| -> usize { inp.errors.iter().filter(|((model, _), _)| model == m).map(|(_, e)| e.0).sum() };
    let with_errors = ordered.iter().any(|o| zero_shot_errors(o.3) > 0);
    if with_errors {
        t.header.push("Errors".into());
    }
    for (i, (g, label, _, m)) in ordered.iter().enumerate() {
        if i == 0 || ordered[i - 1].0 != *g {
            t.groups.insert(i, label.clone());
        }
        let mr = cx.meta.get(m).copied();
        t.rows.push(vec![
            m.to_string(),
            model_type(mr).into(),
            mr.and_then(|m| m.size_b).map_or("–".into(), |s| format!("{s}")),
            cx.means.with_ci("all", "cosine", m, false),
            pct(cx.means.mean("all", "exact", m)),
            pct(cx.means.mean("all", "sem_exact", m)),
            pct(cx.means.mean("all", "sem_contains", m)),
            pct(cx.means.mean("all", "parse_ok", m)),
            pct(cx.means.mean("all", "schema_ok", m)),
            pct(cx.means.mean("all", "fragment", m)),
            cx.means.get("all", "cosine", m).map_or("–".into(), |r| r.n.to_string()),
        ]);
        if with_errors {
            t.rows.last_mut().expect("just pushed").push(zero_shot_errors(m).to_string());
        }
    }
    // Bold: best per tier group and metric column (a score metric by its direction; fragment: lowest).
    let lower_is_better = |name: &str| inp.metrics.iter().any(|m| m.name == name && !m.higher_is_better);
    let mut gstart = 0;
    for i in 0..=ordered.len() {
        if i == ordered.len() || (i > 0 && ordered[i].0 != ordered[i - 1].0) {
            for (col, metric, low) in [
                (3, "cosine", lower_is_better("cosine")),
                (4, "exact", lower_is_better("exact")),
                (5, "sem_exact", lower_is_better("sem_exact")),
                (6, "sem_contains", lower_is_better("sem_contains")),
                (7, "parse_ok", false),
                (8, "schema_ok", false),
                (9, "fragment", true),
            ] {
                let best = (gstart..i).filter_map(|r| cx.means.mean("all", metric, ordered[r].3).map(|v| (r, v))).fold(
                    None::<(usize, f64)>,
                    |acc, (r, v)| match acc {
                        Some((_, bv)) if (if low { v >= bv } else { v <= bv }) => acc,
                        _ => Some((r, v)),
                    },
                );
                if let Some((r, _)) = best {
                    t.bold.insert((r, col));
                }
            }
            gstart = i;
        }
    }
    t
}

/// Table II: per service over all models.
fn table2(inp: &Input, cx: &Cx) -> Table {
    let mut t = Table::new("table2", "Table II. By service: mean cosine (95% bootstrap CI), parse, schema validity and fragment rate over all models.", &["Service", "Cosine", "Parse%", "Schema%", "Fragment%", "n"]);
    for (svc, disp) in inp.services.iter().map(|(k, v)| (k.as_str(), v.as_str())).chain([("all", "Overall")]) {
        if cx.means.get(svc, "cosine", "all models").is_none() && cx.means.get(svc, "schema_ok", "all models").is_none()
        {
            continue;
        }
        t.rows.push(vec![
            disp.into(),
            cx.means.with_ci(svc, "cosine", "all models", false),
            pct(cx.means.mean(svc, "parse_ok", "all models")),
            cx.means.with_ci(svc, "schema_ok", "all models", true),
            pct(cx.means.mean(svc, "fragment", "all models")),
            cx.means
                .get(svc, "cosine", "all models")
                .or(cx.means.get(svc, "schema_ok", "all models"))
                .map_or("–".into(), |r| r.n.to_string()),
        ]);
    }
    t
}

/// How often each notion of "the same configuration" holds, per service over all models: the
/// gap between exact and sem_contains is what spelling and completeness hide from exact match.
fn equivalence(inp: &Input, cx: &Cx) -> Table {
    let mut t = Table::new(
        "equivalence",
        "Same configuration? Share of answers equal to the reference as stripped lines (Exact), as YAML trees (TreeExact), in the service's canonical form (SemExact), and holding the reference's whole configuration (Contains), with mean sem_recall.",
        &["Service", "Exact%", "TreeExact%", "SemExact%", "Contains%", "SemRecall", "n"],
    );
    for (svc, disp) in inp.services.iter().map(|(k, v)| (k.as_str(), v.as_str())).chain([("all", "Overall")]) {
        let Some(r) = cx.means.get(svc, "sem_contains", "all models") else { continue };
        t.rows.push(vec![
            disp.into(),
            pct(cx.means.mean(svc, "exact", "all models")),
            pct(cx.means.mean(svc, "tree_exact", "all models")),
            pct(cx.means.mean(svc, "sem_exact", "all models")),
            pct(cx.means.mean(svc, "sem_contains", "all models")),
            f3(cx.means.mean(svc, "sem_recall", "all models")),
            r.n.to_string(),
        ]);
    }
    t
}

/// Per service × model: the within-service view behind Table II.
fn per_service_models(inp: &Input, cx: &Cx) -> Table {
    let mut t = Table::new(
        "per_service_models",
        "Per service and model: mean cosine, schema validity and fragment rate.",
        &["Service", "Model", "Cosine", "Schema%", "Fragment%", "n"],
    );
    for svc in inp.services.keys() {
        for m in &cx.models {
            if let Some(r) = cx.means.get(svc, "cosine", m).or(cx.means.get(svc, "schema_ok", m)) {
                t.rows.push(vec![
                    inp.services[svc].clone(),
                    m.to_string(),
                    f3(cx.means.mean(svc, "cosine", m)),
                    pct(cx.means.mean(svc, "schema_ok", m)),
                    pct(cx.means.mean(svc, "fragment", m)),
                    r.n.to_string(),
                ]);
            }
        }
    }
    t
}

/// RQ1's tests: models within each service, pairwise over all services, metric agreement.
fn rq1_tests(inp: &Input, cx: &Cx) -> Table {
    let mut t = Table::new("rq1_tests", "RQ1. Models differ within each service (Friedman, blocks = pairs) and pairwise over all services (Wilcoxon signed-rank, Holm-adjusted, rank-biserial r) on cosine.", &["Test", "Service", "Metric", "A", "B", "n", "Statistic", "p", "p (Holm)", "Effect", "Method"]);
    for r in inp.stats.iter().filter(|r| r.test == "friedman" && r.service != "all") {
        t.rows.push(test_cells(r, inp));
    }
    for r in inp.stats.iter().filter(|r| {
        r.test == "wilcoxon"
            && r.service == "all"
            && r.metric == "cosine"
            && cx.models.contains(r.group_a.as_str())
            && cx.models.contains(r.group_b.as_str())
    }) {
        t.rows.push(test_cells(r, inp));
    }
    for r in inp.stats.iter().filter(|r| r.test == "spearman" && r.group_a == "cosine") {
        t.rows.push(test_cells(r, inp));
    }
    t
}

/// RQ2: scale and specialization tests (open models).
fn rq2_scale(inp: &Input) -> Table {
    let mut t = Table::new("rq2_scale", "RQ2. Scale and specialization (open models): Spearman ρ of size vs per-model mean; Mann–Whitney U with Cliff's δ between tiers and general vs code.", &["Test", "Service", "Metric", "A", "B", "n", "Statistic", "p", "p (Holm)", "Effect", "Method"]);
    for r in inp.stats.iter().filter(|r| {
        (r.test == "spearman" && r.group_a == "size_b")
            || (r.test == "mann_whitney" && (r.group_a == "general" || Tier::ALL.iter().any(|t| t.name() == r.group_a)))
    }) {
        t.rows.push(test_cells(r, inp));
    }
    t
}

/// RQ2: tier means by type (open models).
fn rq2_tiers(cx: &Cx) -> Table {
    let mut t =
        Table::new("rq2_tiers", "RQ2. Tier means by type (open models).", &["Tier", "Type", "Cosine", "Schema%", "n"]);
    for tier in Tier::ALL {
        for ty in ["general", "code"] {
            let g = format!("tier:{}:{ty}", tier.name());
            if let Some(r) = cx.means.get("all", "cosine", &g).or(cx.means.get("all", "schema_ok", &g)) {
                t.rows.push(vec![
                    tier.label().into(),
                    ty.into(),
                    f3(cx.means.mean("all", "cosine", &g)),
                    pct(cx.means.mean("all", "schema_ok", &g)),
                    r.n.to_string(),
                ]);
            }
        }
    }
    t
}

/// RQ3: the service effect.
fn rq3_services(inp: &Input) -> Table {
    let mut t = Table::new("rq3_services", "RQ3. Service effect: Friedman over services on per-model means (blocks = models), Holm-adjusted Wilcoxon between services on per-model means, and Cliff's δ on per-configuration scores.", &["Test", "Service", "Metric", "A", "B", "n", "Statistic", "p", "p (Holm)", "Effect", "Method"]);
    let svc_names: BTreeSet<&str> = inp.services.keys().map(|s| s.as_str()).collect();
    for r in inp.stats.iter().filter(|r| {
        r.service == "all"
            && (r.metric == "cosine" || r.metric == "schema_ok")
            && ((r.test == "friedman" && r.group_b == "per-model means")
                || ((r.test == "wilcoxon" || r.test == "mann_whitney") && svc_names.contains(r.group_a.as_str())))
    }) {
        t.rows.push(test_cells(r, inp));
    }
    t
}

/// RQ6: zero-shot against the final repair round, per model, when there are repair rounds.
fn rq6_means(inp: &Input) -> Table {
    let mut t = Table::new(
        "rq6_means",
        "RQ6. Zero-shot vs final repair round: mean cosine and schema validity per model.",
        &["Model", "Cosine zero-shot", "Cosine repaired", "Schema% zero-shot", "Schema% repaired", "Pairs repaired"],
    );
    for (m, p) in figures::plane_points(inp) {
        if let Some((rc, rs, nrep)) = p.repaired {
            t.rows.push(vec![
                m,
                f3(Some(p.cosine)),
                f3(Some(rc)),
                pct(Some(p.schema)),
                pct(Some(rs)),
                nrep.to_string(),
            ]);
        }
    }
    t
}

/// McNemar between models within each service, on every binary outcome.
fn validity_contrasts(inp: &Input, cx: &Cx) -> Table {
    let mut t = Table::new("validity_contrasts", "Paired schema and lint validity between models within each service (McNemar; b = first valid only, c = second valid only; Holm per service).", &["Test", "Service", "Metric", "A", "B", "n", "b", "c", "Statistic", "p", "p (Holm)", "Effect", "Method"]);
    for r in inp.stats.iter().filter(|r| {
        r.test == "mcnemar"
            && !r.group_b.ends_with(" repaired")
            && !is_fine_tune(r)
            && cx.models.contains(r.group_b.as_str())
    }) {
        let mut c = test_cells(r, inp);
        c.insert(6, r.b.map_or("–".into(), |v| v.to_string()));
        c.insert(7, r.c.map_or("–".into(), |v| v.to_string()));
        t.rows.push(c);
    }
    t
}

/// Fragment rates per model and service.
fn fragments(inp: &Input, cx: &Cx) -> Table {
    let mut header = vec!["Model".to_string()];
    header.extend(inp.services.values().cloned());
    header.push("All".into());
    let mut t = Table::new(
        "fragments",
        "Fragment rate (%) of outputs: files lacking the keys a standalone file of the service needs.",
        &[],
    );
    t.header = header;
    for m in &cx.models {
        let mut row = vec![m.to_string()];
        for svc in inp.services.keys() {
            row.push(pct(cx.means.mean(svc, "fragment", m)));
        }
        row.push(pct(cx.means.mean("all", "fragment", m)));
        t.rows.push(row);
    }
    t
}

/// pass@k where models have several samples.
fn pass_at_k(inp: &Input) -> Table {
    let mut t = Table::new(
        "pass_at_k",
        "pass@k of schema validity (unbiased estimator) where models have several samples.",
        &["Service", "Model", "k", "pass@k", "n pairs"],
    );
    for r in inp.stats.iter().filter(|r| r.test == "pass_at_k") {
        t.rows.push(vec![
            disp(inp, &r.service),
            r.group_a.clone(),
            r.group_b.trim_start_matches("k=").into(),
            f3(r.effect),
            r.n.to_string(),
        ]);
    }
    t
}

/// Which tests ran, on what n, with which p-value method.
fn tests_run(inp: &Input) -> Table {
    let mut t = Table::new(
        "tests_run",
        "Tests run: how many rows of each test the stats table holds, on what n, with which p-value method.",
        &["Test", "Rows", "n min", "n max", "Methods"],
    );
    let mut by: BTreeMap<&str, (usize, u64, u64, BTreeSet<&str>)> = BTreeMap::new();
    for r in inp.stats {
        let e = by.entry(r.test.as_str()).or_insert((0, u64::MAX, 0, BTreeSet::new()));
        e.0 += 1;
        e.1 = e.1.min(r.n);
        e.2 = e.2.max(r.n);
        if !r.method.is_empty() {
            e.3.insert(r.method.as_str());
        }
    }
    for (k, (c, lo, hi, ms)) in by {
        t.rows.push(vec![
            k.into(),
            c.to_string(),
            lo.to_string(),
            hi.to_string(),
            ms.into_iter().collect::<Vec<_>>().join("; "),
        ]);
    }
    t
}

/// The contamination screen per model and service (issue 45): the high-risk rate on references
/// beside the rate on their never-published twins (the screen's false positives), the sign test
/// that references are recalled more, and Min-K%'s AUC where the backend scored the texts.
fn contamination_table(inp: &Input) -> Table {
    let mut t = Table::new(
        "contamination",
        "Contamination screen (DevOps-Gym's prefix completion): high-risk continuations of the references and of their twins (same files, edits no model saw; 95% Wilson CIs), the one-sided sign test over pairs with both (real-only / twin-only), the paired difference of the rates and Min-K% Prob's AUC of real vs twin (95% bootstrap CIs; 0.5: nothing recalled).",
        &["Model", "Service", "References high-risk", "Twins high-risk", "Real-only / twin-only", "Sign p", "Difference", "Min-K% AUC"],
    );
    // Percentages with one decimal, an AUC (scale 1) with three.
    let ci = |v: Option<f64>, lo: Option<f64>, hi: Option<f64>, scale: f64| {
        let d = if scale == 1.0 { 3 } else { 1 };
        match (v, lo, hi) {
            (Some(v), Some(lo), Some(hi)) => format!("{:.d$} [{:.d$}, {:.d$}]", v * scale, lo * scale, hi * scale),
            (Some(v), ..) => format!("{:.d$}", v * scale),
            _ => "–".into(),
        }
    };
    let find = |test: &str, svc: &str, m: &str, b: &str| {
        inp.stats.iter().find(|r| r.test == test && r.service == svc && r.group_a == m && r.group_b == b)
    };
    let keys: BTreeSet<(&str, &str)> = inp
        .stats
        .iter()
        .filter(|r| r.test == "contamination_rate")
        .map(|r| (r.group_a.as_str(), r.service.as_str()))
        .collect();
    for (m, svc) in keys {
        let rate = |b: &str| {
            find("contamination_rate", svc, m, b).map_or("–".into(), |r| {
                let k = r.effect.map_or(0, |e| (e * r.n as f64).round() as u64);
                format!("{k}/{} = {}%", r.n, ci(r.effect, r.ci_low, r.ci_high, 100.0))
            })
        };
        let sign = find("contamination_sign", svc, m, "twin");
        let auc = find("contamination_auc", svc, m, "twin");
        t.rows.push(vec![
            m.into(),
            disp(inp, svc),
            rate("real"),
            rate("twin"),
            sign.map_or("–".into(), |r| format!("{} / {}", r.b.unwrap_or(0), r.c.unwrap_or(0))),
            sign.and_then(|r| r.p).map_or("–".into(), |p| format!("{p:.3}")),
            sign.map_or("–".into(), |r| ci(r.effect, r.ci_low, r.ci_high, 100.0) + " pp"),
            auc.map_or("–".into(), |r| format!("{} (n = {})", ci(r.effect, r.ci_low, r.ci_high, 1.0), r.n)),
        ]);
    }
    t
}

pub(crate) fn is_fine_tune(r: &StatRow) -> bool {
    r.method.contains(FINE_TUNE_TAG)
}

pub(crate) fn disp(inp: &Input, svc: &str) -> String {
    inp.services.get(svc).cloned().unwrap_or_else(|| if svc == "all" { "All services".into() } else { svc.into() })
}

pub(crate) fn test_cells(r: &StatRow, inp: &Input) -> Vec<String> {
    let effect = match r.effect {
        Some(e) => format!("{} = {e:.3}", r.effect_name),
        None => "–".into(),
    };
    vec![
        r.test.clone(),
        disp(inp, &r.service),
        r.metric.clone(),
        inp.services.get(&r.group_a).cloned().unwrap_or_else(|| r.group_a.clone()),
        inp.services.get(&r.group_b).cloned().unwrap_or_else(|| r.group_b.clone()),
        r.n.to_string(),
        r.statistic.map_or("–".into(), |v| format!("{v:.4}")),
        fmt_p(r.p),
        fmt_p(r.p_holm),
        effect,
        r.method.clone(),
    ]
}

/// The stats table itself as CSV (every row, full precision).
pub fn stats_csv(stats: &[StatRow]) -> String {
    let mut s = String::from(
        "test,service,metric,group_a,group_b,n,statistic,p,p_holm,effect,effect_name,ci_low,ci_high,b,c,method\n",
    );
    let o = |v: Option<f64>| v.map_or(String::new(), |v| format!("{v:e}"));
    let u = |v: Option<u64>| v.map_or(String::new(), |v| v.to_string());
    for r in stats {
        let cells = [
            csv_cell(&r.test),
            csv_cell(&r.service),
            csv_cell(&r.metric),
            csv_cell(&r.group_a),
            csv_cell(&r.group_b),
            r.n.to_string(),
            o(r.statistic),
            o(r.p),
            o(r.p_holm),
            o(r.effect),
            csv_cell(&r.effect_name),
            o(r.ci_low),
            o(r.ci_high),
            u(r.b),
            u(r.c),
            csv_cell(&r.method),
        ];
        s.push_str(&cells.join(","));
        s.push('\n');
    }
    s
}

/// All report files: (relative path, content).
pub fn build(inp: &Input) -> Vec<(String, String)> {
    let tables = tables(inp);
    let figs = figures::all(inp);
    let mut files = Vec::new();
    for t in &tables {
        files.push((format!("tables/{}.csv", t.id), t.csv()));
    }
    files.push(("tables/stats.csv".into(), stats_csv(inp.stats)));
    for (name, _, svg) in &figs {
        files.push((format!("figures/{name}.svg"), svg.clone()));
    }
    let n_units = inp.units.iter().filter(|u| u.round == 0 && u.sample == 0).count();
    let n_models = inp.units.iter().map(|u| u.model.as_str()).collect::<BTreeSet<_>>().len();
    let summary = format!(
        "{} zero-shot configurations from {} models over {} services; {} rows in the stats table. Defaults: Wilcoxon zero_method=wilcox, no continuity correction, exact null for ≤ 50 pairs without ties/zeros (sign-flip permutation for ≤ 13 with ties/zeros), normal otherwise; Mann–Whitney two-sided with continuity correction, exact for a sample ≤ 8 without ties; McNemar exact binomial below 25 discordant pairs, else chi-square with continuity correction; Holm per family; percentile bootstrap CIs.",
        n_units,
        n_models,
        inp.services.len(),
        inp.stats.len()
    );
    let note = degenerate_note(inp);
    let errors = errors_note(inp);
    let models: Vec<&str> = inp.models.iter().map(|m| m.model.as_str()).collect();
    let headline = figures::headline(inp, &Means::new(inp.stats), &models);
    let browser = browser::files(inp.samples, inp.title, inp.services, inp.metrics);
    let browse = !browser.is_empty();
    files.extend(browser);
    let mut md = format!("# {}\n\n{summary}\n\n", inp.title);
    if let Some(e) = &errors {
        md.push_str(&format!("> **{e}**\n\n"));
    }
    if let Some(n) = &note {
        md.push_str(&format!("> **{n}**\n\n"));
    }
    if let Some(svg) = &headline {
        files.push(("figures/headline.svg".into(), svg.clone()));
        md.push_str(&format!("![{HEADLINE}](figures/headline.svg)\n\n*{HEADLINE}*\n\n"));
    }
    if browse {
        md.push_str("Every output, filterable, with diffs against its reference: [samples.html](samples.html).\n\n");
    }
    // What did not run (an empty table) is left out of the page; its CSV stays, header only.
    for t in tables.iter().filter(|t| !t.rows.is_empty()) {
        md.push_str(&t.markdown());
    }
    for (name, caption, _) in &figs {
        md.push_str(&format!("![{caption}](figures/{name}.svg)\n\n*{caption}*\n\n"));
    }
    files.push(("report.md".into(), md));
    let mut html = format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{}</title><style>{}</style></head><body><h1>{}</h1><p>{}</p>\n",
        esc(inp.title),
        CSS,
        esc(inp.title),
        esc(&summary)
    );
    if let Some(e) = &errors {
        let _ = writeln!(html, "<p class=\"warn\" id=\"errors\"><strong>{}</strong></p>", esc(e));
    }
    if let Some(n) = &note {
        let _ = writeln!(html, "<p class=\"warn\" id=\"degenerate\"><strong>{}</strong></p>", esc(n));
    }
    if browse {
        html.push_str("<p class=\"browse\"><a href=\"samples.html\">Browse every output →</a> filter by service, model, validity and metric; see each pair's description, reference and every model's answer with a diff, its scores, schema errors and repair rounds.</p>\n");
    }
    if let Some(svg) = &headline {
        let body = svg.find("<svg").map_or(svg.as_str(), |i| &svg[i..]);
        let _ = writeln!(html, "<figure id=\"headline\">{body}<figcaption>{}</figcaption></figure>", esc(HEADLINE));
    }
    for t in tables.iter().filter(|t| !t.rows.is_empty()) {
        html.push_str(&t.html());
    }
    for (name, caption, svg) in &figs {
        let body = svg.find("<svg").map_or(svg.as_str(), |i| &svg[i..]);
        let _ = writeln!(html, "<figure id=\"{name}\">{body}<figcaption>{}</figcaption></figure>", esc(caption));
    }
    html.push_str("</body></html>\n");
    files.push(("index.html".into(), html));
    files
}

const HEADLINE: &str = "The study at a glance (zero-shot, per service): each model's mean cosine similarity against its schema validity (top; a model's colour is the same in every panel), and the share of its outputs each check of the validity ladder accepts: YAML parse, schema, the service's own validator on the text as written and with fragments completed (bottom).";

const CSS: &str = "body{font-family:sans-serif;max-width:1100px;margin:2em auto;color:#222}table{border-collapse:collapse;margin:1.5em 0;font-size:13px}caption{text-align:left;font-weight:bold;padding:4px 0}th,td{border-bottom:1px solid #ddd;padding:3px 8px;text-align:left}tr.group td{background:#f2f2f2;font-style:italic}figure{margin:2em 0}figcaption{font-size:13px;color:#444}.warn{background:#fff4e5;border-left:4px solid #e67e22;padding:8px 12px}.browse{font-size:15px}.browse a{font-weight:bold}";

/// Per-model means used by figures: similarity metrics of round 0.
pub fn model_metric_values(units: &[Unit], metric: &str) -> BTreeMap<String, Vec<f64>> {
    let mut m: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    for u in units.iter().filter(|u| u.round == 0 && u.sample == 0) {
        if let Some(v) = u.values.get(metric) {
            m.entry(u.model.clone()).or_default().push(*v);
        }
    }
    m
}

pub(crate) fn mean_of(v: &[f64]) -> f64 {
    mean(v)
}

/// The metrics drawn as box plots: the graded similarity metrics the study tests.
pub(crate) fn box_metrics(inp: &Input) -> Vec<&'static str> {
    doc2ci_stats::study::similarity_metrics(inp.metrics)
}

/// One file of the report, as the `report` table indexes it.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct FileRow {
    pub path: String,
    pub bytes: u64,
    /// Lines for text files: a quick check that nothing is empty.
    pub lines: u64,
}

impl FileRow {
    pub fn new(path: &str, content: &str) -> Self {
        FileRow { path: path.into(), bytes: content.len() as u64, lines: content.lines().count() as u64 }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mostly_degenerate_models_are_named_before_any_table() {
        let services = BTreeMap::new();
        let degenerate: BTreeMap<String, (usize, usize)> =
            [("smollm2".to_string(), (14, 16)), ("gpt-4o".to_string(), (1, 16))].into();
        let inp = Input {
            title: "t",
            models: &[],
            units: &[],
            stats: &[],
            services: &services,
            metrics: &[],
            lints: &[],
            degenerate: &degenerate,
            errors: &BTreeMap::new(),
            samples: &Default::default(),
        };
        let note = degenerate_note(&inp).unwrap();
        assert!(note.contains("smollm2: 14 of 16 (88%)") && !note.contains("gpt-4o"), "{note}");
        let files = build(&inp);
        let html = &files.iter().find(|(p, _)| p == "index.html").unwrap().1;
        let at = html.find("id=\"degenerate\"").expect("the note is in the page");
        assert!(html.find("<table").is_none_or(|t| at < t), "the note comes before the tables");
        // Nothing ran, so no table is shown, and no "(no rows)" placeholder either; the CSVs stay.
        assert!(!html.contains("<table") && !html.contains("no rows"), "{html}");
        assert!(files.iter().any(|(p, _)| p == "tables/stats.csv"));
        let quiet = BTreeMap::from([("gpt-4o".to_string(), (1, 16))]);
        assert!(degenerate_note(&Input { degenerate: &quiet, ..inp }).is_none());
    }

    /// Issue 44: errored requests are said before anything else, per model and service, and
    /// Table I shows them beside n; a study without any shows neither.
    #[test]
    fn errored_requests_are_said_first_and_counted_beside_n() {
        let services = BTreeMap::from([("github-actions".to_string(), "GitHub Actions".to_string())]);
        let errors = BTreeMap::from([
            (("m".to_string(), "github-actions".to_string()), (2, 1)),
            (("n".to_string(), "github-actions".to_string()), (0, 0)),
        ]);
        let mean = |model: &str, metric: &str, v: f64| doc2ci_stats::study::StatRow {
            test: "mean".into(),
            service: "all".into(),
            metric: metric.into(),
            group_a: model.into(),
            group_b: String::new(),
            n: 3,
            statistic: None,
            p: None,
            p_holm: None,
            effect: Some(v),
            effect_name: "mean".into(),
            ci_low: None,
            ci_high: None,
            b: None,
            c: None,
            method: String::new(),
        };
        let stats = [mean("m", "cosine", 0.5), mean("n", "cosine", 0.6)];
        let inp = Input {
            title: "t",
            models: &[],
            units: &[],
            stats: &stats,
            services: &services,
            metrics: &[],
            lints: &[],
            degenerate: &BTreeMap::new(),
            errors: &errors,
            samples: &Default::default(),
        };
        let note = errors_note(&inp).unwrap();
        assert!(
            note.starts_with("3 requests errored") && note.contains("m: GitHub Actions 2, and 1 in repair rounds"),
            "{note}"
        );
        assert!(!note.contains("n: "), "{note}");
        let t1 = tables(&inp).into_iter().find(|t| t.id == "table1").unwrap();
        assert_eq!(t1.header.last().map(String::as_str), Some("Errors"));
        let by_model: BTreeMap<&str, &str> =
            t1.rows.iter().map(|r| (r[0].as_str(), r.last().unwrap().as_str())).collect();
        assert_eq!(by_model, BTreeMap::from([("m", "2"), ("n", "0")]));
        let files = build(&inp);
        let html = &files.iter().find(|(p, _)| p == "index.html").unwrap().1;
        assert!(html.find("id=\"errors\"").unwrap() < html.find("<table").unwrap());
        let none = BTreeMap::new();
        let clean = Input { errors: &none, ..inp };
        assert!(errors_note(&clean).is_none());
        assert!(!tables(&clean)[0].header.contains(&"Errors".to_string()));
    }
}
