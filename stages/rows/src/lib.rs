//! Typed rows of the warehouse tables.
//!
//! Stages exchange these structs and nothing else; the engine turns them into Arrow/Parquet.
//! Partition columns (`service`, `model`) are fields here so stage code never has to know
//! they live in the Hive path rather than in the files.

use serde::{Deserialize, Serialize};

/// A description→YAML pair as it came from a source, before duplicates are dropped.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RawPair {
    pub pair_id: String,
    pub service: String,
    pub url: String,
    pub title: String,
    pub description: String,
    pub reference: String,
    /// Name of the `[[sources]]` entry it came from.
    pub source: String,
    /// The source's own identifier (a CSV `ID`, a crawl position), so results trace back.
    pub source_id: String,
    /// Order within the source; dedupe keeps the first occurrence by this order.
    pub position: u64,
}

/// One fetched documentation page (or the failure to fetch it), kept so extraction can be
/// re-run after a profile or extractor change without crawling again.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Page {
    pub service: String,
    pub source: String,
    /// Fetch order within the crawl: pairs are numbered in this order.
    pub seq: u64,
    /// The URL as queued (normalised).
    pub requested_url: String,
    /// Where the page ended up (after HTTP redirects, or the browser's `document.URL`).
    pub url: String,
    /// Links from the start URLs.
    pub depth: u32,
    pub backend: String,
    /// HTTP status when known (the `webdriver` backend reads it from the Navigation Timing API).
    pub status: Option<u32>,
    pub content_type: Option<String>,
    /// The encoding the page was decoded with.
    pub encoding: Option<String>,
    /// Size of the page as fetched (or as far as it was read, for a page over the size limit).
    pub bytes: u64,
    /// The decoded HTML (null on failure); the table's Parquet files store it zstd-compressed.
    pub html: Option<String>,
    /// In-scope links of the page, normalised: the crawl frontier is rebuilt from them on resume.
    pub links: Vec<String>,
    pub error: Option<String>,
    pub fetched_at: String,
    /// Milliseconds spent fetching (retries included).
    pub fetch_ms: u64,
    /// Validators the server sent, for a conditional re-fetch (`If-None-Match`, `If-Modified-Since`).
    #[serde(default)]
    pub etag: Option<String>,
    #[serde(default)]
    pub last_modified: Option<String>,
    /// The page's `<link rel="canonical">`, when it names another URL of the crawl.
    #[serde(default)]
    pub canonical: Option<String>,
    /// Answered 304 Not Modified to a conditional re-fetch: the HTML is the previous crawl's.
    #[serde(default)]
    pub not_modified: bool,
    /// Body bytes that crossed the network for this page (0 for a 304).
    #[serde(default)]
    pub transferred: u64,
}

/// One code block of a crawled page and what extraction made of it: `pair`, or the reason it was
/// skipped (`not yaml`, `yaml scalar`, `yaml parse error`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CodeBlock {
    pub service: String,
    pub source: String,
    pub url: String,
    pub title: String,
    pub kind: String,
    /// The language of a non-YAML block, or the parse error.
    pub detail: String,
    pub first_line: String,
}

/// A deduplicated pair: the unit every generation is scored against.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Pair {
    pub pair_id: String,
    pub service: String,
    pub url: String,
    pub title: String,
    pub description: String,
    pub reference: String,
    pub n_copies: u32,
    /// URLs of every copy, kept one first, in source order.
    pub urls: Vec<String>,
    pub source: String,
    pub source_id: String,
    /// `source_id` of every copy, kept one first: lets imported outputs of copies be recognised.
    pub source_ids: Vec<String>,
    pub position: u64,
    /// Set when the description gives away the reference (`reference`: all of it, `lines`: most of
    /// its lines): the prompt would contain the answer. Such pairs are not asked unless kept.
    #[serde(default)]
    pub leak: Option<String>,
}

/// One model output for one pair (round 0 = zero-shot, round k = k-th repair).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Generation {
    pub pair_id: String,
    pub service: String,
    pub model: String,
    pub sample: u32,
    pub round: u32,
    /// The configuration after fence stripping; what validate and score read.
    pub output: Option<String>,
    pub raw_output: Option<String>,
    pub latency_ms: Option<f64>,
    pub prompt_tokens: Option<u32>,
    pub completion_tokens: Option<u32>,
    /// Set when the backend failed; `output` is then null.
    pub error: Option<String>,
    /// Empty, prose-only or repetitive output (the study's "degenerate" flag).
    pub degenerate: bool,
    /// Which kind of degenerate: `empty`, `prose` or `repetitive`.
    #[serde(default)]
    pub degenerate_kind: Option<String>,
    /// Why the backend stopped (`stop`, `length` = hit the token cap, …).
    #[serde(default)]
    pub finish_reason: Option<String>,
    /// Requests sent for this row (1 + retries).
    #[serde(default)]
    pub attempts: Option<u32>,
    /// Price of this row from the model's per-1k-token prices at generation time.
    #[serde(default)]
    pub cost: Option<f64>,
}

/// What one repair round did for one service and model (SPEC §1 `repairs`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RepairRow {
    pub service: String,
    pub model: String,
    pub round: u32,
    /// The model that wrote the repairs (the model itself, or `[stages.repair] model`).
    pub repair_model: String,
    /// Outputs (pair, sample) in the study.
    pub total: u64,
    /// Schema-valid before this round (carried over untouched).
    pub valid_before: u64,
    /// Revisited this round: invalid after the previous round.
    pub attempted: u64,
    /// Revisited and now schema-valid.
    pub fixed: u64,
    /// Revisited and still invalid (including backend errors).
    pub still_invalid: u64,
    /// Revisited but the backend failed (counted in `still_invalid`).
    pub errors: u64,
    pub valid_after: u64,
}

/// Per-model metadata from `pipeline.toml`, kept so stats can group by tier/family.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelRow {
    pub model: String,
    pub backend: String,
    pub family: Option<String>,
    pub size_b: Option<f64>,
    pub code: Option<bool>,
    pub proprietary: Option<bool>,
    /// The model this one was fine-tuned from: RQ6 compares the two on the same pairs.
    #[serde(default)]
    pub base_model: Option<String>,
}

/// Validity of one text (an output, or a pair's reference) for its service (SPEC §6).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Validation {
    pub pair_id: String,
    pub service: String,
    /// `reference` for the validation of a pair's own reference.
    pub model: String,
    pub sample: u32,
    pub round: u32,
    pub parse_ok: bool,
    pub schema_ok: bool,
    /// Parse error, or every schema error with its instance path: what the repair prompt quotes.
    pub errors: Vec<String>,
    pub fragment: bool,
}

/// Similarity of one output to its pair's reference (SPEC §5).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Score {
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
    /// The output or the reference was longer than the scorer's cap and was scored on its
    /// beginning only (`doc2ci_score::MAX_SCORED_BYTES`).
    #[serde(default)]
    pub truncated: bool,
}

/// A cached sentence embedding, keyed by the hash of the embedded (cleaned) text.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Embedding {
    pub text_hash: String,
    pub vector: Vec<f32>,
}

/// Whitespace runs collapsed to one space, trimmed: how titles and descriptions are compared.
pub fn collapse_ws(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Trailing whitespace stripped from each line and leading/trailing blank lines removed:
/// how references are compared (SPEC §1 dedupe).
pub fn normalize_reference(s: &str) -> String {
    let lines: Vec<&str> = s.lines().map(|l| l.trim_end()).collect();
    let start = lines.iter().position(|l| !l.is_empty()).unwrap_or(lines.len());
    let end = lines.iter().rposition(|l| !l.is_empty()).map_or(start, |e| e + 1);
    lines[start..end].join("\n")
}

/// Stable content hash of a pair: equal after normalisation ⇔ equal id, across runs and machines.
pub fn pair_id(service: &str, title: &str, description: &str, reference: &str) -> String {
    let mut h = blake3::Hasher::new();
    for part in [service, &collapse_ws(title), &collapse_ws(description), &normalize_reference(reference)] {
        h.update(&(part.len() as u64).to_le_bytes());
        h.update(part.as_bytes());
    }
    h.finalize().to_hex()[..16].to_string()
}

/// Hash of any text, for caches keyed by content (embeddings, prompts).
pub fn text_hash(s: &str) -> String {
    blake3::hash(s.as_bytes()).to_hex()[..32].to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reference_normalisation_ignores_trailing_space_and_blank_edges() {
        assert_eq!(normalize_reference("\n\non: push  \njobs:\n\n  a: 1\t\n\n"), "on: push\njobs:\n\n  a: 1");
        assert_eq!(normalize_reference("  \n \n"), "");
    }

    #[test]
    fn pair_id_is_layout_insensitive_only_where_spec_says() {
        let a = pair_id("gha", "Title  x", " desc\n here ", "on: push\n");
        assert_eq!(a, pair_id("gha", "Title x", "desc here", "on: push   \n\n"));
        assert_ne!(a, pair_id("gha", "Title x", "desc here", "on:  push"));
        assert_ne!(a, pair_id("circleci", "Title x", "desc here", "on: push"));
    }
}
