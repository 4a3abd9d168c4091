//! `doc2ci coding sample|import`: the open-coding sheets of RQ4 (paper §III-E).
//!
//! `sample` draws zero-shot outputs stratified by service (in proportion to each service's pairs)
//! and evenly across models, with a fixed seed, and writes a CSV sheet; it also keeps the drawn
//! sample under `<warehouse>/_doc2ci/coding/` so `import` can reject rows that were never drawn.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context, Result};

use doc2ci_rows::{Generation, ModelRow, Pair};
use doc2ci_stats::coding::{self, Candidate, Coded};
use doc2ci_stats::{sample_size, Tier};

use crate::config::Config;
use crate::jobs::tables::{GENERATIONS, MODELS, PAIRS, TABLES};
use crate::warehouse::Warehouse;

pub const SHEET_COLUMNS: &[&str] = &[
    "sample_id",
    "service",
    "model",
    "tier",
    "type",
    "pair_id",
    "task",
    "reference",
    "output",
    "verdict",
    "degenerate",
    "issue_codes",
    "attribution",
    "notes",
];
const KEY_COLUMNS: &[&str] = &["sample_id", "service", "model", "pair_id"];

fn read_all<T: serde::de::DeserializeOwned>(wh: &Warehouse, t: crate::warehouse::TableDef) -> Result<Vec<T>> {
    let mut out = Vec::new();
    for id in wh.partitions_on_disk(t) {
        let p = crate::warehouse::Partition::from_id(TABLES, &id)
            .ok_or_else(|| anyhow!("unexpected folder {id} in the warehouse"))?;
        out.extend(wh.read::<T>(&p)?);
    }
    Ok(out)
}

fn manifest_path(wh: &Warehouse) -> PathBuf {
    wh.meta().join("coding").join("sample.csv")
}

pub fn tier_name(m: Option<&ModelRow>) -> String {
    match m {
        Some(m) if m.proprietary == Some(true) => "proprietary".into(),
        Some(ModelRow { size_b: Some(s), .. }) => Tier::of(*s).name().into(),
        _ => "unknown".into(),
    }
}

pub fn type_name(m: Option<&ModelRow>) -> String {
    match m.and_then(|m| m.code) {
        Some(true) => "code".into(),
        Some(false) => "general".into(),
        None => "unknown".into(),
    }
}

/// Draws the sample and writes the sheet; returns (sample size, population).
pub fn sample(
    cfg: &Config,
    out: &Path,
    confidence: f64,
    margin: f64,
    seed: u64,
    size: Option<u64>,
) -> Result<(u64, u64)> {
    if !(0.5..1.0).contains(&confidence) {
        bail!("--confidence {confidence}: must be in [0.5, 1)");
    }
    if !(margin > 0.0 && margin < 0.5) {
        bail!("--margin {margin}: must be in (0, 0.5)");
    }
    let wh = Warehouse::new(&cfg.warehouse);
    let pairs: Vec<Pair> = read_all(&wh, PAIRS)?;
    let gens: Vec<Generation> = read_all(&wh, GENERATIONS)?;
    let models: Vec<ModelRow> = read_all(&wh, MODELS)?;
    let meta: HashMap<&str, &ModelRow> = models.iter().map(|m| (m.model.as_str(), m)).collect();
    let pair: HashMap<(&str, &str), &Pair> =
        pairs.iter().map(|p| ((p.service.as_str(), p.pair_id.as_str()), p)).collect();
    let mut zs: Vec<&Generation> = gens
        .iter()
        // An errored request is nobody's output: nothing to code.
        .filter(|g| g.round == 0 && g.sample == 0 && g.error.is_none())
        .filter(|g| pair.contains_key(&(g.service.as_str(), g.pair_id.as_str())))
        .collect();
    zs.sort_by(|a, b| (&a.service, &a.model, &a.pair_id).cmp(&(&b.service, &b.model, &b.pair_id)));
    if zs.is_empty() {
        bail!("no zero-shot outputs in {}: run `doc2ci run` first", cfg.warehouse.display());
    }
    let population = zs.len() as u64;
    let n = size.unwrap_or_else(|| sample_size(Some(population), confidence, margin)).min(population);
    // Services in proportion to their share of the deduplicated benchmark (pairs), as the study.
    let mut share: BTreeMap<String, u64> = BTreeMap::new();
    for g in &zs {
        share.entry(g.service.clone()).or_insert(0);
    }
    for p in &pairs {
        if let Some(v) = share.get_mut(&p.service) {
            *v += 1;
        }
    }
    let services: Vec<String> = share.keys().cloned().collect();
    let avail: Vec<u64> = services.iter().map(|s| zs.iter().filter(|g| &g.service == s).count() as u64).collect();
    let weights: Vec<u64> = services.iter().map(|s| share[s]).collect();
    let mut alloc = coding::allocate(n, &weights);
    // A service with fewer outputs than its share: give the rest to the others.
    for (a, v) in alloc.iter_mut().zip(&avail) {
        *a = (*a).min(*v);
    }
    let mut left = n - alloc.iter().sum::<u64>();
    while left > 0 {
        let mut gave = false;
        for (a, v) in alloc.iter_mut().zip(&avail) {
            if left > 0 && *a < *v {
                *a += 1;
                left -= 1;
                gave = true;
            }
        }
        if !gave {
            break;
        }
    }
    let quota: BTreeMap<String, u64> = services.iter().cloned().zip(alloc).collect();
    let cands: Vec<Candidate> = zs
        .iter()
        .map(|g| Candidate { service: g.service.clone(), model: g.model.clone(), pair_id: g.pair_id.clone() })
        .collect();
    let drawn = coding::draw(&cands, &quota, seed);
    let display: HashMap<&str, &str> = cfg.services.iter().map(|s| (s.name.as_str(), s.display.as_str())).collect();

    if let Some(dir) = out.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    let mut w = csv::Writer::from_path(out).with_context(|| format!("cannot write {}", out.display()))?;
    w.write_record(SHEET_COLUMNS)?;
    let mut manifest = csv::Writer::from_writer(Vec::new());
    manifest.write_record(KEY_COLUMNS)?;
    for (k, &i) in drawn.iter().enumerate() {
        let g = zs[i];
        let p = pair[&(g.service.as_str(), g.pair_id.as_str())];
        let m = meta.get(g.model.as_str()).copied();
        let id = format!("S{:04}", k + 1);
        let svc = display.get(g.service.as_str()).copied().unwrap_or(g.service.as_str());
        let task = format!("{svc}: {}: {}", p.title, p.description);
        let output =
            g.output.clone().unwrap_or_else(|| format!("(no output: {})", g.error.as_deref().unwrap_or("none")));
        let (tier, ty) = (tier_name(m), type_name(m));
        w.write_record([
            id.as_str(),
            g.service.as_str(),
            g.model.as_str(),
            tier.as_str(),
            ty.as_str(),
            g.pair_id.as_str(),
            task.as_str(),
            p.reference.as_str(),
            output.as_str(),
            "",
            "",
            "",
            "",
            "",
        ])?;
        manifest.write_record([id.as_str(), g.service.as_str(), g.model.as_str(), g.pair_id.as_str()])?;
    }
    w.flush()?;
    let mp = manifest_path(&wh);
    std::fs::create_dir_all(mp.parent().expect("has parent"))?;
    crate::warehouse::atomic_write(&mp, &manifest.into_inner().map_err(|e| anyhow!("{e}"))?)?;
    Ok((drawn.len() as u64, population))
}

/// A returned sheet's coded rows (rows without a verdict are not coded yet and left out).
pub fn read_sheet(path: &Path, manifest: &BTreeMap<String, (String, String, String)>) -> Result<(Vec<Coded>, usize)> {
    let name = path.display().to_string();
    let mut r =
        csv::ReaderBuilder::new().flexible(false).from_path(path).with_context(|| format!("cannot open {name}"))?;
    let headers = r.headers().map_err(|e| anyhow!("{name}:1: {e}"))?.clone();
    let col = |c: &str| {
        headers
            .iter()
            .position(|h| h.trim() == c)
            .ok_or_else(|| anyhow!("{name}:1: missing column `{c}` (a sheet has {})", SHEET_COLUMNS.join(", ")))
    };
    let (id, svc, model, pid, verdict, degen, codes, attr) = (
        col("sample_id")?,
        col("service")?,
        col("model")?,
        col("pair_id")?,
        col("verdict")?,
        col("degenerate")?,
        col("issue_codes")?,
        col("attribution")?,
    );
    let mut out = Vec::new();
    let mut uncoded = 0;
    let mut seen = std::collections::HashSet::new();
    for rec in r.records() {
        let rec = rec.map_err(|e| anyhow!("{name}:{}: {e}", e.position().map_or(0, |p| p.line())))?;
        let line = rec.position().map_or(0, |p| p.line());
        let sid = rec[id].trim().to_string();
        let Some((s, m, p)) = manifest.get(&sid) else {
            bail!(
                "{name}:{line}: sample_id `{sid}` is not in the drawn sample (`doc2ci coding sample` wrote {} rows)",
                manifest.len()
            );
        };
        if (rec[svc].trim(), rec[model].trim(), rec[pid].trim()) != (s.as_str(), m.as_str(), p.as_str()) {
            bail!("{name}:{line}: row `{sid}` does not match the drawn sample (expected {s} / {m} / {p}, found {} / {} / {})", &rec[svc], &rec[model], &rec[pid]);
        }
        if !seen.insert(sid.clone()) {
            bail!("{name}:{line}: sample_id `{sid}` appears twice");
        }
        let v = coding::parse_verdict(&rec[verdict]).map_err(|e| anyhow!("{name}:{line}: {e}"))?;
        let d = coding::parse_flag(&rec[degen]).map_err(|e| anyhow!("{name}:{line}: {e}"))?;
        match v {
            None => uncoded += 1,
            Some(v) => out.push(Coded {
                sample_id: sid,
                verdict: v,
                degenerate: d,
                issue_codes: coding::parse_codes(&rec[codes]),
                attribution: rec[attr].trim().to_string(),
            }),
        }
    }
    Ok((out, uncoded))
}

/// Reads one or two filled sheets and returns the Markdown summary: verdicts, κ, taxonomy.
pub fn import(cfg: &Config, sheets: &[PathBuf]) -> Result<String> {
    if sheets.is_empty() || sheets.len() > 2 {
        bail!("coding import takes one sheet, or two (primary and second coder)");
    }
    let wh = Warehouse::new(&cfg.warehouse);
    let mp = manifest_path(&wh);
    let text = std::fs::read(&mp)
        .with_context(|| format!("no drawn sample at {}: run `doc2ci coding sample` first", mp.display()))?;
    let mut manifest = BTreeMap::new();
    for rec in csv::Reader::from_reader(text.as_slice()).records() {
        let rec = rec?;
        manifest.insert(rec[0].to_string(), (rec[1].to_string(), rec[2].to_string(), rec[3].to_string()));
    }
    let models: Vec<ModelRow> = read_all(&wh, MODELS)?;
    let meta: HashMap<&str, &ModelRow> = models.iter().map(|m| (m.model.as_str(), m)).collect();
    let (primary, uncoded) = read_sheet(&sheets[0], &manifest)?;
    let mut md = format!(
        "# Open coding: {}\n\n{} coded rows of {} drawn ({uncoded} not coded yet).\n\n",
        sheets[0].display(),
        primary.len(),
        manifest.len()
    );
    let n = primary.len().max(1) as f64;
    md.push_str("| Verdict | n | % |\n|---|---|---|\n");
    for v in coding::VERDICTS {
        let c = primary.iter().filter(|x| x.verdict == *v).count();
        md.push_str(&format!("| {v} | {c} | {:.1} |\n", c as f64 * 100.0 / n));
    }
    let dg = primary.iter().filter(|x| x.degenerate).count();
    md.push_str(&format!("| degenerate (flag) | {dg} | {:.1} |\n\n", dg as f64 * 100.0 / n));
    if let Some(second) = sheets.get(1) {
        let (other, _) = read_sheet(second, &manifest)?;
        let a = coding::agreement(&primary, &other);
        let k = |v: Option<f64>| v.map_or("undefined".into(), |v| format!("{v:.3}"));
        md.push_str(&format!(
            "Agreement with {} on {} rows both coded: {} identical verdicts; Cohen's κ (3-point) = {}, κ (usable vs not) = {}.\n\n",
            second.display(),
            a.n,
            a.agree,
            k(a.kappa3),
            k(a.kappa_binary)
        ));
    }
    let total_issues: usize = primary.iter().map(|c| c.issue_codes.len()).sum();
    md.push_str(&format!("{total_issues} coded issues.\n\n"));
    let groupings: [(&str, Box<dyn Fn(&Coded) -> String + '_>); 3] = [
        ("service", Box::new(|c: &Coded| manifest[&c.sample_id].0.clone())),
        ("tier", Box::new(|c: &Coded| tier_name(meta.get(manifest[&c.sample_id].1.as_str()).copied()))),
        ("type", Box::new(|c: &Coded| type_name(meta.get(manifest[&c.sample_id].1.as_str()).copied()))),
    ];
    for (label, f) in groupings.iter() {
        let tax = coding::taxonomy(&primary, f);
        let cats: std::collections::BTreeSet<&String> = tax.values().flat_map(|t| t.1.keys()).collect();
        md.push_str(&format!("## By {label}\n\n| {label} | n | usable% | partial% | unusable% |"));
        for c in &cats {
            md.push_str(&format!(" {c} |"));
        }
        md.push_str(&format!("\n|{}\n", "---|".repeat(5 + cats.len())));
        for (g, (verdicts, issues)) in &tax {
            let total: usize = verdicts.values().sum();
            let share = |v: &str| *verdicts.get(v).unwrap_or(&0) as f64 * 100.0 / total as f64;
            md.push_str(&format!(
                "| {g} | {total} | {:.1} | {:.1} | {:.1} |",
                share("usable"),
                share("partial"),
                share("unusable")
            ));
            for c in &cats {
                md.push_str(&format!(" {} |", issues.get(*c).unwrap_or(&0)));
            }
            md.push('\n');
        }
        md.push('\n');
    }
    Ok(md)
}
