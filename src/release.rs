//! The benchmark as a release (issue 11): `doc2ci export benchmark --out DIR` writes the
//! deduplicated pairs as Parquet and JSON Lines, a datasheet (sources, crawl dates and validators,
//! profiles, counts, the licence of each documentation set) and SHA-256 checksums; a source with
//! `format = "benchmark"` and `path = DIR` imports it back with the same `pair_id`s.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::Path;

use anyhow::{bail, Context, Result};
use doc2ci_rows::{Page, Pair, RawPair};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use crate::config::Config;
use crate::tables::{PAGES, PAIRS, PAIRS_RAW};
use crate::warehouse::{self, Partition, Warehouse};

pub const PAIRS_JSONL: &str = "pairs.jsonl";
pub const PAIRS_PARQUET: &str = "pairs.parquet";
pub const DATASHEET_JSON: &str = "datasheet.json";
pub const DATASHEET_MD: &str = "datasheet.md";
pub const SUMS: &str = "SHA256SUMS";

/// The licence each official documentation set is published under, as its source repository
/// states it (`stages/crawl/PROFILES.md` names the commits read).
fn licence(service: &str, crawled: bool) -> &'static str {
    match (service, crawled) {
        (_, false) => "as stated by the provider of the imported file (doc2ci cannot know it)",
        ("github-actions", _) => "CC-BY-4.0 (GitHub Docs content, github/docs; its code is MIT)",
        ("gitlab-ci", _) => "CC-BY-SA-4.0 (GitLab documentation content)",
        ("travis-ci", _) => "MIT (travis-ci/docs-travis-ci-com, README)",
        ("circleci", _) => "not stated in circleci/circleci-docs: ask CircleCI before redistributing",
        _ => "unknown: check the site's terms before redistributing",
    }
}

fn sha256_file(p: &Path) -> Result<String> {
    let bytes = std::fs::read(p).with_context(|| format!("cannot read {}", p.display()))?;
    Ok(format!("{:x}", Sha256::digest(&bytes)))
}

/// What the datasheet says of how the study made its pairs (the stages' settings are theirs to
/// read: the caller hands them over).
pub struct Made {
    /// `[stages.report] title`: the release's name.
    pub title: String,
    /// `[stages.dedupe]` as the study ran it.
    pub dedupe: serde_json::Value,
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
    let sheet = json!({
        "name": made.title,
        "created_at": warehouse::now(),
        "doc2ci_version": env!("CARGO_PKG_VERSION"),
        "dedupe": made.dedupe,
        "pairs": pairs.len(),
        "services": services,
        "sources": sources,
        "files": [PAIRS_PARQUET, PAIRS_JSONL],
        "import": "a [[sources]] entry with kind = \"import\", format = \"benchmark\", path = \"<this folder>\" and a service",
    });
    warehouse::atomic_write(&out.join(DATASHEET_JSON), &serde_json::to_vec_pretty(&sheet)?)?;
    warehouse::atomic_write(&out.join(DATASHEET_MD), datasheet_md(&sheet).as_bytes())?;
    let mut sums = String::new();
    for f in [PAIRS_PARQUET, PAIRS_JSONL, DATASHEET_JSON, DATASHEET_MD] {
        sums.push_str(&format!("{}  {f}\n", sha256_file(&out.join(f))?));
    }
    warehouse::atomic_write(&out.join(SUMS), sums.as_bytes())?;
    Ok(format!("benchmark: {} pairs of {} service(s) in {}", pairs.len(), services.len(), out.display()))
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
    s
}

/// The pairs of a release folder (`pairs.jsonl`), checked against its `SHA256SUMS` in the same
/// pass that reads them, so what is imported is what was checked. The list must name the pairs;
/// every name in it must be a plain file of the folder (no path, no `..`: a release from someone
/// else never makes doc2ci read a file outside it); every file it names must match.
pub fn verified_pairs(dir: &Path) -> Result<Vec<u8>> {
    let sums = dir.join(SUMS);
    let not_a_release =
        || format!("{}: not a benchmark folder (no {SUMS}; write one with `doc2ci export benchmark`)", dir.display());
    let mut text = String::new();
    std::fs::File::open(&sums)
        .with_context(not_a_release)?
        .take(MAX_SUMS_BYTES)
        .read_to_string(&mut text)
        .with_context(not_a_release)?;
    let mut listed = std::collections::BTreeMap::new();
    for (i, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        let Some((want, file)) = line.split_once("  ") else {
            bail!("{}:{}: malformed checksum line", sums.display(), i + 1);
        };
        let file = file.trim();
        let plain = !file.is_empty() && !file.starts_with('.') && !file.contains(['/', '\\', '\0']);
        if !plain {
            bail!("{}:{}: `{file}` is not a file name of the release folder", sums.display(), i + 1);
        }
        listed.insert(file.to_string(), want.trim().to_string());
    }
    let Some(want) = listed.get(PAIRS_JSONL) else {
        bail!("{}: does not list {PAIRS_JSONL}, the file that is imported: nothing is checked", sums.display());
    };
    let path = dir.join(PAIRS_JSONL);
    let mut bytes = Vec::new();
    std::fs::File::open(&path)
        .with_context(|| format!("cannot read {}", path.display()))?
        .take(MAX_PAIRS_BYTES + 1)
        .read_to_end(&mut bytes)?;
    if bytes.len() as u64 > MAX_PAIRS_BYTES {
        bail!("{}: larger than {} GiB", path.display(), MAX_PAIRS_BYTES >> 30);
    }
    let mismatch = |f: &str| {
        format!("{}: checksum mismatch for {f} (the file changed since the release was written)", sums.display())
    };
    if format!("{:x}", Sha256::digest(&bytes)) != *want {
        bail!(mismatch(PAIRS_JSONL));
    }
    for (file, want) in listed.iter().filter(|(f, _)| *f != PAIRS_JSONL) {
        if sha256_file(&dir.join(file))? != *want {
            bail!(mismatch(file));
        }
    }
    Ok(bytes)
}

/// A checksum list is a few lines; a release's pairs a few hundred MB at most.
const MAX_SUMS_BYTES: u64 = 1 << 20;
const MAX_PAIRS_BYTES: u64 = 4 << 30;

#[cfg(test)]
mod tests {
    use super::*;

    fn release(dir: &Path, pairs: &[u8], sums: &str) {
        std::fs::create_dir_all(dir).unwrap();
        std::fs::write(dir.join(PAIRS_JSONL), pairs).unwrap();
        std::fs::write(dir.join(SUMS), sums).unwrap();
    }

    /// Issue 31: a release from someone else is checked before a byte of it is imported, and never
    /// makes doc2ci read outside its folder.
    #[test]
    fn a_release_imports_only_what_its_checksums_name() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("rel");
        let pairs = b"{\"pair_id\": \"x\"}\n";
        let good = format!("{:x}  {PAIRS_JSONL}\n", Sha256::digest(pairs));
        release(&dir, pairs, &good);
        assert_eq!(verified_pairs(&dir).unwrap(), pairs);
        // An empty list, or one that omits the imported file, checks nothing: refused.
        release(&dir, pairs, "");
        assert!(verified_pairs(&dir).unwrap_err().to_string().contains("does not list pairs.jsonl"));
        let other = format!("{:x}  pairs.parquet\n", Sha256::digest(b""));
        std::fs::write(dir.join("pairs.parquet"), b"").unwrap();
        release(&dir, pairs, &other);
        assert!(verified_pairs(&dir).unwrap_err().to_string().contains("does not list pairs.jsonl"));
        // A name with a path reaches outside the folder: refused before anything is read.
        for name in ["../../etc/passwd", "/etc/passwd", "sub/file", ".hidden"] {
            release(&dir, pairs, &format!("{good}{:x}  {name}\n", Sha256::digest(b"")));
            let e = verified_pairs(&dir).unwrap_err().to_string();
            assert!(e.contains("is not a file name of the release folder"), "{name}: {e}");
        }
        // A changed file is a mismatch.
        release(&dir, b"{\"pair_id\": \"y\"}\n", &good);
        assert!(verified_pairs(&dir).unwrap_err().to_string().contains("checksum mismatch for pairs.jsonl"));
    }
}
