//! `doc2ci compare A B` (issue 46): two cells of any runs compared sample by sample. A cell is a
//! model's answers at a repair round (and optionally one sample, one service) in this study's
//! warehouse, another warehouse (its folder or its `pipeline.toml`), a warehouse's object-store
//! mirror, or a release folder written with `export benchmark --with-results`.
//!
//! This file finds and reads the two sides; the tests are `doc2ci_stats::compare`'s and the page
//! `doc2ci_report::compare`'s. The rows land in the `comparisons` table of this study's warehouse
//! (a command's table: no stage declares it and the engine never sweeps it), one partition per
//! comparison, the page beside them.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use doc2ci_rows::{Generation, Lint, MetricInfo, MetricKind, Pair, Score, Validation};
use doc2ci_stats::compare::{CompareRow, Key, Metric, Params, Side, WORSE};
use doc2ci_stats::study::Unit;
use serde::de::DeserializeOwned;

use crate::config::Config;
use crate::jobs::tables::{COMPARISONS, PAIRS};
use crate::release::RESULT_TABLES;
use crate::warehouse::{read_file_rows, Partition, TableDef, Warehouse};

/// Which answers of a model a cell holds: `round=N` is each sample's answer as of round N (its
/// last round ≤ N: a pair that needed no repair keeps its zero-shot answer), `round=last` its
/// final one.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Round {
    AsOf(u32),
    Last,
}

/// One side as the user named it: `MODEL`, or `model=M[,round=N|last][,sample=N][,service=S]`,
/// then optionally `@WHERE` (a warehouse folder, a `pipeline.toml`, a release folder, or an
/// `s3://`, `gs://`, `az://`, `file://` mirror).
#[derive(Debug, Clone, PartialEq)]
pub struct Cell {
    pub spec: String,
    pub model: String,
    pub round: Round,
    pub sample: Option<u32>,
    pub service: Option<String>,
    pub at: Option<String>,
}

impl Cell {
    pub fn parse(spec: &str) -> Result<Cell> {
        let (sel, at) = match spec.split_once('@') {
            Some((s, a)) if !a.is_empty() => (s, Some(a.to_string())),
            Some(_) => bail!("`{spec}`: nothing after `@` (a warehouse folder, pipeline.toml, release folder or URL)"),
            None => (spec, None),
        };
        let mut c = Cell {
            spec: spec.to_string(),
            model: String::new(),
            round: Round::AsOf(0),
            sample: None,
            service: None,
            at,
        };
        for part in sel.split(',').filter(|p| !p.is_empty()) {
            let Some((k, v)) = part.split_once('=') else {
                if c.model.is_empty() {
                    c.model = part.to_string();
                    continue;
                }
                bail!("`{spec}`: `{part}` is not KEY=VALUE (keys: model, round, sample, service)");
            };
            let number = |what: &str| -> Result<u32> {
                v.parse().with_context(|| format!("`{spec}`: {what} `{v}` is not a whole number"))
            };
            match k {
                "model" => c.model = v.to_string(),
                "round" if v == "last" => c.round = Round::Last,
                "round" => c.round = Round::AsOf(number("round")?),
                "sample" => c.sample = Some(number("sample")?),
                "service" => c.service = Some(v.to_string()),
                _ => bail!("`{spec}`: unknown key `{k}` (keys: model, round, sample, service)"),
            }
        }
        if c.model.is_empty() {
            bail!("`{spec}` names no model (`MODEL` or `model=MODEL`)");
        }
        Ok(c)
    }
}

/// Where a side's rows are.
enum Store {
    Warehouse(Warehouse),
    /// A release folder: its results files, each checked against its checksum list.
    Release(PathBuf),
}

/// Rows that belong to one model.
trait OfModel {
    fn model(&self) -> &str;
}

macro_rules! of_model {
    ($($t:ty),*) => { $(impl OfModel for $t { fn model(&self) -> &str { &self.model } })* };
}
of_model!(Generation, Validation, Lint, Score);

impl Store {
    /// `at` relative to the current folder; the mirror's copy goes under this study's warehouse.
    fn open(at: Option<&str>, here: &Warehouse) -> Result<(Store, String)> {
        let Some(at) = at else { return Ok((Store::Warehouse(Warehouse::new(&here.root)), "this study".into())) };
        if at.contains("://") {
            let remote = crate::remote::Remote::open(at)?;
            let dest = here.meta().join("compare").join(&blake3::hash(at.as_bytes()).to_hex()[..16]);
            let tables: Vec<&str> = RESULT_TABLES.iter().chain(&[PAIRS]).map(|t| t.name).collect();
            remote.download(&tables, &dest)?;
            return Ok((Store::Warehouse(Warehouse::new(&dest)), doc2ci_llm::redact_url(at)));
        }
        let path = Path::new(at);
        if path.is_file() && path.extension().is_some_and(|e| e == "toml") {
            let cfg = crate::jobs::load(path)?;
            return Ok((Store::Warehouse(Warehouse::new(&cfg.warehouse)), at.to_string()));
        }
        if path.join(crate::benchmark::SUMS).is_file() {
            return Ok((Store::Release(path.to_path_buf()), at.to_string()));
        }
        if RESULT_TABLES.iter().any(|t| path.join(t.name).is_dir()) {
            return Ok((Store::Warehouse(Warehouse::new(path)), at.to_string()));
        }
        bail!("{at}: neither a warehouse (no generations, validations, lints or scores folder), a pipeline.toml, a release folder (no SHA256SUMS) nor a URL")
    }

    fn rows<T: DeserializeOwned + OfModel>(&self, t: TableDef, model: &str) -> Result<Vec<T>> {
        match self {
            Store::Warehouse(wh) => wh.read_table(t, |p| p.get("model") == Some(model)),
            Store::Release(dir) => {
                let i = RESULT_TABLES.iter().position(|x| *x == t).expect("a results table");
                match crate::benchmark::verified_file(dir, crate::benchmark::RESULTS[i])? {
                    Some(f) => Ok(read_file_rows::<T>(&f, None)?.into_iter().filter(|r| r.model() == model).collect()),
                    None => Ok(Vec::new()),
                }
            }
        }
    }

    fn pairs(&self) -> Result<Vec<Pair>> {
        match self {
            Store::Warehouse(wh) => wh.read_table(PAIRS, |_| true),
            Store::Release(dir) => match crate::benchmark::verified_file(dir, crate::benchmark::PAIRS_PARQUET)? {
                Some(f) => read_file_rows(&f, None),
                None => bail!("{}: its checksum list does not name {}", dir.display(), crate::benchmark::PAIRS_PARQUET),
            },
        }
    }

    /// The models the store has answers of (for an error that says what there is).
    fn models(&self) -> Result<BTreeSet<String>> {
        Ok(match self {
            Store::Warehouse(wh) => wh
                .partitions_on_disk(crate::jobs::tables::GENERATIONS)
                .iter()
                .filter_map(|id| Partition::from_id(&[crate::jobs::tables::GENERATIONS], id))
                .filter_map(|p| p.get("model").map(str::to_string))
                .collect(),
            Store::Release(dir) => match crate::benchmark::verified_file(dir, crate::benchmark::RESULTS[0])? {
                Some(f) => read_file_rows::<Generation>(&f, None)?.into_iter().map(|g| g.model).collect(),
                None => BTreeSet::new(),
            },
        })
    }
}

/// One side, read: its units at the cell's round and what the page shows of them.
pub struct Loaded {
    pub label: String,
    pub units: Vec<Unit>,
    pub errored: HashSet<Key>,
    pub references: HashMap<(String, String), String>,
    pub pairs: HashMap<(String, String), Pair>,
    /// The answer each unit is of, with its verdicts and scores.
    pub generations: HashMap<Key, Generation>,
    pub validations: HashMap<Key, Validation>,
    pub lints: HashMap<Key, Vec<Lint>>,
    pub scores: HashMap<Key, Score>,
}

/// Every metric a comparison may test: each score metric (a bool one is a binary outcome) and
/// the validity indicators but `fragment`, in report order. `across`: the sides are of different
/// studies, where a corpus-relative metric's difference may be the corpora's.
pub fn metrics(across: bool) -> Vec<Metric> {
    let caveat = "corpus-relative: each side scored against its own study's references, so a difference \
                  may be the two studies' pairs rather than the answers";
    let mut out: Vec<Metric> = doc2ci_score::METRICS
        .iter()
        .map(|m| Metric {
            name: m.info.name.into(),
            binary: m.info.kind == MetricKind::Bool,
            higher_is_better: m.info.higher_is_better,
            caveat: (across && m.corpus).then(|| caveat.to_string()),
        })
        .collect();
    let outcomes = doc2ci_stats::study::binary_outcomes(&[]);
    out.extend(outcomes.iter().map(|n| Metric {
        name: (*n).into(),
        binary: true,
        higher_is_better: true,
        caveat: None,
    }));
    out
}

fn key_of(service: &str, pair_id: &str, sample: u32) -> Key {
    (service.to_string(), pair_id.to_string(), sample)
}

/// The rows of each sample's chosen round, by sample; `id` reads a row's service, pair, sample
/// and round.
fn of_chosen_rounds<R>(
    rows: Vec<R>,
    id: impl Fn(&R) -> (&String, &String, u32, u32),
    chosen: impl Fn(&str, &str, u32, u32) -> bool,
) -> impl Iterator<Item = (Key, R)> {
    rows.into_iter().filter_map(move |r| {
        let (service, pair, sample, round) = id(&r);
        let k = chosen(service, pair, sample, round).then(|| key_of(service, pair, sample))?;
        Some((k, r))
    })
}

pub fn load(cell: &Cell, here: &Warehouse) -> Result<Loaded> {
    let (store, place) = Store::open(cell.at.as_deref(), here)?;
    let m = &cell.model;
    let keep_key = |service: &str, sample: u32| {
        cell.service.as_deref().is_none_or(|s| s == service) && cell.sample.is_none_or(|n| n == sample)
    };
    let gens: Vec<Generation> =
        store.rows::<Generation>(RESULT_TABLES[0], m)?.into_iter().filter(|g| keep_key(&g.service, g.sample)).collect();
    if gens.is_empty() {
        let have = store.models()?;
        let there = if have.is_empty() {
            String::new()
        } else {
            format!(" (it has: {})", have.into_iter().collect::<Vec<_>>().join(", "))
        };
        bail!("`{}`: {place} has no answers of model `{m}` matching the cell{there}", cell.spec);
    }
    let validations: Vec<Validation> = store.rows(RESULT_TABLES[1], m)?;
    let lints: Vec<Lint> = store.rows(RESULT_TABLES[2], m)?;
    let scores: Vec<Score> = store.rows(RESULT_TABLES[3], m)?;
    // Every metric, in the study or not: `units` keeps the ones marked in the study.
    let all: Vec<MetricInfo> =
        doc2ci_score::metric_infos().iter().map(|i| MetricInfo { in_study: true, ..*i }).collect();
    let units = doc2ci_stats::study::units(&scores, &validations, &lints, &all);

    // Each sample's round: the last one asked within the cell's round.
    let within = |r: u32| match cell.round {
        Round::AsOf(n) => r <= n,
        Round::Last => true,
    };
    let mut round: HashMap<Key, (u32, bool)> = HashMap::new();
    for g in gens.iter().filter(|g| within(g.round)) {
        let e = round.entry(key_of(&g.service, &g.pair_id, g.sample)).or_insert((g.round, g.error.is_some()));
        if g.round >= e.0 {
            *e = (g.round, g.error.is_some());
        }
    }
    let errored: HashSet<Key> = round.iter().filter(|(_, (_, err))| *err).map(|(k, _)| k.clone()).collect();
    let at = |k: &Key, r: u32| round.get(k).is_some_and(|(want, err)| *want == r && !err);
    let units: Vec<Unit> = units
        .into_iter()
        .filter(|u| keep_key(&u.service, u.sample) && at(&key_of(&u.service, &u.pair_id, u.sample), u.round))
        .collect();
    let chosen = |service: &str, pair: &str, sample: u32, r: u32| at(&key_of(service, pair, sample), r);
    let generations = of_chosen_rounds(gens, |g| (&g.service, &g.pair_id, g.sample, g.round), chosen).collect();
    let validations = of_chosen_rounds(validations, |v| (&v.service, &v.pair_id, v.sample, v.round), chosen).collect();
    let mut by_key: HashMap<Key, Vec<Lint>> = HashMap::new();
    for (k, l) in of_chosen_rounds(lints, |l| (&l.service, &l.pair_id, l.sample, l.round), chosen) {
        by_key.entry(k).or_default().push(l);
    }
    let scores = of_chosen_rounds(scores, |s| (&s.service, &s.pair_id, s.sample, s.round), chosen).collect();
    let pairs: HashMap<(String, String), Pair> =
        store.pairs()?.into_iter().map(|p| ((p.service.clone(), p.pair_id.clone()), p)).collect();
    let references =
        pairs.iter().map(|(k, p)| (k.clone(), blake3::hash(p.reference.as_bytes()).to_hex().to_string())).collect();
    Ok(Loaded {
        label: if cell.at.is_some() { cell.spec.clone() } else { format!("{} (this study)", cell.spec) },
        units,
        errored,
        references,
        pairs,
        generations,
        validations,
        lints: by_key,
        scores,
    })
}

/// A folder-safe name of the comparison: both cells, shortened with a hash when long.
pub fn name(a: &Cell, b: &Cell) -> String {
    let slug = |s: &str| -> String {
        s.chars().map(|c| if c.is_ascii_alphanumeric() || "._-".contains(c) { c } else { '-' }).collect()
    };
    let full = format!("{}--vs--{}", slug(&a.spec), slug(&b.spec));
    if full.len() <= 80 {
        return full;
    }
    let hash = blake3::hash(format!("{}\n{}", a.spec, b.spec).as_bytes()).to_hex()[..10].to_string();
    format!("{}-{hash}", &full[..60])
}

/// What `compare` did: the rows, where they are, and the verdict of the gate.
pub struct Done {
    pub name: String,
    pub rows: Vec<CompareRow>,
    pub page: PathBuf,
    pub a: Loaded,
    pub b: Loaded,
}

/// Runs the comparison and writes its partition and page into the warehouse of `cfg`.
pub fn run(cfg: &Config, a: &Cell, b: &Cell, p: &Params) -> Result<Done> {
    let wh = Warehouse::new(&cfg.warehouse);
    std::fs::create_dir_all(&wh.root).with_context(|| format!("cannot create {}", wh.root.display()))?;
    let la = load(a, &wh)?;
    let lb = load(b, &wh)?;
    fn side(l: &Loaded) -> Side<'_> {
        Side {
            label: l.label.clone(),
            units: l.units.iter().collect(),
            references: l.references.clone(),
            errored: l.errored.clone(),
        }
    }
    let across = a.at != b.at;
    let rows = doc2ci_stats::compare::compare(&side(&la), &side(&lb), &metrics(across), p);
    let name = name(a, b);
    let title = format!("{} against {}", lb.label, la.label);
    let page = doc2ci_report::compare::files(&title, &rows, &view(&la), &view(&lb), doc2ci_score::metric_infos());
    let part = Partition::new(COMPARISONS, &[&name]);
    let _lock = crate::engine::Lock::take(&wh)?;
    let extra: Vec<(String, Vec<u8>)> = page.into_iter().map(|(f, s)| (f, s.into_bytes())).collect();
    wh.write_with(&part, &rows, &extra)?;
    Ok(Done { page: wh.dir(&part).join(doc2ci_report::compare::PAGE), name, rows, a: la, b: lb })
}

fn view(l: &Loaded) -> doc2ci_report::compare::SideView<'_> {
    doc2ci_report::compare::SideView {
        pairs: &l.pairs,
        generations: &l.generations,
        validations: &l.validations,
        lints: &l.lints,
        scores: &l.scores,
    }
}

/// The summary on standard output, in Markdown.
pub fn summary(d: &Done) -> String {
    let rows = &d.rows;
    let count = |kind: &str| rows.iter().filter(|r| r.kind == kind).count();
    let joined: BTreeMap<&str, u64> = rows.iter().filter(|r| r.kind == "test").fold(BTreeMap::new(), |mut m, r| {
        let e = m.entry(r.service.as_str()).or_insert(0);
        *e = (*e).max(r.n);
        m
    });
    let mut s = format!("# {} against {}\n\nA = {}\nB = {}\n\n", d.b.label, d.a.label, d.a.label, d.b.label);
    let services: Vec<String> = joined.iter().filter(|(k, _)| **k != "all").map(|(k, n)| format!("{k} {n}")).collect();
    let errored_b = rows.iter().filter(|r| r.kind == "only_a" && r.method.contains("errored")).count();
    let errored_a = rows.iter().filter(|r| r.kind == "only_b" && r.method.contains("errored")).count();
    s.push_str(&format!(
        "Samples in both: {}. Only in A: {} ({} of them B's request errored). Only in B: {} ({} A's errored). \
         Pairs whose reference differs (left out): {}.\n\n",
        services.join(", "),
        count("only_a"),
        errored_b,
        count("only_b"),
        errored_a,
        count("reference_differs")
    ));
    s.push_str(
        "| service | metric | n | A | B | B − A [95% CI] | p | p (Holm) | Cliff's δ | A only / B only | verdict |\n",
    );
    s.push_str("|---|---|---:|---:|---:|---|---:|---:|---:|---:|---|\n");
    let f = |v: Option<f64>| v.map_or("–".to_string(), |x| format!("{x:.3}"));
    let pv =
        |v: Option<f64>| v.map_or("–".to_string(), |x| if x < 1e-4 { format!("{x:.1e}") } else { format!("{x:.4}") });
    for r in rows.iter().filter(|r| r.kind == "test") {
        let disc = match (r.a_only, r.b_only) {
            (Some(x), Some(y)) => format!("{x} / {y}"),
            _ => "–".into(),
        };
        s.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} [{}, {}] | {} | {} | {} | {} | {} |\n",
            r.service,
            if r.method.contains("corpus-relative") { format!("{} †", r.metric) } else { r.metric.clone() },
            r.n,
            f(r.value_a),
            f(r.value_b),
            f(r.diff),
            f(r.ci_low),
            f(r.ci_high),
            pv(r.p),
            pv(r.p_holm),
            f(r.cliffs_delta),
            disc,
            r.verdict
        ));
    }
    let mut flips: BTreeMap<&str, (usize, usize)> = BTreeMap::new();
    for r in rows.iter().filter(|r| r.kind == "flip") {
        let e = flips.entry(r.metric.as_str()).or_default();
        if r.verdict == WORSE {
            e.0 += 1
        } else {
            e.1 += 1
        }
    }
    if flips.is_empty() {
        s.push_str("\nNo binary outcome flipped.\n");
    } else {
        let list: Vec<String> = flips.iter().map(|(m, (l, g))| format!("{m} {l} lost, {g} gained")).collect();
        s.push_str(&format!("\nFlipped samples (B against A): {}.\n", list.join("; ")));
    }
    let bootstrap = rows
        .iter()
        .find_map(|r| {
            r.method.find("paired percentile").map(|i| r.method[i..].split(';').next().unwrap_or("").to_string())
        })
        .unwrap_or_default();
    if rows.iter().any(|r| r.method.contains("corpus-relative")) {
        s.push_str("\n† corpus-relative: each side scored against its own study's references, so a difference may be the two studies' pairs rather than the answers.\n");
    }
    s.push_str(&format!(
        "\nMethods: B − A with a {bootstrap}; p of Wilcoxon signed-rank (graded metrics; scipy's defaults, zero \
         differences dropped) or McNemar (binary outcomes; exact below 25 discordant pairs); Holm over each scope's \
         metrics, verdicts at 0.05.\nRows: doc2ci sql \"SELECT * FROM comparisons WHERE comparison = '{}'\"\nPage: {}\n",
        d.name,
        d.page.display()
    ));
    s
}

/// `--fail-if-worse`: the metrics on which B is significantly worse than A (any scope), with the
/// samples that got worse; an unknown metric is an error.
pub fn worse(d: &Done, gate: &[String]) -> Result<Option<String>> {
    let known: Vec<String> = metrics(false).into_iter().map(|m| m.name).collect();
    if let Some(bad) = gate.iter().find(|m| !known.contains(m)) {
        bail!("--fail-if-worse: unknown metric `{bad}` (known: {})", known.join(", "));
    }
    let hit: Vec<&CompareRow> =
        d.rows.iter().filter(|r| r.kind == "test" && r.verdict == WORSE && gate.contains(&r.metric)).collect();
    if hit.is_empty() {
        return Ok(None);
    }
    let mut s = String::from("B is significantly worse than A (Holm-adjusted):\n");
    for r in &hit {
        s.push_str(&format!(
            "  {} on {}: {:.3} → {:.3} (p Holm {:.2e})\n",
            r.metric,
            r.service,
            r.value_a.unwrap_or(f64::NAN),
            r.value_b.unwrap_or(f64::NAN),
            r.p_holm.unwrap_or(f64::NAN)
        ));
        let got_worse = d.rows.iter().filter(|x| {
            (x.kind == "flip" || x.kind == "swing")
                && x.verdict == WORSE
                && x.metric == r.metric
                && x.service == r.service
        });
        for x in got_worse {
            s.push_str(&format!(
                "    {}/{} sample {}: {} → {}\n",
                x.service,
                x.pair_id.as_deref().unwrap_or(""),
                x.sample.unwrap_or(0),
                x.value_a.map_or("–".into(), |v| format!("{v:.3}")),
                x.value_b.map_or("–".into(), |v| format!("{v:.3}"))
            ));
        }
    }
    Ok(Some(s))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cells_parse_with_their_defaults_and_errors_name_the_spec() {
        let c = Cell::parse("gpt-4o").unwrap();
        assert_eq!((c.model.as_str(), c.round, c.sample, c.at.as_deref()), ("gpt-4o", Round::AsOf(0), None, None));
        let c = Cell::parse("model=qwen2.5-coder:7b,round=last,sample=2,service=circleci@s3://b/study").unwrap();
        assert_eq!(c.model, "qwen2.5-coder:7b");
        assert_eq!((c.round, c.sample, c.service.as_deref()), (Round::Last, Some(2), Some("circleci")));
        assert_eq!(c.at.as_deref(), Some("s3://b/study"));
        assert_eq!(Cell::parse("m,round=3").unwrap().round, Round::AsOf(3));
        for (bad, says) in [
            ("round=1", "names no model"),
            ("m,round=x", "round `x` is not a whole number"),
            ("m,colour=red", "unknown key `colour`"),
            ("m@", "nothing after `@`"),
            ("m,n", "`n` is not KEY=VALUE"),
        ] {
            let e = Cell::parse(bad).unwrap_err().to_string();
            assert!(e.contains(says) && e.contains(bad), "{bad}: {e}");
        }
    }

    #[test]
    fn names_are_folder_safe_and_bounded() {
        let a = Cell::parse("gpt-4o@../other/wh").unwrap();
        let b = Cell::parse("model=x,round=last").unwrap();
        assert_eq!(name(&a, &b), "gpt-4o-..-other-wh--vs--model-x-round-last");
        let long = Cell::parse(&format!("{}@s3://bucket/prefix", "m".repeat(90))).unwrap();
        let n = name(&long, &b);
        assert!(n.len() <= 71 && !n.contains('/'), "{n}");
    }
}
