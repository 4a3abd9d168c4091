//! The benchmark as a release (issue 11): `doc2ci export benchmark --out DIR` writes the
//! deduplicated pairs as Parquet and JSON Lines, a datasheet (sources, crawl dates and validators,
//! profiles, counts, the licence of each documentation set) and SHA-256 checksums; a source with
//! `format = "benchmark"` and `path = DIR` imports it back with the same `pair_id`s.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{bail, Context, Result};
use doc2ci_rows::{Generation, Lint, Page, Pair, RawPair, Score, Validation};
use serde_json::{json, Value};

use crate::benchmark::{sha256_file, DATASHEET_JSON, DATASHEET_MD, PAIRS_JSONL, PAIRS_PARQUET, RESULTS, SUMS};
use crate::config::Config;
use crate::jobs::tables::{GENERATIONS, LINTS, PAGES, PAIRS, PAIRS_RAW, SCORES, VALIDATIONS};
use crate::warehouse::TableDef;

/// The tables of [`RESULTS`], in its order.
pub const RESULT_TABLES: [TableDef; 4] = [GENERATIONS, VALIDATIONS, LINTS, SCORES];
use crate::warehouse::{self, Partition, Warehouse};

/// The licence of a service's official documentation as its source repository states it (its
/// file in `doc2ci-sem`; `stages/crawl/PROFILES.md` names the commits read).
fn licence(service: &str, crawled: bool) -> &'static str {
    match doc2ci_sem::service(service) {
        _ if !crawled => "as stated by the provider of the imported file (doc2ci cannot know it)",
        Some(s) => s.docs.licence,
        None => "unknown: check the site's terms before redistributing",
    }
}

/// What the datasheet says of how the study made its pairs (the stages' settings are theirs to
/// read: the caller hands them over).
pub struct Made {
    /// `[stages.report] title`: the release's name.
    pub title: String,
    /// `[stages.dedupe]` as the study ran it.
    pub dedupe: serde_json::Value,
    /// Also publish the study's results (`--with-results`): every answer, verdict and score, so
    /// others can compare their run with this one (`doc2ci compare`).
    pub with_results: bool,
}

/// Writes the release; returns a one-line summary.
pub fn export(cfg: &Config, wh: &Warehouse, out: &Path, made: &Made) -> Result<String> {
    let mut pairs: Vec<Pair> = Vec::new();
    let mut services = Vec::new();
    for s in &cfg.services {
        let part = Partition::new(PAIRS, &[&s.name]);
        if !wh.file(&part).exists() {
            continue;
        }
        let mut p: Vec<Pair> = wh.read(&part)?;
        p.sort_by_key(|p| p.position);
        let mut raw = 0usize;
        for src in cfg.sources.iter().filter(|x| x.service == s.name) {
            let rp = Partition::new(PAIRS_RAW, &[&src.service, &src.name]);
            if wh.file(&rp).exists() {
                raw += wh.read::<RawPair>(&rp)?.len();
            }
        }
        let crawled = cfg.sources.iter().any(|x| x.service == s.name && x.crawl().is_some());
        let distinct: std::collections::HashSet<String> =
            p.iter().map(|x| doc2ci_rows::collapse_ws(&x.description)).collect();
        services.push(json!({
            "service": s.name, "display": s.display, "raw_pairs": raw, "pairs": p.len(),
            "duplicates_removed": raw.saturating_sub(p.len()),
            "duplicate_pct": if raw > 0 { 100.0 * raw.saturating_sub(p.len()) as f64 / raw as f64 } else { 0.0 },
            "unique_descriptions": distinct.len(),
            "leaks": p.iter().filter(|x| x.leak.is_some()).count(),
            "licence": licence(&s.name, crawled),
        }));
        pairs.extend(p);
    }
    if pairs.is_empty() {
        bail!("no pairs in {}: run `doc2ci run` first", wh.root.display());
    }
    let mut sources = Vec::new();
    for src in &cfg.sources {
        let mut o = json!({"name": src.name, "service": src.service, "kind": src.kind_name()});
        match src.crawl() {
            Some(c) => {
                o["profile"] = json!(c.profile_name);
                o["profile_settings"] = serde_json::to_value(&c.profile)?;
                o["site"] = match (&c.url, &c.serve) {
                    (Some(u), _) => json!(doc2ci_llm::redact_url(u)),
                    (None, Some(d)) => json!(format!("served folder {}", d.display())),
                    _ => Value::Null,
                };
                let pp = Partition::new(PAGES, &[&src.service, &src.name]);
                if wh.file(&pp).exists() {
                    let pages: Vec<Page> = wh.read(&pp)?;
                    let dates: Vec<&str> = pages.iter().map(|p| p.fetched_at.as_str()).collect();
                    o["pages"] = json!(pages.len());
                    o["pages_failed"] = json!(pages.iter().filter(|p| p.error.is_some()).count());
                    o["crawled_from"] = json!(dates.iter().min());
                    o["crawled_to"] = json!(dates.iter().max());
                    let etags: BTreeMap<&str, &str> =
                        pages.iter().filter_map(|p| Some((p.url.as_str(), p.etag.as_deref()?))).collect();
                    o["etags"] = serde_json::to_value(etags)?;
                }
            }
            None => {
                let f = src.import().expect("a source is crawled or imported");
                o["format"] = json!(f.format);
                o["file"] = json!(f.path.file_name().map(|f| f.to_string_lossy().into_owned()));
                if f.path.is_file() {
                    o["sha256"] = json!(sha256_file(&f.path)?);
                }
            }
        }
        sources.push(o);
    }
    std::fs::create_dir_all(out).with_context(|| format!("cannot create {}", out.display()))?;
    warehouse::write_rows_file(&out.join(PAIRS_PARQUET), &pairs)?;
    let mut jsonl = Vec::new();
    for p in &pairs {
        serde_json::to_writer(&mut jsonl, p)?;
        jsonl.push(b'\n');
    }
    warehouse::atomic_write(&out.join(PAIRS_JSONL), &jsonl)?;
    let mut files = vec![PAIRS_PARQUET, PAIRS_JSONL];
    let mut results = serde_json::Map::new();
    if made.with_results {
        let (t, f) = (RESULT_TABLES, RESULTS);
        let counts = [
            publish::<Generation>(wh, t[0], out, f[0], None)?,
            publish::<Validation>(wh, t[1], out, f[1], None)?,
            publish::<Lint>(wh, t[2], out, f[2], None)?,
            publish(wh, t[3], out, f[3], Some(&Score::template(doc2ci_score::metric_infos())))?,
        ];
        for (file, n) in f.into_iter().zip(counts).filter(|(_, n)| *n > 0) {
            files.push(file);
            results.insert(file.into(), json!(n));
        }
    }
    let sheet = json!({
        "name": made.title,
        "created_at": warehouse::now(),
        "doc2ci_version": env!("CARGO_PKG_VERSION"),
        "dedupe": made.dedupe,
        "pairs": pairs.len(),
        "services": services,
        "sources": sources,
        "files": files,
        "results": results,
        "import": "a [[sources]] entry with kind = \"import\", format = \"benchmark\", path = \"<this folder>\" and a service",
    });
    warehouse::atomic_write(&out.join(DATASHEET_JSON), &serde_json::to_vec_pretty(&sheet)?)?;
    warehouse::atomic_write(&out.join(DATASHEET_MD), datasheet_md(&sheet).as_bytes())?;
    let mut sums = String::new();
    for f in files.iter().chain(&[DATASHEET_JSON, DATASHEET_MD]) {
        sums.push_str(&format!("{}  {f}\n", sha256_file(&out.join(f))?));
    }
    warehouse::atomic_write(&out.join(SUMS), sums.as_bytes())?;
    Ok(format!("benchmark: {} pairs of {} service(s) in {}", pairs.len(), services.len(), out.display()))
}

/// Writes one results table as one file of the release (its columns traced from `template`
/// when the type cannot say them); returns its rows (none: no file).
fn publish<T: serde::Serialize + serde::de::DeserializeOwned>(
    wh: &Warehouse,
    t: TableDef,
    out: &Path,
    file: &str,
    template: Option<&T>,
) -> Result<usize> {
    let rows: Vec<T> = wh.read_table(t, |_| true)?;
    match (rows.is_empty(), template) {
        (true, _) => {}
        (false, Some(like)) => warehouse::write_rows_file_like(&out.join(file), &rows, like)?,
        (false, None) => warehouse::write_rows_file(&out.join(file), &rows)?,
    }
    Ok(rows.len())
}

fn datasheet_md(sheet: &Value) -> String {
    let mut s = String::new();
    s.push_str(&format!("# Datasheet: {}\n\n", sheet["name"].as_str().unwrap_or("doc2ci benchmark")));
    s.push_str(&format!(
        "Written by doc2ci {} on {}. {} description→YAML pairs after deduplication ({}).\n\n",
        sheet["doc2ci_version"].as_str().unwrap_or("?"),
        sheet["created_at"].as_str().unwrap_or("?"),
        sheet["pairs"],
        sheet["dedupe"]
    ));
    s.push_str(
        "| service | raw pairs | pairs | duplicates removed | unique descriptions | leaking descriptions | licence |\n",
    );
    s.push_str("|---|---|---|---|---|---|---|\n");
    for v in sheet["services"].as_array().into_iter().flatten() {
        s.push_str(&format!(
            "| {} | {} | {} | {} ({:.1}%) | {} | {} | {} |\n",
            v["service"].as_str().unwrap_or(""),
            v["raw_pairs"],
            v["pairs"],
            v["duplicates_removed"],
            v["duplicate_pct"].as_f64().unwrap_or(0.0),
            v["unique_descriptions"],
            v["leaks"],
            v["licence"].as_str().unwrap_or("")
        ));
    }
    s.push_str("\n## Sources\n\n");
    for v in sheet["sources"].as_array().into_iter().flatten() {
        s.push_str(&format!(
            "- `{}` ({}, {}): ",
            v["name"].as_str().unwrap_or(""),
            v["service"].as_str().unwrap_or(""),
            v["kind"].as_str().unwrap_or("")
        ));
        if v["kind"] == "crawl" {
            s.push_str(&format!(
                "profile `{}`, {}; {} pages ({} failed) crawled {} to {}; {} ETags recorded\n",
                v["profile"].as_str().unwrap_or(""),
                v["site"].as_str().unwrap_or(""),
                v["pages"],
                v["pages_failed"],
                v["crawled_from"].as_str().unwrap_or("?"),
                v["crawled_to"].as_str().unwrap_or("?"),
                v["etags"].as_object().map_or(0, |o| o.len())
            ));
        } else {
            s.push_str(&format!(
                "{} file `{}`, sha256 {}\n",
                v["format"].as_str().unwrap_or(""),
                v["file"].as_str().unwrap_or(""),
                v["sha256"].as_str().unwrap_or("?")
            ));
        }
    }
    s.push_str(&format!(
        "\n## Files\n\n`{PAIRS_PARQUET}` and `{PAIRS_JSONL}` hold the same rows; `{SUMS}` their checksums \
         (`sha256sum -c {SUMS}`). To use the benchmark elsewhere: {}.\n",
        sheet["import"].as_str().unwrap_or("")
    ));
    if let Some(r) = sheet["results"].as_object().filter(|r| !r.is_empty()) {
        let listed: Vec<String> = r.iter().map(|(f, n)| format!("`{f}` ({n} rows)")).collect();
        s.push_str(&format!(
            "\nThe study's results: {}. Compare a run with this one: `doc2ci compare MODEL@<this folder> MODEL`.\n",
            listed.join(", ")
        ));
    }
    s
}
