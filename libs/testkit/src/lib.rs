//! What the tests of several crates share: where the workspace's fixtures and assets are, the
//! golden pairs of the bundled documentation site, and the `scores` row as it was before metrics
//! became registry data (the layout every `scores` file must keep). A dev-dependency only: no
//! crate links it into doc2ci.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use doc2ci_rows::{MetricValue, Score};
use serde::{Deserialize, Serialize};

/// The workspace's root folder.
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A registry's folder as its test sees it: the stems of its `.rs` files but `mod.rs`, sorted, and
/// the registry's list, sorted: equal when every file is registered and every entry has a file.
pub fn registry_files(dir: &Path, listed: &[&str]) -> (Vec<String>, Vec<String>) {
    let mut on_disk: Vec<String> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.strip_suffix(".rs").map(str::to_string))
        .filter(|f| f != "mod")
        .collect();
    on_disk.sort();
    let mut listed: Vec<String> = listed.iter().map(|f| f.to_string()).collect();
    listed.sort();
    (on_disk, listed)
}

/// The predecessor study's real data, kept outside the repository: `$DOC2CI_LLM4CI_DATA`, else
/// `../shared/data/llm4ci` beside the workspace.
pub fn llm4ci_dir() -> PathBuf {
    std::env::var_os("DOC2CI_LLM4CI_DATA")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join("../shared/data/llm4ci"))
}

/// The (ID, column) values of one gzipped CSV file of the llm4ci data, in file order.
pub fn llm4ci_column(file: &str, name: &str) -> Vec<(u64, String)> {
    use std::io::Read;
    let path = llm4ci_dir().join(file);
    let mut text = String::new();
    flate2::read::GzDecoder::new(std::fs::File::open(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display())))
        .read_to_string(&mut text)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut rdr = csv::Reader::from_reader(text.as_bytes());
    let headers = rdr.headers().expect("a header row").clone();
    let col = |n: &str| headers.iter().position(|h| h == n).unwrap_or_else(|| panic!("{file}: no {n} column"));
    let (id, value) = (col("ID"), col(name));
    rdr.records()
        .map(|r| {
            let r = r.unwrap_or_else(|e| panic!("{file}: {e}"));
            (r[id].parse().expect("a numeric ID"), r[value].to_string())
        })
        .collect()
}

/// The six models of the llm4ci data, in the order of its files.
pub const LLM4CI_MODELS: [&str; 6] = ["gpt-4o", "gpt-4.1", "llama3.1-8b", "codellama-7b", "gemma3-12b", "codegemma-7b"];

/// The SmolLM2 weights `doc2ci setup` fetched (into `$DOC2CI_ASSETS`, else the user's cache).
pub fn gguf() -> PathBuf {
    let assets = std::env::var_os("DOC2CI_ASSETS")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(std::env::var("HOME").unwrap()).join(".cache/doc2ci/assets"));
    let p = assets.join("models/smollm2-135m-instruct/SmolLM2-135M-Instruct.Q4_1.gguf");
    assert!(p.exists(), "{} missing: run `doc2ci setup`", p.display());
    p
}

/// Every file under `root`, as paths relative to it.
pub fn files(root: &Path) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            if e.path().is_dir() {
                stack.push(e.path());
            } else {
                out.insert(e.path().strip_prefix(root).unwrap().to_string_lossy().into_owned());
            }
        }
    }
    out
}

/// One pair of `docsite/golden-pairs.json`: what a crawl of the bundled site must extract.
#[derive(Debug, Clone, Deserialize)]
pub struct GoldenPair {
    pub service: String,
    pub url: String,
    pub title: String,
    pub description: String,
    pub reference: String,
    pub position: u64,
}

/// The golden pairs a crawl with `profile` and `backend` sees (some need a browser).
pub fn golden_pairs(profile: &str, backend: &str) -> Vec<GoldenPair> {
    let text = std::fs::read_to_string(root().join("docsite/golden-pairs.json")).unwrap();
    let g: serde_json::Value = serde_json::from_str(&text).unwrap();
    g["pairs"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["profile"] == profile && p["backends"].as_array().unwrap().iter().any(|b| b == backend))
        .map(|p| serde_json::from_value(p.clone()).unwrap())
        .collect()
}

/// `doc2ci_rows::Score` before the metric registry, field for field: a `scores` file written from
/// registry rows must be byte for byte one written from these.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OldScore {
    pub pair_id: String,
    pub service: String,
    pub model: String,
    pub sample: u32,
    pub round: u32,
    pub cosine: f64,
    pub euclidean: f64,
    pub bleu: f64,
    pub crystal_bleu: f64,
    pub rouge_l: f64,
    pub chrf: f64,
    pub tree_edit: f64,
    pub levenshtein: f64,
    pub exact: bool,
    pub kv_exact: f64,
    pub kv_wildcard: f64,
    #[serde(default)]
    pub truncated: bool,
}

/// The metrics of [`OldScore`], in its order.
pub const OLD_METRICS: [&str; 11] = [
    "cosine",
    "euclidean",
    "bleu",
    "crystal_bleu",
    "rouge_l",
    "chrf",
    "tree_edit",
    "levenshtein",
    "exact",
    "kv_exact",
    "kv_wildcard",
];

impl OldScore {
    /// The old row of a registry row (which must hold every old metric).
    pub fn of(s: &Score) -> OldScore {
        let f = |m: &str| match s.get(m) {
            Some(MetricValue::Float(v)) => v,
            other => panic!("{m}: {other:?}"),
        };
        OldScore {
            pair_id: s.pair_id.clone(),
            service: s.service.clone(),
            model: s.model.clone(),
            sample: s.sample,
            round: s.round,
            cosine: f("cosine"),
            euclidean: f("euclidean"),
            bleu: f("bleu"),
            crystal_bleu: f("crystal_bleu"),
            rouge_l: f("rouge_l"),
            chrf: f("chrf"),
            tree_edit: f("tree_edit"),
            levenshtein: f("levenshtein"),
            exact: s.get("exact") == Some(MetricValue::Bool(true)),
            kv_exact: f("kv_exact"),
            kv_wildcard: f("kv_wildcard"),
            truncated: s.truncated,
        }
    }
}

/// A page fetched over HTTP at `url` (requested and landed there), status 200, nothing else set:
/// the crawl tests' pages, each setting what it is about with `..page(url)`.
pub fn page(url: &str) -> doc2ci_rows::Page {
    doc2ci_rows::Page {
        service: "github-actions".into(),
        source: "docs".into(),
        seq: 0,
        requested_url: url.into(),
        url: url.into(),
        depth: 0,
        backend: "http".into(),
        status: Some(200),
        content_type: None,
        encoding: None,
        bytes: 0,
        html: None,
        links: vec![],
        error: None,
        fetched_at: String::new(),
        fetch_ms: 0,
        etag: None,
        last_modified: None,
        canonical: None,
        not_modified: false,
        transferred: 0,
        sitemap_lastmod: None,
        changed_after: None,
    }
}

/// A GitHub Actions pair of one copy, for the score tests.
pub fn pair(id: &str, reference: &str) -> doc2ci_rows::Pair {
    doc2ci_rows::Pair {
        pair_id: id.into(),
        service: "github-actions".into(),
        reference: reference.into(),
        n_copies: 1,
        source: "s".into(),
        source_id: id.into(),
        source_ids: vec![id.into()],
        ..Default::default()
    }
}

/// Model `model`'s answer to pair `pair_id` (sample, round), for the score tests.
pub fn generation(
    pair_id: &str,
    model: &str,
    (sample, round): (u32, u32),
    output: Option<&str>,
) -> doc2ci_rows::Generation {
    doc2ci_rows::Generation {
        pair_id: pair_id.into(),
        service: "github-actions".into(),
        model: model.into(),
        sample,
        round,
        output: output.map(String::from),
        ..Default::default()
    }
}
