//! Typed rows of the warehouse tables, and the metric descriptor ([`MetricInfo`]) that lets stats
//! and report read `scores` rows without depending on the score stage.
//!
//! Owns: the rows' fields and their serde shape (which is the tables' column layout). Never does
//! I/O and never depends on a stage crate: every stage and the engine depend on it, and the engine
//! alone turns rows into Arrow/Parquet. Partition columns (`service`, `model`) are fields here so
//! stage code never has to know they live in the Hive path rather than in the files.

use std::borrow::Cow;

use serde::{Deserialize, Serialize};

/// When one example was published, as `RawPair` and `Pair` record it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Dated {
    pub published: Option<String>,
    pub published_source: Option<String>,
    pub not_before: Option<String>,
}

impl RawPair {
    pub fn dated(&self) -> Dated {
        Dated {
            published: self.published.clone(),
            published_source: self.published_source.clone(),
            not_before: self.not_before.clone(),
        }
    }
}

impl Pair {
    pub fn dated(&self) -> Dated {
        Dated {
            published: self.published.clone(),
            published_source: self.published_source.clone(),
            not_before: self.not_before.clone(),
        }
    }

    pub fn set_dated(&mut self, d: Dated) {
        (self.published, self.published_source, self.not_before) = (d.published, d.published_source, d.not_before);
    }
}

/// The `YYYY-MM-DD` day that starts `s` (an ISO day or an RFC 3339 timestamp's day), checked to
/// be a calendar day; what a source's date column and `knowledge_cutoff` accept.
pub fn iso_day(s: &str) -> Option<String> {
    let s = s.trim();
    let d = s.get(..10)?;
    let rest = &s[10..];
    if !(rest.is_empty() || rest.starts_with('T') || rest.starts_with(' ')) {
        return None;
    }
    let b = d.as_bytes();
    let digits = |r: std::ops::Range<usize>| b[r].iter().all(u8::is_ascii_digit);
    if !(digits(0..4) && b[4] == b'-' && digits(5..7) && b[7] == b'-' && digits(8..10)) {
        return None;
    }
    let (y, m, day): (u32, u32, u32) = (d[..4].parse().ok()?, d[5..7].parse().ok()?, d[8..].parse().ok()?);
    let leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    let days = [31, if leap { 29 } else { 28 }, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];
    (1..=12).contains(&m).then_some(())?;
    (1..=days[m as usize - 1]).contains(&day).then(|| d.to_string())
}

/// Copies of one example (on two pages, or in two crawls): the earliest date, and a lower bound
/// only when every copy has one (a copy without says the example existed before).
pub fn earliest(a: &Dated, b: &Dated) -> Dated {
    let first = match (&a.published, &b.published) {
        (Some(x), Some(y)) if y < x => b,
        (None, Some(_)) => b,
        _ => a,
    };
    let not_before = match (&a.not_before, &b.not_before) {
        (Some(x), Some(y)) => Some(x.min(y).clone()),
        _ => None,
    };
    Dated { published: first.published.clone(), published_source: first.published_source.clone(), not_before }
}

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
    /// When the example was published (`YYYY-MM-DD`): the earliest day the evidence allows.
    #[serde(default)]
    pub published: Option<String>,
    /// Which evidence gave `published`: `stated`, `sitemap`, `last_modified`, `first_crawl`, `source`.
    #[serde(default)]
    pub published_source: Option<String>,
    /// Set when a re-crawl found the example new: it appeared after this day (the previous crawl).
    #[serde(default)]
    pub not_before: Option<String>,
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
    /// The page's `<lastmod>` day in the site's sitemap.
    #[serde(default)]
    pub sitemap_lastmod: Option<String>,
    /// When an earlier crawl saw other HTML at this URL: the last such crawl's `fetched_at` (the
    /// HTML as it is now appeared after it). None for a page never fetched before.
    #[serde(default)]
    pub changed_after: Option<String>,
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

/// One screened text of the contamination stage: a pair's reference (`variant = "real"`) or its
/// twin (`"twin"`), the prefix the model was shown, the true suffix, what the model continued with
/// and DevOps-Gym's five measures. `status`: `high_risk` (a measure over its threshold), `clean`,
/// `too_short` (fewer tokens than prefix + suffix: nothing measured), `no_twin` (no usable twin:
/// nothing asked), or `error` (the request failed: not the model's, asked again by the next run).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Contamination {
    pub pair_id: String,
    pub service: String,
    pub model: String,
    pub variant: String,
    pub status: String,
    /// `chat` (the continuation instruction) or `raw` (the prefix alone, completed).
    pub mode: String,
    pub prefix_tokens: u32,
    pub suffix_tokens: u32,
    pub prefix: Option<String>,
    /// The true next tokens, joined by single spaces.
    pub suffix: Option<String>,
    /// The model's answer as it came, and the continuation read out of it.
    pub answer: Option<String>,
    pub continuation: Option<String>,
    pub s: Option<f64>,
    pub t: Option<f64>,
    pub p: Option<f64>,
    pub l: Option<f64>,
    pub b: Option<f64>,
    /// The measures over their thresholds, comma-separated in the paper's order (`s,t,p,l,b`).
    pub flags: Option<String>,
    /// Min-K% Prob of the whole text, where the backend scores text token by token.
    pub min_k: Option<f64>,
    /// For a twin: its edits, how many prefix tokens differ from the reference's, and whether
    /// the service's validator accepts it as it accepts the reference.
    pub twin_edits: Option<String>,
    pub twin_prefix_changed: Option<u32>,
    pub twin_valid: Option<bool>,
    pub error: Option<String>,
    pub latency_ms: Option<f64>,
    pub completion_tokens: Option<u32>,
    pub finish_reason: Option<String>,
    pub attempts: Option<u32>,
    pub cost: Option<f64>,
}

/// A deduplicated pair: the unit every generation is scored against.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
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
    /// The earliest `published` of the copies (see [`RawPair`]), and which evidence gave it.
    #[serde(default)]
    pub published: Option<String>,
    #[serde(default)]
    pub published_source: Option<String>,
    /// Set when every copy was new in a re-crawl: published after this day.
    #[serde(default)]
    pub not_before: Option<String>,
}

/// What a row about one answer is about: the pair, its service, the model (`reference` for the
/// pair's own reference), the sample and the repair round. Generations, validations, lints and
/// scores are joined on it; passing it whole keeps the five from being mixed up.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct RowKey {
    pub pair_id: String,
    pub service: String,
    pub model: String,
    pub sample: u32,
    pub round: u32,
}

/// One model output for one pair (round 0 = zero-shot, round k = k-th repair).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
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
    /// Set when the request failed (transport, HTTP, timeout, budget, refused, a failed batch
    /// line): not the model's answer, so no validation, lint or score row follows it, it is in
    /// no n or rate, and the next run asks it again. `output` is then null.
    pub error: Option<String>,
    /// Empty, prose-only or repetitive output (the study's "degenerate" flag).
    pub degenerate: bool,
    /// Which kind of degenerate: `empty`, `prose` or `repetitive`; for an imported answer,
    /// also `oversized` (kept cut to a bound) or `undecodable` (not text; kept as decoded lossily).
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

impl Generation {
    /// An empty row for `key`; who builds it fills in the rest.
    pub fn at(key: RowKey) -> Generation {
        let RowKey { pair_id, service, model, sample, round } = key;
        Generation { pair_id, service, model, sample, round, ..Generation::default() }
    }

    pub fn key(&self) -> RowKey {
        RowKey {
            pair_id: self.pair_id.clone(),
            service: self.service.clone(),
            model: self.model.clone(),
            sample: self.sample,
            round: self.round,
        }
    }
}

/// What one repair round did for one service and model (SPEC §1 `repairs`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RepairRow {
    pub service: String,
    pub model: String,
    pub round: u32,
    /// The model that wrote the repairs (the model itself, or `[stages.repair] model`).
    pub repair_model: String,
    /// What "valid" means in this row: `schema`, or `schema+lint` (schema-valid and passed by every
    /// validator of the lint stage that judged it) with `[stages.repair] feedback = ["schema", "lint"]`.
    #[serde(default)]
    pub criterion: String,
    /// Answers (pair, sample) in the study at round 0 (errored requests are not).
    pub total: u64,
    /// Schema-valid before this round (carried over untouched).
    pub valid_before: u64,
    /// Revisited this round: invalid after the previous round.
    pub attempted: u64,
    /// Revisited and now schema-valid.
    pub fixed: u64,
    /// Revisited, answered, and still invalid.
    pub still_invalid: u64,
    /// Revisited but the request failed: no answer, so neither fixed nor still invalid; the
    /// next run asks it again.
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
    /// The last day its training data covers: the time split's line.
    #[serde(default)]
    pub knowledge_cutoff: Option<String>,
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

/// One lint tool's verdict on one text (an output, or a pair's reference: `model = "reference"`).
/// A text gets one row per tool of its service (GitHub Actions: actionlint and zizmor).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct Lint {
    pub pair_id: String,
    pub service: String,
    pub model: String,
    pub sample: u32,
    pub round: u32,
    /// `actionlint`, `zizmor`, `gitlab-ci-local`, `circleci-config-parser`, or `schema` (Travis CI: no
    /// offline validator exists beyond its schema).
    pub tool: Option<String>,
    /// `validator` (the service's own checker: the study's lint validity) or `audit` (security
    /// findings, reported beside it).
    pub kind: String,
    /// `None` when the tool is not installed here: `note` says why.
    pub tool_version: Option<String>,
    /// The study's verdict: `completed_ok` for a fragment that could be completed, else `as_is_ok`.
    /// `None` when the text was not judged (tool missing, or it could not read the text): see `note`.
    pub ok: Option<bool>,
    /// No finding on the text as written.
    pub as_is_ok: Option<bool>,
    /// No finding inside the fragment's own lines once wrapped into the smallest standalone file
    /// (`completed`). Equal to `as_is_ok` for a standalone text; `None` for a fragment of a shape no
    /// wrapping rule covers.
    pub completed_ok: Option<bool>,
    /// The findings that decide `ok`: as written for a standalone text, inside the fragment (lines
    /// and columns of the text as written) for a completed one.
    pub findings: Vec<Finding>,
    /// The findings the tool reported on the wrapper's own lines (never counted against the text).
    pub wrapper_findings: Vec<Finding>,
    /// The wrapping rule applied (`steps→job`, `job→workflow`, …), if the text was a fragment.
    pub completed: Option<String>,
    /// Why the text was not judged or not completed, if so.
    pub note: Option<String>,
}

/// One finding of a lint tool. `line` and `column` are 1-based, in the text as stored (the wrapper
/// removed), `None` when the tool reports a path rather than a place.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct Finding {
    /// The tool's rule id (`expression`, `shellcheck:SC2086`, `template-injection`, …).
    pub rule: String,
    /// The tool's own severity word (`error` for actionlint, zizmor's `High`…`Informational`).
    pub severity: String,
    pub line: Option<u32>,
    pub column: Option<u32>,
    pub message: String,
}

/// What a metric's values are: the Arrow type of its `scores` column (`Float64` or `Boolean`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetricKind {
    Float,
    Bool,
}

/// A similarity metric as the tables, stats and report see it. The score stage's registry
/// (`doc2ci_score::METRICS`) owns the list; this descriptor lives here so that stats and report can
/// take the list as data without depending on the score stage.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MetricInfo {
    /// Its `scores` column, its `metric` in the `stats` table and its key in the study's units.
    pub name: &'static str,
    /// Whether a larger value means an output closer to its reference (where the report bolds "best").
    pub higher_is_better: bool,
    pub kind: MetricKind,
    /// The study's tests and figures cover it (SPEC §7). False for a metric only recorded in
    /// `scores` (kv_exact, kv_wildcard): the stats table and the report leave it out.
    pub in_study: bool,
}

/// One metric's value in a [`Score`] row; its variant is its column's type.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum MetricValue {
    Float(f64),
    Bool(bool),
}

impl MetricValue {
    pub fn kind(self) -> MetricKind {
        match self {
            MetricValue::Float(_) => MetricKind::Float,
            MetricValue::Bool(_) => MetricKind::Bool,
        }
    }

    /// The value as a number, a bool as 0 or 1: what the study averages and tests.
    pub fn as_f64(self) -> f64 {
        match self {
            MetricValue::Float(v) => v,
            MetricValue::Bool(b) => b as u8 as f64,
        }
    }

    /// The zero of a kind (`0.0`, `false`).
    pub fn zero(kind: MetricKind) -> MetricValue {
        match kind {
            MetricKind::Float => MetricValue::Float(0.0),
            MetricKind::Bool => MetricValue::Bool(false),
        }
    }
}

/// A bare `f64` or `bool`, so the column is `Float64` or `Boolean` exactly as a plain field would be.
impl Serialize for MetricValue {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match *self {
            MetricValue::Float(v) => s.serialize_f64(v),
            MetricValue::Bool(b) => s.serialize_bool(b),
        }
    }
}

impl<'de> Deserialize<'de> for MetricValue {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = MetricValue;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a metric value (a float or a bool)")
            }
            fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<MetricValue, E> {
                Ok(MetricValue::Float(v))
            }
            fn visit_f32<E: serde::de::Error>(self, v: f32) -> Result<MetricValue, E> {
                Ok(MetricValue::Float(v as f64))
            }
            fn visit_bool<E: serde::de::Error>(self, v: bool) -> Result<MetricValue, E> {
                Ok(MetricValue::Bool(v))
            }
        }
        d.deserialize_any(V)
    }
}

/// Similarity of one output to its pair's reference (SPEC §5): the ids, one value per metric of the
/// score stage's registry, and `truncated`.
///
/// The files hold a flat column per metric (`pair_id, service, model, sample, round, <metrics in
/// registry order>, truncated`). The metrics are data rather than fields, so a new metric changes
/// the score stage only; the price is that the row's Arrow schema cannot be traced from the type:
/// the warehouse traces it from [`Score::template`].
#[derive(Debug, Clone, PartialEq)]
pub struct Score {
    pub pair_id: String,
    pub service: String,
    pub model: String,
    pub sample: u32,
    pub round: u32,
    /// (column, value) of each metric, in registry order. Rows the score stage builds borrow the
    /// registry's names; rows read back own them.
    pub metrics: Vec<(Cow<'static, str>, MetricValue)>,
    /// The output or the reference was longer than the scorer's cap and was scored on its
    /// beginning only (`doc2ci_score::MAX_SCORED_BYTES`). Absent from older files: false.
    pub truncated: bool,
}

impl Score {
    /// The value of metric `name`, if the row has it.
    pub fn get(&self, name: &str) -> Option<MetricValue> {
        self.metrics.iter().find(|(n, _)| n == name).map(|(_, v)| *v)
    }

    /// A row of `metrics` with empty ids and zero values: it has every column, with its type, so
    /// the Parquet schema of a partition (even an empty one) is traced from it.
    pub fn template(metrics: &[MetricInfo]) -> Score {
        Score {
            pair_id: String::new(),
            service: String::new(),
            model: String::new(),
            sample: 0,
            round: 0,
            metrics: metrics.iter().map(|m| (Cow::Borrowed(m.name), MetricValue::zero(m.kind))).collect(),
            truncated: false,
        }
    }
}

/// A struct while the names are the registry's `&'static str`s: serde_arrow traces a struct's
/// columns in order (the schema of [`Score::template`]) but sorts a map's. Rows read back own their
/// names and are written as a map, whose entries serde_arrow places into the columns by name.
impl Serialize for Score {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::{SerializeMap, SerializeStruct};
        let len = 6 + self.metrics.len();
        if self.metrics.iter().all(|(n, _)| matches!(n, Cow::Borrowed(_))) {
            let mut m = s.serialize_struct("Score", len)?;
            m.serialize_field("pair_id", &self.pair_id)?;
            m.serialize_field("service", &self.service)?;
            m.serialize_field("model", &self.model)?;
            m.serialize_field("sample", &self.sample)?;
            m.serialize_field("round", &self.round)?;
            for (name, v) in &self.metrics {
                if let Cow::Borrowed(name) = name {
                    m.serialize_field(name, v)?;
                }
            }
            m.serialize_field("truncated", &self.truncated)?;
            m.end()
        } else {
            let mut m = s.serialize_map(Some(len))?;
            m.serialize_entry("pair_id", &self.pair_id)?;
            m.serialize_entry("service", &self.service)?;
            m.serialize_entry("model", &self.model)?;
            m.serialize_entry("sample", &self.sample)?;
            m.serialize_entry("round", &self.round)?;
            for (name, v) in &self.metrics {
                m.serialize_entry(name.as_ref(), v)?;
            }
            m.serialize_entry("truncated", &self.truncated)?;
            m.end()
        }
    }
}

impl<'de> Deserialize<'de> for Score {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = Score;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a scores row")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Score, A::Error> {
                use serde::de::Error;
                let (mut pair_id, mut service, mut model, mut sample, mut round) = (None, None, None, None, None);
                let (mut metrics, mut truncated) = (Vec::new(), false);
                while let Some(key) = map.next_key::<String>()? {
                    match key.as_str() {
                        "pair_id" => pair_id = Some(map.next_value()?),
                        "service" => service = Some(map.next_value()?),
                        "model" => model = Some(map.next_value()?),
                        "sample" => sample = Some(map.next_value()?),
                        "round" => round = Some(map.next_value()?),
                        "truncated" => truncated = map.next_value()?,
                        // Every other column is a metric, in the file's (the registry's) order.
                        _ => {
                            let v = map.next_value()?;
                            metrics.push((Cow::Owned(key), v));
                        }
                    }
                }
                Ok(Score {
                    pair_id: pair_id.ok_or_else(|| A::Error::missing_field("pair_id"))?,
                    service: service.ok_or_else(|| A::Error::missing_field("service"))?,
                    model: model.ok_or_else(|| A::Error::missing_field("model"))?,
                    sample: sample.ok_or_else(|| A::Error::missing_field("sample"))?,
                    round: round.ok_or_else(|| A::Error::missing_field("round"))?,
                    metrics,
                    truncated,
                })
            }
        }
        d.deserialize_map(V)
    }
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
    fn iso_days_are_calendar_days() {
        assert_eq!(iso_day("2024-02-29").as_deref(), Some("2024-02-29"));
        assert_eq!(iso_day("2024-02-29T10:00:00Z").as_deref(), Some("2024-02-29"));
        assert_eq!(iso_day("2023-02-29"), None);
        assert_eq!(iso_day("2024-13-01"), None);
        assert_eq!(iso_day("2024-1-01"), None);
        assert_eq!(iso_day("2024-01-01x"), None);
        assert_eq!(iso_day("soon"), None);
    }

    fn dated(p: &str, src: &str, nb: Option<&str>) -> Dated {
        Dated { published: Some(p.into()), published_source: Some(src.into()), not_before: nb.map(str::to_string) }
    }

    #[test]
    fn copies_keep_the_earliest_date_and_a_bound_only_all_share() {
        let a = dated("2025-01-01", "sitemap", Some("2024-12-01"));
        let b = dated("2024-06-01", "stated", None);
        assert_eq!(earliest(&a, &b), dated("2024-06-01", "stated", None));
        let c = dated("2025-02-01", "first_crawl", Some("2024-11-01"));
        assert_eq!(earliest(&a, &c), dated("2025-01-01", "sitemap", Some("2024-11-01")));
    }

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
