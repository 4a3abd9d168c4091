//! `pipeline.toml`: the declared study.
//!
//! Parsing is strict (unknown keys, wrong types) so a typo never silently runs the wrong study;
//! every error names the file, the line and the key.
//!
//! Long on purpose: each key's rule sits next to its parse and its error message, so one file
//! answers "what may this key hold, and what does a mistake print"; the tests close it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use toml::Spanned;

/// The whole study, with paths resolved against the config file's folder.
#[derive(Debug, Clone)]
pub struct Config {
    pub file: PathBuf,
    pub warehouse: PathBuf,
    pub threads: usize,
    pub services: Vec<Service>,
    pub sources: Vec<Source>,
    pub models: Vec<Model>,
    pub stages: StageParams,
    /// The request cache shared across studies (`None`: off); not part of any cache key.
    pub request_cache: Option<crate::backends::CacheSettings>,
    /// `[study] remote`: the object-storage URL the warehouse is mirrored to after each run.
    pub remote: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Service {
    pub name: String,
    pub display: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct Source {
    pub name: String,
    pub service: String,
    pub kind: SourceKind,
}

/// Where a source's pairs come from; each kind carries only its own keys.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum SourceKind {
    /// A file of pairs (or a folder written by `doc2ci export benchmark`).
    Import(ImportSource),
    /// A documentation site.
    Crawl(CrawlSource),
}

#[derive(Debug, Clone, Serialize)]
pub struct ImportSource {
    pub format: String,
    pub path: PathBuf,
    pub columns: BTreeMap<String, String>,
    pub skip_bad_rows: bool,
}

impl Source {
    pub fn crawl(&self) -> Option<&CrawlSource> {
        match &self.kind {
            SourceKind::Crawl(c) => Some(c),
            SourceKind::Import(_) => None,
        }
    }
    pub fn import(&self) -> Option<&ImportSource> {
        match &self.kind {
            SourceKind::Import(i) => Some(i),
            SourceKind::Crawl(_) => None,
        }
    }
    pub fn kind_name(&self) -> &'static str {
        match self.kind {
            SourceKind::Import(_) => "import",
            SourceKind::Crawl(_) => "crawl",
        }
    }
}

/// A `kind = "crawl"` source: which profile, which site, which backend.
#[derive(Debug, Clone, Serialize)]
pub struct CrawlSource {
    pub profile_name: String,
    pub profile: doc2ci_crawl::Profile,
    /// A folder doc2ci serves on loopback itself (the bundled documentation site).
    pub serve: Option<PathBuf>,
    /// Or the origin of a documentation site (`https://docs.example.com`).
    pub url: Option<String>,
    pub backend: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct Model {
    pub name: String,
    pub family: Option<String>,
    pub size_b: Option<f64>,
    pub code: Option<bool>,
    pub proprietary: Option<bool>,
    /// A declared model this one was fine-tuned from (RQ6 compares them pair by pair).
    pub base_model: Option<String>,
    pub kind: ModelKind,
}

/// Where a model's outputs come from; each kind carries only its own settings.
#[derive(Debug, Clone, Serialize)]
pub enum ModelKind {
    /// `backend = "import"`: a file of outputs answering one service's pairs of one source.
    Import(ImportModel),
    /// A generative backend (`crate::backends`): how to call the model.
    Generate(GenSettings),
}

#[derive(Debug, Clone, Serialize)]
pub struct ImportModel {
    pub path: PathBuf,
    pub format: String,
    pub service: String,
    /// The source whose pair IDs the file's rows refer to.
    pub source: String,
    pub columns: BTreeMap<String, String>,
    pub skip_bad_rows: bool,
}

impl Model {
    pub fn gen(&self) -> Option<&GenSettings> {
        match &self.kind {
            ModelKind::Generate(g) => Some(g),
            ModelKind::Import(_) => None,
        }
    }
    pub fn import(&self) -> Option<&ImportModel> {
        match &self.kind {
            ModelKind::Import(i) => Some(i),
            ModelKind::Generate(_) => None,
        }
    }
    /// `import`, or the generative backend's name.
    pub fn backend(&self) -> &str {
        match &self.kind {
            ModelKind::Import(_) => "import",
            ModelKind::Generate(g) => &g.key.backend,
        }
    }
}

/// A model entry while it is checked; becomes a [`Model`] once every rule holds.
struct FlatModel {
    name: String,
    backend: String,
    family: Option<String>,
    size_b: Option<f64>,
    code: Option<bool>,
    proprietary: Option<bool>,
    base_model: Option<String>,
    path: Option<PathBuf>,
    format: String,
    service: Option<String>,
    source: Option<String>,
    columns: BTreeMap<String, String>,
    skip_bad_rows: bool,
    gen: Option<GenSettings>,
}

impl FlatModel {
    fn typed(self) -> Model {
        let kind = match self.gen {
            Some(g) => ModelKind::Generate(g),
            None => ModelKind::Import(ImportModel {
                path: self.path.expect("checked: an import model has a path"),
                format: self.format,
                service: self.service.expect("checked: an import model names its service"),
                source: self.source.expect("checked: an import model names its source"),
                columns: self.columns,
                skip_bad_rows: self.skip_bad_rows,
            }),
        };
        Model {
            name: self.name,
            family: self.family,
            size_b: self.size_b,
            code: self.code,
            proprietary: self.proprietary,
            base_model: self.base_model,
            kind,
        }
    }
}

pub use crate::backends::{GenKey, GenSettings};

/// Per-stage parameters; part of each stage's cache key.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StageParams {
    #[serde(default)]
    pub import: ImportParams,
    #[serde(default)]
    pub dedupe: DedupeParams,
    #[serde(default)]
    pub validate: QualityParams,
    #[serde(default)]
    pub score: QualityParams,
    #[serde(default)]
    pub lint: LintParams,
    #[serde(default)]
    pub crawl: CrawlParams,
    #[serde(default)]
    pub generate: GenerateParams,
    #[serde(default)]
    pub repair: RepairParams,
    #[serde(default)]
    pub stats: StatsParams,
    #[serde(default)]
    pub report: ReportParams,
}

/// `[stages.stats]`: the tests of SPEC §7 over scores and validations.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StatsParams {
    #[serde(default = "yes")]
    pub enabled: bool,
    /// Seed of the percentile bootstrap (the same seed gives the same CIs everywhere).
    #[serde(default = "default_seed")]
    pub bootstrap_seed: u64,
    #[serde(default = "default_resamples")]
    pub bootstrap_resamples: usize,
    /// Metrics whose means get bootstrap CIs.
    #[serde(default = "default_ci_metrics")]
    pub ci_metrics: Vec<String>,
}

impl Default for StatsParams {
    fn default() -> Self {
        Self {
            enabled: true,
            bootstrap_seed: default_seed(),
            bootstrap_resamples: default_resamples(),
            ci_metrics: default_ci_metrics(),
        }
    }
}

fn default_seed() -> u64 {
    doc2ci_stats::study::Params::default().seed
}
fn default_resamples() -> usize {
    doc2ci_stats::study::Params::default().resamples
}
fn default_ci_metrics() -> Vec<String> {
    doc2ci_stats::study::Params::default().ci_metrics
}

/// `[stages.report]`: HTML, Markdown, CSV and SVG under `<warehouse>/report/`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReportParams {
    #[serde(default = "yes")]
    pub enabled: bool,
    #[serde(default = "default_title")]
    pub title: String,
}

impl Default for ReportParams {
    fn default() -> Self {
        Self { enabled: true, title: default_title() }
    }
}

fn default_title() -> String {
    "doc2ci study report".into()
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GenerateParams {
    /// Requests per checkpointed batch: a killed run loses at most one batch of answers.
    /// Default: enough to keep every endpoint busy (16, or 2 × concurrency × endpoints).
    #[serde(default)]
    pub batch_size: Option<usize>,
    /// Budget of the whole run over every priced model (a model's own `max_cost` binds too).
    #[serde(default)]
    pub max_cost: Option<f64>,
}

impl Default for GenerateParams {
    fn default() -> Self {
        Self { batch_size: None, max_cost: None }
    }
}

/// Schema-guided repair (SPEC §1).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RepairParams {
    #[serde(default)]
    pub enabled: bool,
    #[serde(default = "default_rounds")]
    pub rounds: u32,
    /// The `[[models]]` entry that repairs; unset = each generative model repairs its own
    /// outputs and imported models are not repaired.
    #[serde(default)]
    pub model: Option<String>,
    /// Only these models' outputs are repaired (default: all).
    #[serde(default)]
    pub models: Option<Vec<String>>,
    /// What a round quotes and fixes: `["schema"]` (schema errors), or `["schema", "lint"]` (also the
    /// lint stage's validator findings: an output is revisited until both pass).
    #[serde(default = "default_feedback")]
    pub feedback: Vec<String>,
}

impl Default for RepairParams {
    fn default() -> Self {
        Self { enabled: false, rounds: default_rounds(), model: None, models: None, feedback: default_feedback() }
    }
}

impl RepairParams {
    pub fn lint_feedback(&self) -> bool {
        self.feedback.iter().any(|f| f == "lint")
    }
}

fn default_feedback() -> Vec<String> {
    vec!["schema".into()]
}

fn default_rounds() -> u32 {
    2
}

/// Politeness, limits and browser settings of every crawl source.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CrawlParams {
    /// `webdriver`, `http` or `auto` (webdriver when a browser is available, else http);
    /// a source's own `backend` wins.
    pub backend: String,
    /// A running WebDriver server to use instead of starting `chromedriver`.
    pub webdriver: Option<String>,
    pub chromedriver: String,
    /// The Chromium binary (default: whatever chromedriver finds).
    pub chromium: Option<String>,
    pub max_pages: usize,
    /// Links followed from a start URL.
    pub max_depth: u32,
    /// Requests in flight at once on the site's host (`http`; one browser tab for `webdriver`).
    pub concurrency: usize,
    /// Requests started per second on the host; 0 = no limit.
    pub rate_limit: f64,
    /// Per request (`http`) or page load (`webdriver`).
    pub timeout_secs: f64,
    /// Extra attempts after a timeout, a connection error or a 5xx answer.
    pub retries: u32,
    pub max_redirects: usize,
    /// Larger pages are recorded as too large, without their HTML.
    pub max_page_bytes: u64,
    /// Cached pages of a remote site younger than this are not fetched again.
    pub max_age_hours: f64,
    pub user_agent: String,
    /// Requests started per second on a remote site (a `url` source), whatever `rate_limit` says:
    /// what a site operator accepts from a crawler. robots.txt's `Crawl-delay` slows it further.
    pub remote_rate_limit: f64,
    /// Follow `<link rel="canonical">`: a page whose canonical URL was fetched already is recorded
    /// as its duplicate, without HTML, and the canonical URL is never queued again.
    pub canonical: bool,
    /// Longest `Retry-After` honoured on a 429/503 before the attempt counts as failed.
    pub max_retry_after_secs: f64,
}

impl Default for CrawlParams {
    fn default() -> Self {
        Self {
            backend: "auto".into(),
            webdriver: None,
            chromedriver: "chromedriver".into(),
            chromium: None,
            max_pages: 1000,
            max_depth: 20,
            concurrency: 4,
            rate_limit: 10.0,
            timeout_secs: 30.0,
            retries: 2,
            max_redirects: 5,
            max_page_bytes: 5 << 20,
            max_age_hours: 168.0,
            // Identifies the crawler to site operators; robots.txt groups for `doc2ci` apply.
            user_agent: concat!("doc2ci/", env!("CARGO_PKG_VERSION"), " (documentation benchmark crawler)").into(),
            remote_rate_limit: 2.0,
            canonical: true,
            max_retry_after_secs: 120.0,
        }
    }
}

pub const CRAWL_BACKENDS: &[&str] = &["webdriver", "http", "auto"];

/// validate/score switches: a study of pairs alone (or without assets) can turn them off.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QualityParams {
    #[serde(default = "yes")]
    pub enabled: bool,
}

impl Default for QualityParams {
    fn default() -> Self {
        Self { enabled: true }
    }
}

fn yes() -> bool {
    true
}

/// `[stages.lint]`: each service's own validator and security audit (see README "Lint").
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LintParams {
    #[serde(default = "yes")]
    pub enabled: bool,
    /// A tool that takes longer on one file is stopped and the row says so.
    #[serde(default = "default_lint_timeout")]
    pub timeout_secs: u64,
    /// Longer texts are not given to the tools (the row says so): the tools hold a file in memory
    /// several times over.
    #[serde(default = "default_lint_max_bytes")]
    pub max_bytes: usize,
}

impl Default for LintParams {
    fn default() -> Self {
        Self { enabled: true, timeout_secs: default_lint_timeout(), max_bytes: default_lint_max_bytes() }
    }
}

fn default_lint_timeout() -> u64 {
    20
}
/// 3.5 times the longest of the 4,350 real outputs; actionlint takes ~14 s on a 290 KB workflow.
fn default_lint_max_bytes() -> usize {
    64 << 10
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ImportParams {
    /// Rows per checkpointed batch.
    #[serde(default = "default_batch")]
    pub batch_size: usize,
}

impl Default for ImportParams {
    fn default() -> Self {
        Self { batch_size: default_batch() }
    }
}

fn default_batch() -> usize {
    500
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DedupeParams {
    #[serde(default)]
    pub mode: doc2ci_dedupe::Mode,
    /// Ask models for pairs whose description contains their reference (flagged in `pairs.leak`).
    #[serde(default)]
    pub keep_leaks: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    study: RawStudy,
    #[serde(default)]
    services: Vec<Spanned<RawService>>,
    #[serde(default)]
    sources: Vec<Spanned<RawSource>>,
    #[serde(default)]
    models: Vec<Spanned<RawModel>>,
    #[serde(default)]
    stages: StageParams,
    #[serde(default)]
    /// Tables, not profiles yet: a profile with `base = "…"` gets its other keys from a built-in one.
    profiles: BTreeMap<String, Spanned<toml::Table>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawStudy {
    warehouse: Spanned<String>,
    #[serde(default)]
    threads: Option<usize>,
    /// A folder for the request cache shared across studies, or `"off"` (see `backends::cache`).
    #[serde(default)]
    request_cache: Option<String>,
    /// Days an answer in the request cache stands (default: forever).
    #[serde(default)]
    request_cache_ttl_days: Option<f64>,
    /// Object storage the warehouse is mirrored to (`src/remote.rs`).
    #[serde(default)]
    remote: Option<Spanned<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawService {
    name: Spanned<String>,
    display: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSource {
    #[serde(default)]
    name: Option<Spanned<String>>,
    kind: Spanned<String>,
    #[serde(default)]
    format: Option<Spanned<String>>,
    #[serde(default)]
    path: Option<Spanned<String>>,
    service: Spanned<String>,
    #[serde(default)]
    columns: BTreeMap<String, String>,
    #[serde(default)]
    skip_bad_rows: bool,
    #[serde(default)]
    profile: Option<Spanned<String>>,
    #[serde(default)]
    serve: Option<Spanned<String>>,
    #[serde(default)]
    url: Option<Spanned<String>>,
    #[serde(default)]
    backend: Option<Spanned<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawModel {
    name: Spanned<String>,
    backend: Spanned<String>,
    #[serde(default)]
    format: Option<Spanned<String>>,
    #[serde(default)]
    path: Option<Spanned<String>>,
    #[serde(default)]
    service: Option<Spanned<String>>,
    #[serde(default)]
    source: Option<Spanned<String>>,
    #[serde(default)]
    columns: BTreeMap<String, String>,
    #[serde(default)]
    skip_bad_rows: bool,
    #[serde(default)]
    family: Option<String>,
    #[serde(default)]
    size_b: Option<f64>,
    #[serde(default)]
    code: Option<bool>,
    #[serde(default)]
    proprietary: Option<bool>,
    #[serde(default)]
    base_model: Option<Spanned<String>>,
    #[serde(default)]
    base_url: Option<Spanned<String>>,
    #[serde(default)]
    base_urls: Option<Spanned<Vec<String>>>,
    #[serde(default)]
    api_key_env: Option<Spanned<String>>,
    #[serde(default)]
    model: Option<Spanned<String>>,
    #[serde(default)]
    params: Option<toml::Table>,
    #[serde(default)]
    concurrency: Option<Spanned<usize>>,
    #[serde(default)]
    rpm: Option<u32>,
    #[serde(default)]
    tpm: Option<u32>,
    #[serde(default)]
    retries: Option<u32>,
    #[serde(default)]
    timeout_ms: Option<Spanned<u64>>,
    #[serde(default)]
    max_tokens: Option<Spanned<u32>>,
    #[serde(default)]
    temperature: Option<Spanned<f32>>,
    #[serde(default)]
    samples: Option<Spanned<u32>>,
    #[serde(default)]
    seed: Option<u64>,
    #[serde(default)]
    few_shot: Option<usize>,
    #[serde(default)]
    max_pairs: Option<Spanned<usize>>,
    #[serde(default)]
    retrieval: Option<Spanned<toml::Value>>,
    #[serde(default)]
    retrieval_chars: Option<usize>,
    #[serde(default)]
    num_ctx: Option<u32>,
    #[serde(default)]
    price_per_1k_input: Option<f64>,
    #[serde(default)]
    price_per_1k_output: Option<f64>,
    /// Budget of this model in one run (needs a price).
    #[serde(default)]
    max_cost: Option<Spanned<f64>>,
    #[serde(default)]
    services: Option<Spanned<Vec<String>>>,
}

const IMPORT_FORMATS: &[&str] = &["llm4ci", "csv", "jsonl", "parquet"];
/// A model's outputs as an OpenAI Batch output file (`vllm run-batch`, a provider's batch),
/// answering `doc2ci export requests`: `custom_id` names the pair, sample and round.
pub const BATCH_RESULTS: &str = "openai-batch";

/// Partition values end up in folder names (`model=…`), so they must be path-safe.
fn check_name(what: &str, v: &str) -> std::result::Result<(), String> {
    if v.is_empty()
        || !v.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
        || v.starts_with('.')
    {
        return Err(format!("{what} `{v}` must be non-empty and use only letters, digits, `.`, `_`, `-`"));
    }
    Ok(())
}

struct Ctx<'a> {
    file: &'a Path,
    text: &'a str,
}

impl Ctx<'_> {
    fn line(&self, offset: usize) -> usize {
        self.text[..offset.min(self.text.len())].matches('\n').count() + 1
    }
    fn err<T>(&self, span: std::ops::Range<usize>, key: &str, msg: impl std::fmt::Display) -> Result<T> {
        bail!("{}:{}: `{}`: {}", self.file.display(), self.line(span.start), key, msg)
    }
    fn path(&self, span: std::ops::Range<usize>, key: &str, p: &str) -> Result<PathBuf> {
        let base = self.file.parent().unwrap_or(Path::new("."));
        let full = base.join(p);
        if !full.exists() {
            return self.err(span, key, format!("file `{}` does not exist (resolved to {})", p, full.display()));
        }
        Ok(full)
    }
}

impl Config {
    pub fn load(file: &Path) -> Result<Config> {
        let text = std::fs::read_to_string(file).with_context(|| format!("cannot read config {}", file.display()))?;
        Self::parse(file, &text)
    }

    pub fn parse(file: &Path, text: &str) -> Result<Config> {
        // toml's own message quotes the offending line, which may hold a pasted key: name the place only.
        let raw: RawConfig = toml::from_str(text).map_err(|e| {
            let at = e.span().map_or(String::new(), |sp| {
                let before = &text[..sp.start.min(text.len())];
                let line = before.matches('\n').count() + 1;
                let col = before.len() - before.rfind('\n').map_or(0, |i| i + 1) + 1;
                // The key of that line (never its value) says where, as the quoted line did.
                let key = text.lines().nth(line - 1).and_then(|l| l.split_once('=')).map(|(k, _)| k.trim());
                match key.filter(|k| !k.is_empty() && k.len() <= 64) {
                    Some(k) => format!(" at line {line}, column {col} (key `{k}`)"),
                    None => format!(" at line {line}, column {col}"),
                }
            });
            anyhow::anyhow!("{}: TOML parse error{at}: {}", file.display(), e.message().trim_end())
        })?;
        let cx = Ctx { file, text };
        let base = file.parent().unwrap_or(Path::new("."));

        let mut services = Vec::new();
        let mut service_spans = Vec::new();
        for s in raw.services {
            let span = s.span();
            let s = s.into_inner();
            service_spans.push(s.name.span());
            if let Err(m) = check_name("service name", s.name.get_ref()) {
                return cx.err(s.name.span(), "services.name", m);
            }
            if services.iter().any(|x: &Service| x.name == *s.name.get_ref()) {
                return cx.err(span, "services.name", format!("duplicate service `{}`", s.name.get_ref()));
            }
            services.push(Service { name: s.name.into_inner(), display: s.display });
        }
        let known_service = |cx: &Ctx, sp: &Spanned<String>, key: &str| -> Result<String> {
            if services.iter().any(|x| x.name == *sp.get_ref()) {
                Ok(sp.get_ref().clone())
            } else {
                let names: Vec<_> = services.iter().map(|s| s.name.as_str()).collect();
                cx.err(sp.span(), key, format!("unknown service `{}` (declared: {})", sp.get_ref(), names.join(", ")))
            }
        };

        let mut sources: Vec<Source> = Vec::new();
        for s in raw.sources {
            let span = s.span();
            let s = s.into_inner();
            let service = known_service(&cx, &s.service, "sources.service")?;
            if s.kind.get_ref() == "crawl" {
                let src = crawl_source(&cx, span.clone(), s, service, &raw.profiles, &raw.stages.crawl)?;
                if sources.iter().any(|x| x.name == src.name) {
                    return cx.err(
                        span,
                        "sources.name",
                        format!("duplicate source name `{}`: give one a `name`", src.name),
                    );
                }
                sources.push(src);
                continue;
            }
            if s.kind.get_ref() != "import" {
                return cx.err(
                    s.kind.span(),
                    "sources.kind",
                    format!("unsupported kind `{}` (supported: import, crawl)", s.kind.get_ref()),
                );
            }
            for (key, v) in [("profile", &s.profile), ("serve", &s.serve), ("url", &s.url), ("backend", &s.backend)] {
                if let Some(v) = v {
                    return cx.err(v.span(), &format!("sources.{key}"), "only crawl sources take this key");
                }
            }
            let Some(path) = s.path else {
                return cx.err(span, "sources.path", "missing: an import source needs a file");
            };
            let full = cx.path(path.span(), "sources.path", path.get_ref())?;
            let format = match &s.format {
                Some(f) if !IMPORT_FORMATS.contains(&f.get_ref().as_str()) && f.get_ref() != "benchmark" => {
                    return cx.err(
                        f.span(),
                        "sources.format",
                        format!("unknown format `{}` (one of {}, benchmark)", f.get_ref(), IMPORT_FORMATS.join(", ")),
                    )
                }
                Some(f) => f.get_ref().clone(),
                None => "llm4ci".into(),
            };
            // A released benchmark is a folder (`doc2ci export benchmark`); every other format a file.
            if (format == "benchmark") != full.is_dir() {
                let want =
                    if format == "benchmark" { "a folder written by `doc2ci export benchmark`" } else { "a file" };
                return cx.err(path.span(), "sources.path", format!("`{}` is not {want}", path.get_ref()));
            }
            let name = match &s.name {
                Some(n) => {
                    if let Err(m) = check_name("source name", n.get_ref()) {
                        return cx.err(n.span(), "sources.name", m);
                    }
                    n.get_ref().clone()
                }
                None => file_stem(&full),
            };
            if sources.iter().any(|x| x.name == name) {
                return cx.err(span, "sources.name", format!("duplicate source name `{name}`: give one a `name`"));
            }
            sources.push(Source {
                name,
                service,
                kind: SourceKind::Import(ImportSource {
                    format,
                    path: full,
                    columns: s.columns,
                    skip_bad_rows: s.skip_bad_rows,
                }),
            });
        }

        let mut models: Vec<FlatModel> = Vec::new();
        let mut bases = Vec::new();
        for m in raw.models {
            let span = m.span();
            let m = m.into_inner();
            if let Err(msg) = check_name("model name", m.name.get_ref()) {
                return cx.err(m.name.span(), "models.name", msg);
            }
            if models.iter().any(|x| x.name == *m.name.get_ref()) {
                return cx.err(m.name.span(), "models.name", format!("duplicate model name `{}`", m.name.get_ref()));
            }
            if m.backend.get_ref() != "import" && crate::backends::kind(m.backend.get_ref()).is_none() {
                return cx.err(
                    m.backend.span(),
                    "models.backend",
                    format!(
                        "unknown backend `{}` (one of {})",
                        m.backend.get_ref(),
                        crate::backends::names().join(", ")
                    ),
                );
            }
            let service = match &m.service {
                Some(s) => Some(known_service(&cx, s, "models.service")?),
                None if services.len() == 1 => Some(services[0].name.clone()),
                None => None,
            };
            let mut model = FlatModel {
                name: m.name.get_ref().clone(),
                backend: m.backend.get_ref().clone(),
                family: m.family.clone(),
                size_b: m.size_b,
                code: m.code,
                proprietary: m.proprietary,
                base_model: m.base_model.as_ref().map(|b| b.get_ref().clone()),
                path: None,
                format: "llm4ci".into(),
                service,
                source: None,
                columns: m.columns.clone(),
                skip_bad_rows: m.skip_bad_rows,
                gen: None,
            };
            // A key the model's kind does not read would be ignored: a typo or a wrong backend.
            let import = model.backend == "import";
            if let Some((k, sp, _)) = sided_keys(&m, &span).into_iter().find(|(_, _, generative)| *generative == import)
            {
                let takers = if import {
                    format!("generative backends ({})", crate::backends::names()[1..].join(", "))
                } else {
                    "the import backend".to_string()
                };
                return cx.err(
                    sp,
                    &format!("models.{k}"),
                    format!("model `{}`: `{k}` applies to {takers}, not {}", model.name, model.backend),
                );
            }
            if !import {
                model.gen = Some(gen_settings(&cx, span.clone(), &m, &services)?);
            }
            if model.backend == "import" {
                let Some(path) = &m.path else {
                    return cx.err(
                        span,
                        "models.path",
                        format!("model `{}`: the import backend needs `path`", model.name),
                    );
                };
                model.path = Some(cx.path(path.span(), "models.path", path.get_ref())?);
                if let Some(f) = &m.format {
                    if !IMPORT_FORMATS.contains(&f.get_ref().as_str()) && f.get_ref() != BATCH_RESULTS {
                        return cx.err(
                            f.span(),
                            "models.format",
                            format!(
                                "unknown format `{}` (one of {}, {BATCH_RESULTS})",
                                f.get_ref(),
                                IMPORT_FORMATS.join(", ")
                            ),
                        );
                    }
                    model.format = f.get_ref().clone();
                }
                let Some(service) = model.service.clone() else {
                    return cx.err(
                        span,
                        "models.service",
                        format!(
                            "model `{}`: several services are declared, say which one its outputs answer",
                            model.name
                        ),
                    );
                };
                let candidates: Vec<&Source> = sources.iter().filter(|s| s.service == service).collect();
                model.source = Some(match &m.source {
                    Some(s) if candidates.iter().any(|c| c.name == *s.get_ref()) => s.get_ref().clone(),
                    Some(s) => {
                        return cx.err(
                            s.span(),
                            "models.source",
                            format!("no source `{}` for service `{service}`", s.get_ref()),
                        )
                    }
                    None if candidates.len() == 1 => candidates[0].name.clone(),
                    None if candidates.is_empty() => {
                        return cx.err(
                            span,
                            "models.source",
                            format!("model `{}`: no source of pairs for service `{service}`", model.name),
                        )
                    }
                    None => {
                        return cx.err(
                            span,
                            "models.source",
                            format!(
                                "model `{}`: several sources serve `{service}`, say which one its IDs refer to",
                                model.name
                            ),
                        )
                    }
                });
            }
            if let Some(b) = &m.base_model {
                bases.push((model.name.clone(), b.get_ref().clone(), b.span()));
            }
            models.push(model);
        }
        // Checked once all models are known: a base may be declared after its fine-tuned model.
        for (name, base, span) in bases {
            if base == name {
                return cx.err(span, "models.base_model", format!("model `{name}` names itself as its base model"));
            }
            if !models.iter().any(|x| x.name == base) {
                return cx.err(
                    span,
                    "models.base_model",
                    format!("model `{name}`: base model `{base}` is not declared in [[models]]"),
                );
            }
        }

        if let Some(r) = &raw.study.remote {
            if let Err(e) = crate::remote::check_url(r.get_ref()) {
                return cx.err(r.span(), "study.remote", format!("{e:#}"));
            }
        }
        let threads =
            raw.study.threads.unwrap_or_else(|| std::thread::available_parallelism().map_or(2, |n| n.get())).max(1);
        let c = &raw.stages.crawl;
        if !CRAWL_BACKENDS.contains(&c.backend.as_str()) {
            bail!(
                "{}: `stages.crawl.backend`: unknown backend `{}` (one of {})",
                file.display(),
                c.backend,
                CRAWL_BACKENDS.join(", ")
            );
        }
        if c.max_pages == 0
            || c.concurrency == 0
            || c.timeout_secs <= 0.0
            || c.max_page_bytes == 0
            || c.rate_limit < 0.0
            || !(c.remote_rate_limit > 0.0)
            || c.max_retry_after_secs < 0.0
        {
            bail!("{}: `stages.crawl`: max_pages, concurrency, timeout_secs, max_page_bytes and remote_rate_limit must be positive, rate_limit and max_retry_after_secs not negative", file.display());
        }
        if raw.stages.import.batch_size == 0 {
            bail!("{}: `stages.import.batch_size` must be at least 1", file.display());
        }
        if raw.stages.generate.batch_size == Some(0) {
            bail!("{}: `stages.generate.batch_size` must be at least 1", file.display());
        }
        if raw.stages.generate.max_cost.is_some_and(|c| !(c > 0.0)) {
            bail!("{}: `stages.generate.max_cost` must be above 0", file.display());
        }
        let rp = &raw.stages.repair;
        if rp.enabled {
            let line = text.find("[stages.repair]").map_or(0, |o| cx.line(o));
            let at = |msg: String| -> Result<()> { bail!("{}:{line}: `stages.repair`: {msg}", file.display()) };
            if rp.rounds == 0 {
                at("`rounds` must be at least 1".into())?;
            }
            if !raw.stages.validate.enabled {
                at("repair needs the validator's errors: enable [stages.validate]".into())?;
            }
            if let Some(name) = &rp.model {
                match models.iter().find(|m| &m.name == name) {
                    None => at(format!("`model = \"{name}\"`: no such [[models]] entry"))?,
                    Some(m) if m.gen.is_none() => at(format!("`model = \"{name}\"` is an imported model; the repairing model must generate (openai, ollama, embedded)"))?,
                    _ => {}
                }
            }
            for name in rp.models.iter().flatten() {
                if !models.iter().any(|m| &m.name == name) {
                    at(format!("`models`: no [[models]] entry `{name}`"))?;
                }
            }
            if let Some(bad) = rp.feedback.iter().find(|f| !["schema", "lint"].contains(&f.as_str())) {
                at(format!("`feedback`: unknown `{bad}` (known: schema, lint)"))?;
            }
            if !rp.feedback.iter().any(|f| f == "schema") {
                at("`feedback` must include \"schema\" (a repair always quotes the schema errors)".into())?;
            }
            if rp.lint_feedback() && !raw.stages.lint.enabled {
                at("`feedback = [\"schema\", \"lint\"]` needs the lint stage: enable [stages.lint]".into())?;
            }
        }
        if raw.stages.stats.bootstrap_resamples == 0 {
            bail!("{}: `stages.stats.bootstrap_resamples` must be at least 1", file.display());
        }
        let known = doc2ci_stats::study::tested_metrics(doc2ci_score::metric_infos());
        if let Some(bad) = raw.stages.stats.ci_metrics.iter().find(|m| !known.contains(&m.as_str())) {
            bail!(
                "{}: `stages.stats.ci_metrics`: unknown metric `{bad}` (known: {})",
                file.display(),
                known.join(", ")
            );
        }
        // validate, score and lint know four services; any other name would silently get no rows (a typo
        // hiding a whole service's results), so it is an error while either stage is on.
        if raw.stages.validate.enabled || raw.stages.score.enabled || raw.stages.lint.enabled {
            for (svc, span) in services.iter().zip(&service_spans) {
                if svc.name.parse::<doc2ci_validate::Service>().is_err() {
                    return cx.err(
                        span.clone(),
                        "services.name",
                        format!(
                            "unknown service `{}`: validate, score and lint know github-actions, circleci, gitlab-ci \
                             and travis-ci (another name needs [stages.validate], [stages.score] and [stages.lint] \
                             enabled = false)",
                            svc.name
                        ),
                    );
                }
            }
        }
        Ok(Config {
            file: file.to_path_buf(),
            warehouse: base.join(raw.study.warehouse.get_ref()),
            request_cache: crate::backends::CacheSettings::resolve(
                raw.study.request_cache.as_deref(),
                raw.study.request_cache_ttl_days,
                &base,
            ),
            remote: raw.study.remote.as_ref().map(|r| r.get_ref().clone()),
            threads,
            services,
            sources,
            models: models.into_iter().map(FlatModel::typed).collect(),
            stages: raw.stages,
        })
    }

    pub fn service(&self, name: &str) -> Option<&Service> {
        self.services.iter().find(|s| s.name == name)
    }
}

/// A source's profile: a `[profiles.NAME]` table (with `base = "<built-in>"` it starts from that
/// built-in profile and overrides single keys), else a built-in profile of that name.
fn resolve_profile(
    cx: &Ctx,
    pname: &Spanned<String>,
    profiles: &BTreeMap<String, Spanned<toml::Table>>,
) -> Result<doc2ci_crawl::Profile> {
    let name = pname.get_ref();
    let key = format!("profiles.{name}");
    let profile = match profiles.get(name) {
        Some(t) => {
            let mut table = t.get_ref().clone();
            let parsed = match table.remove("base") {
                Some(toml::Value::String(b)) => match doc2ci_crawl::builtin(&b) {
                    Some(base) => {
                        let o = serde_json::to_value(&table).map_err(|e| anyhow::anyhow!("{e}"))?;
                        let serde_json::Value::Object(o) = o else { unreachable!("a table is an object") };
                        doc2ci_crawl::with_overrides(&base, o)
                    }
                    None => {
                        return cx.err(
                            t.span(),
                            &format!("{key}.base"),
                            format!("no built-in profile `{b}` (built-in: {})", doc2ci_crawl::BUILTIN.join(", ")),
                        )
                    }
                },
                Some(_) => {
                    return cx.err(t.span(), &format!("{key}.base"), "the name of a built-in profile (a string)")
                }
                None => {
                    toml::Value::Table(table).try_into::<doc2ci_crawl::Profile>().map_err(|e| e.message().to_string())
                }
            };
            match parsed {
                Ok(p) => (p, t.span()),
                Err(m) => return cx.err(t.span(), &key, m),
            }
        }
        None => match doc2ci_crawl::builtin(name) {
            Some(p) => (p, pname.span()),
            None => {
                let mut names: Vec<&str> = profiles.keys().map(String::as_str).collect();
                names.extend(doc2ci_crawl::BUILTIN);
                return cx.err(
                    pname.span(),
                    "sources.profile",
                    format!("no profile `{name}` (declared or built-in: {})", names.join(", ")),
                );
            }
        },
    };
    if let Err(m) = profile.0.compile() {
        return cx.err(profile.1, &key, m);
    }
    Ok(profile.0)
}

/// A `kind = "crawl"` source checked against its profile and the crawl parameters.
fn crawl_source(
    cx: &Ctx,
    span: std::ops::Range<usize>,
    s: RawSource,
    service: String,
    profiles: &BTreeMap<String, Spanned<toml::Table>>,
    params: &CrawlParams,
) -> Result<Source> {
    for (key, v) in [("path", &s.path), ("format", &s.format)] {
        if let Some(v) = v {
            return cx.err(v.span(), &format!("sources.{key}"), "a crawl source takes `serve` or `url`, not this key");
        }
    }
    if !s.columns.is_empty() {
        return cx.err(span, "sources.columns", "a crawl source has no columns");
    }
    let Some(pname) = s.profile else {
        return cx.err(span, "sources.profile", "missing: a crawl source names its site profile (`[profiles.NAME]`)");
    };
    let profile = resolve_profile(cx, &pname, profiles)?;
    let (serve, url) = match (&s.serve, &s.url) {
        (Some(d), None) => {
            let full = cx.path(d.span(), "sources.serve", d.get_ref())?;
            if !full.is_dir() {
                return cx.err(d.span(), "sources.serve", format!("`{}` is not a folder", d.get_ref()));
            }
            (Some(full), None)
        }
        (None, Some(u)) => match url::Url::parse(u.get_ref()) {
            Ok(p) if matches!(p.scheme(), "http" | "https") && p.host().is_some() => (None, Some(u.get_ref().clone())),
            _ => return cx.err(u.span(), "sources.url", format!("`{}` is not an http(s) URL", u.get_ref())),
        },
        (Some(_), Some(u)) => return cx.err(u.span(), "sources.url", "give `serve` or `url`, not both"),
        (None, None) => {
            return cx.err(
                span,
                "sources.url",
                "missing: a crawl source needs `url` (a site) or `serve` (a folder doc2ci serves)",
            )
        }
    };
    let backend = match &s.backend {
        Some(b) if !CRAWL_BACKENDS.contains(&b.get_ref().as_str()) => {
            return cx.err(
                b.span(),
                "sources.backend",
                format!("unknown backend `{}` (one of {})", b.get_ref(), CRAWL_BACKENDS.join(", ")),
            )
        }
        Some(b) => b.get_ref().clone(),
        None => params.backend.clone(),
    };
    let name = match &s.name {
        Some(n) => {
            if let Err(m) = check_name("source name", n.get_ref()) {
                return cx.err(n.span(), "sources.name", m);
            }
            n.get_ref().clone()
        }
        None => pname.get_ref().clone(),
    };
    if let Err(m) = check_name("source name", &name) {
        return cx.err(pname.span(), "sources.name", m);
    }
    Ok(Source {
        name,
        service,
        kind: SourceKind::Crawl(CrawlSource { profile_name: pname.get_ref().clone(), profile, serve, url, backend }),
    })
}

/// A key set on an import model that only generative backends use, with its position.
/// Keys of a `[[models]]` entry that only one kind of model reads, present in `m`, with where
/// they are (the entry itself for keys parsed without a span): (key, span, read by generative
/// backends rather than by import). Generative keys come first in the study's usual order.
fn sided_keys(m: &RawModel, entry: &std::ops::Range<usize>) -> Vec<(&'static str, std::ops::Range<usize>, bool)> {
    let at = |present: bool| present.then(|| entry.clone());
    let keys: [(&'static str, Option<std::ops::Range<usize>>, bool); 28] = [
        ("base_url", m.base_url.as_ref().map(|s| s.span()), true),
        ("base_urls", m.base_urls.as_ref().map(|s| s.span()), true),
        ("model", m.model.as_ref().map(|s| s.span()), true),
        ("max_tokens", m.max_tokens.as_ref().map(|s| s.span()), true),
        ("temperature", m.temperature.as_ref().map(|s| s.span()), true),
        ("samples", m.samples.as_ref().map(|s| s.span()), true),
        ("api_key_env", m.api_key_env.as_ref().map(|s| s.span()), true),
        ("concurrency", m.concurrency.as_ref().map(|s| s.span()), true),
        ("timeout_ms", m.timeout_ms.as_ref().map(|s| s.span()), true),
        ("retrieval", m.retrieval.as_ref().map(|s| s.span()), true),
        ("services", m.services.as_ref().map(|s| s.span()), true),
        ("params", at(m.params.is_some()), true),
        ("rpm", at(m.rpm.is_some()), true),
        ("tpm", at(m.tpm.is_some()), true),
        ("retries", at(m.retries.is_some()), true),
        ("seed", at(m.seed.is_some()), true),
        ("few_shot", at(m.few_shot.is_some()), true),
        ("max_pairs", m.max_pairs.as_ref().map(|s| s.span()), true),
        ("retrieval_chars", at(m.retrieval_chars.is_some()), true),
        ("num_ctx", at(m.num_ctx.is_some()), true),
        ("price_per_1k_input", at(m.price_per_1k_input.is_some()), true),
        ("price_per_1k_output", at(m.price_per_1k_output.is_some()), true),
        ("max_cost", m.max_cost.as_ref().map(|s| s.span()), true),
        ("path", m.path.as_ref().map(|s| s.span()), false),
        ("format", m.format.as_ref().map(|s| s.span()), false),
        ("source", m.source.as_ref().map(|s| s.span()), false),
        ("columns", at(!m.columns.is_empty()), false),
        ("skip_bad_rows", at(m.skip_bad_rows), false),
    ];
    keys.into_iter().filter_map(|(k, s, g)| s.map(|s| (k, s, g))).collect()
}

fn gen_settings(cx: &Ctx, span: std::ops::Range<usize>, m: &RawModel, services: &[Service]) -> Result<GenSettings> {
    let name = m.name.get_ref();
    let max_cost = match &m.max_cost {
        Some(c) if !(*c.get_ref() > 0.0) => {
            return cx.err(c.span(), "models.max_cost", format!("model `{name}`: max_cost must be above 0"))
        }
        Some(c) if m.price_per_1k_input.is_none() && m.price_per_1k_output.is_none() => {
            return cx.err(
                c.span(),
                "models.max_cost",
                format!("model `{name}`: max_cost needs price_per_1k_input and/or price_per_1k_output to count with"),
            )
        }
        c => c.as_ref().map(|c| *c.get_ref()),
    };
    let backend = m.backend.get_ref().as_str();
    let mut base_urls: Vec<String> = Vec::new();
    if let Some(u) = &m.base_url {
        base_urls.push(u.get_ref().clone());
    }
    if let Some(us) = &m.base_urls {
        if m.base_url.is_some() {
            return cx.err(
                us.span(),
                "models.base_urls",
                format!("model `{name}`: give `base_url` or `base_urls`, not both"),
            );
        }
        if us.get_ref().is_empty() {
            return cx.err(us.span(), "models.base_urls", format!("model `{name}`: the list is empty"));
        }
        base_urls.extend(us.get_ref().iter().cloned());
    }
    let url_span =
        m.base_url.as_ref().map(|s| s.span()).or(m.base_urls.as_ref().map(|s| s.span())).unwrap_or(span.clone());
    for u in &base_urls {
        if !(u.starts_with("http://") || u.starts_with("https://")) {
            return cx.err(
                url_span.clone(),
                "models.base_url",
                format!("model `{name}`: `{}` is not an http:// or https:// URL", doc2ci_llm::redact_url(u)),
            );
        }
    }
    let kind = crate::backends::kind(backend).expect("checked against the registry");
    if kind.needs_url && base_urls.is_empty() {
        return cx.err(
            span,
            "models.base_url",
            format!("model `{name}`: the {backend} backend needs `base_url` (or `base_urls` for a pool)"),
        );
    }
    if !kind.needs_url && !base_urls.is_empty() {
        return cx.err(
            url_span,
            "models.base_url",
            format!("model `{name}`: the {backend} model runs in-process; it has no `base_url`"),
        );
    }
    // Keys that only some backends read.
    let only = |key: &str| -> String {
        let takers: Vec<&str> =
            crate::backends::BACKENDS.iter().filter(|k| k.keys.contains(&key)).map(|k| k.name).collect();
        takers.join(", ")
    };
    if let Some(k) = m.api_key_env.as_ref().filter(|_| !kind.keys.contains(&"api_key_env")) {
        return cx.err(
            k.span(),
            "models.api_key_env",
            format!("model `{name}`: only the {} backend sends an API key", only("api_key_env")),
        );
    }
    if m.num_ctx.is_some() && !kind.keys.contains(&"num_ctx") {
        return cx.err(
            span,
            "models.num_ctx",
            format!("model `{name}`: `num_ctx` is a setting of {}", only("num_ctx")),
        );
    }
    if let Some(k) = &m.api_key_env {
        let v = k.get_ref();
        if v.is_empty() || !v.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            // Never echo the value: people paste the key itself here.
            return cx.err(
                k.span(),
                "models.api_key_env",
                format!(
                    "model `{name}`: the value ({} characters, not shown) is not an environment variable name \
                     (letters, digits and `_`): name the variable that holds the key; the key itself never goes in the config",
                    v.chars().count()
                ),
            );
        }
    }
    // A backend that runs a file (`embedded`): `model` names any GGUF, resolved against this file's
    // folder; as written it is the model id, and the file's content hash stands in the cache key.
    let model_file = match (&m.model, kind.model_file) {
        (Some(s), true) => Some(cx.path(s.span(), "models.model", s.get_ref())?),
        _ => None,
    };
    let model_id = match (kind.default_model, &m.model) {
        (Some(_), Some(s)) if model_file.is_some() => s.get_ref().clone(),
        (Some(fixed), Some(s)) => {
            return cx.err(
                s.span(),
                "models.model",
                format!("model `{name}`: the {backend} backend always runs {fixed}"),
            )
        }
        (Some(fixed), None) => fixed.to_string(),
        (None, Some(s)) => s.get_ref().clone(),
        (None, None) => name.clone(),
    };
    let temperature = m.temperature.as_ref().map_or(0.0, |t| *t.get_ref());
    if let Some(t) = &m.temperature {
        if !(0.0..=2.0).contains(t.get_ref()) {
            return cx.err(t.span(), "models.temperature", format!("model `{name}`: must be between 0 and 2"));
        }
    }
    let samples = m.samples.as_ref().map_or(1, |s| *s.get_ref());
    if let Some(s) = &m.samples {
        if samples == 0 {
            return cx.err(s.span(), "models.samples", format!("model `{name}`: at least 1"));
        }
        if samples > 1 && temperature == 0.0 {
            return cx.err(s.span(), "models.samples", format!("model `{name}`: {samples} samples at temperature 0 would be identical; set `temperature` > 0 for pass@k"));
        }
    }
    let max_tokens = m.max_tokens.as_ref().map_or(1024, |t| *t.get_ref());
    if let Some(t) = &m.max_tokens {
        if max_tokens == 0 {
            return cx.err(t.span(), "models.max_tokens", format!("model `{name}`: at least 1"));
        }
    }
    // One in-process model has nothing to gain from parallel requests; a server does.
    let concurrency = m.concurrency.as_ref().map_or(kind.concurrency, |c| *c.get_ref());
    if let Some(c) = &m.concurrency {
        if concurrency == 0 {
            return cx.err(c.span(), "models.concurrency", format!("model `{name}`: at least 1"));
        }
    }
    let timeout_ms = m.timeout_ms.as_ref().map_or(120_000, |t| *t.get_ref());
    if let Some(t) = &m.timeout_ms {
        if timeout_ms == 0 {
            return cx.err(t.span(), "models.timeout_ms", format!("model `{name}`: at least 1"));
        }
    }
    let retrieval = match &m.retrieval {
        None => 0,
        Some(v) => match v.get_ref() {
            toml::Value::Boolean(true) => 3,
            toml::Value::Boolean(false) => 0,
            toml::Value::Integer(n) if *n >= 0 => *n as usize,
            _ => {
                return cx.err(
                    v.span(),
                    "models.retrieval",
                    format!("model `{name}`: true, false, or how many sections to quote"),
                )
            }
        },
    };
    let params: serde_json::Map<String, serde_json::Value> = match &m.params {
        Some(t) => match serde_json::to_value(t)? {
            serde_json::Value::Object(o) => o,
            _ => unreachable!("a TOML table is a JSON object"),
        },
        None => serde_json::Map::new(),
    };
    if !kind.needs_url && !params.is_empty() {
        return cx.err(
            span,
            "models.params",
            format!("model `{name}`: the {backend} backend takes no extra request parameters"),
        );
    }
    let max_pairs = match &m.max_pairs {
        Some(n) if *n.get_ref() == 0 => {
            return cx.err(n.span(), "models.max_pairs", format!("model `{name}`: max_pairs must be at least 1"))
        }
        n => n.as_ref().map(|n| *n.get_ref()),
    };
    let svcs = match &m.services {
        Some(list) => {
            for s in list.get_ref() {
                if !services.iter().any(|x| &x.name == s) {
                    return cx.err(list.span(), "models.services", format!("model `{name}`: unknown service `{s}`"));
                }
            }
            list.get_ref().clone()
        }
        None => match &m.service {
            Some(s) => vec![s.get_ref().clone()],
            None => services.iter().map(|s| s.name.clone()).collect(),
        },
    };
    Ok(GenSettings {
        key: GenKey {
            backend: backend.to_string(),
            model_id,
            max_tokens,
            temperature,
            samples,
            seed: m.seed.unwrap_or(0),
            few_shot: m.few_shot.unwrap_or(0),
            retrieval,
            retrieval_chars: m.retrieval_chars.unwrap_or(1500),
            num_ctx: m.num_ctx,
            params,
            max_pairs,
        },
        base_urls,
        api_key_env: m.api_key_env.as_ref().map(|s| s.get_ref().clone()),
        concurrency,
        rpm: m.rpm,
        tpm: m.tpm,
        retries: m.retries.unwrap_or(5),
        timeout_ms,
        price_per_1k_input: m.price_per_1k_input,
        price_per_1k_output: m.price_per_1k_output,
        max_cost,
        services: svcs,
        model_file,
    })
}

/// `GitHubActions_Docs.csv.gz` → `GitHubActions_Docs`: a readable default source name.
fn file_stem(p: &Path) -> String {
    let name = p.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let stem = name.split('.').next().unwrap_or("source").to_string();
    stem.chars().map(|c| if c.is_ascii_alphanumeric() || c == '_' || c == '-' { c } else { '_' }).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> Result<Config> {
        let dir = std::env::temp_dir();
        Config::parse(&dir.join("pipeline.toml"), s)
    }

    #[test]
    fn unknown_key_names_line_and_key() {
        let e = parse("[study]\nwarehouse = \"w\"\nwarehose = 1\n").unwrap_err().to_string();
        assert!(e.contains("line 3") && e.contains("warehose"), "{e}");
    }

    #[test]
    fn unknown_service_names_its_line_while_validate_or_score_runs() {
        let cfg = "[study]\nwarehouse = \"w\"\n[[services]]\nname = \"github-actions\"\ndisplay = \"G\"\n[[services]]\nname = \"gitlab\"\ndisplay = \"GitLab\"\n";
        let e = parse(cfg).unwrap_err().to_string();
        assert!(e.contains(":7:") && e.contains("unknown service `gitlab`") && e.contains("gitlab-ci"), "{e}");
        let off = format!(
            "{cfg}[stages.validate]\nenabled = false\n[stages.score]\nenabled = false\n[stages.lint]\nenabled = false\n"
        );
        assert!(parse(&off).is_ok());
    }

    #[test]
    fn builtin_profiles_need_no_table_and_a_base_overrides_single_keys() {
        let head = "[study]\nwarehouse = \"w\"\n[[services]]\nname = \"travis-ci\"\ndisplay = \"Travis CI\"\n";
        let src = |profile: &str| {
            format!("[[sources]]\nkind = \"crawl\"\nservice = \"travis-ci\"\nprofile = \"{profile}\"\nurl = \"https://docs.example.com\"\n")
        };
        let c = parse(&format!("{head}{}", src("travis-docs"))).unwrap();
        let p = &c.sources[0].crawl().unwrap().profile;
        assert_eq!(p.allowed_prefixes, ["/user/"]);
        let mirror = "[profiles.mirror]\nbase = \"travis-docs\"\nallowed_prefixes = [\"/snapshot/user/\"]\nstart_urls = [\"/snapshot/user/tutorial/\"]\n";
        let c = parse(&format!("{head}{}{mirror}", src("mirror"))).unwrap();
        let p = &c.sources[0].crawl().unwrap().profile;
        assert_eq!(
            (p.allowed_prefixes.as_slice(), p.start_urls.as_slice()),
            (&["/snapshot/user/".to_string()][..], &["/snapshot/user/tutorial/".to_string()][..])
        );
        assert_eq!(p.yaml_blocks, doc2ci_crawl::builtin("travis-docs").unwrap().yaml_blocks);
        let e =
            parse(&format!("{head}{}[profiles.mirror]\nbase = \"travis\"\n", src("mirror"))).unwrap_err().to_string();
        assert!(
            (e.contains(":11:") || e.contains(":12:"))
                && e.contains("no built-in profile `travis`")
                && e.contains("travis-docs"),
            "{e}"
        );
        let e = parse(&format!(
            "{head}{}[profiles.mirror]\nbase = \"travis-docs\"\nyaml_block = [\"pre\"]\n",
            src("mirror")
        ))
        .unwrap_err()
        .to_string();
        assert!((e.contains(":11:") || e.contains(":12:")) && e.contains("yaml_block"), "{e}");
        let e = parse(&format!("{head}{}", src("nope"))).unwrap_err().to_string();
        assert!(e.contains("no profile `nope`") && e.contains("github-docs"), "{e}");
    }

    #[test]
    fn wrong_type_names_line() {
        let e = parse("[study]\nwarehouse = \"w\"\n[[services]]\nname = 3\ndisplay = \"x\"\n").unwrap_err().to_string();
        assert!(e.contains("line 4"), "{e}");
    }

    const HEAD: &str =
        "[study]\nwarehouse = \"w\"\n[[services]]\nname = \"github-actions\"\ndisplay = \"GitHub Actions\"\n";

    #[test]
    fn generative_models_parse_with_defaults_and_keys() {
        let c = parse(&format!(
            "{HEAD}[[models]]\nname = \"small\"\nbackend = \"embedded\"\nmax_tokens = 256\n\
             [[models]]\nname = \"fleet\"\nbackend = \"openai\"\nbase_urls = [\"http://127.0.0.1:1/v1\", \"http://127.0.0.1:2/v1\"]\nmodel = \"qwen\"\napi_key_env = \"KEY_VAR\"\n\
             temperature = 0.7\nsamples = 5\nfew_shot = 3\nretrieval = true\nconcurrency = 8\nrpm = 600\nprice_per_1k_input = 0.5\n[models.params]\ntop_p = 0.9\n\
             [stages.repair]\nenabled = true\nmodel = \"small\"\n"
        ))
        .unwrap();
        let e = c.models[0].gen().unwrap();
        assert_eq!((e.key.temperature, e.key.samples, e.key.max_tokens, e.concurrency), (0.0, 1, 256, 8));
        assert_eq!(e.services, ["github-actions"]);
        let f = c.models[1].gen().unwrap();
        assert_eq!(f.base_urls.len(), 2);
        assert_eq!((f.key.model_id.as_str(), f.key.samples, f.key.few_shot, f.key.retrieval), ("qwen", 5, 3, 3));
        assert_eq!(f.key.params["top_p"], 0.9);
        assert_eq!(f.api_key_env.as_deref(), Some("KEY_VAR"));
        assert!(c.stages.repair.enabled && c.stages.repair.rounds == 2);
    }

    #[test]
    fn base_model_may_be_declared_after_its_fine_tune() {
        let c = parse(&format!("{HEAD}[[models]]\nname = \"ft\"\nbackend = \"embedded\"\nbase_model = \"base\"\n[[models]]\nname = \"base\"\nbackend = \"embedded\"\n")).unwrap();
        assert_eq!(c.models[0].base_model.as_deref(), Some("base"));
        assert_eq!(c.models[1].base_model, None);
    }

    #[test]
    fn generative_model_errors_name_line_and_key() {
        let cases: &[(&str, &str, &str)] = &[
            ("[[models]]\nname = \"x\"\nbackend = \"openai\"\n", ":6:", "base_url"),
            ("[[models]]\nname = \"x\"\nbackend = \"openai\"\nbase_url = \"localhost:8080\"\n", ":9:", "not an http"),
            ("[[models]]\nname = \"x\"\nbackend = \"ollama\"\nbase_url = \"http://h\"\napi_key_env = \"K\"\n", ":10:", "api_key_env"),
            ("[[models]]\nname = \"x\"\nbackend = \"openai\"\nbase_url = \"http://h\"\napi_key_env = \"sk-123 secret\"\n", ":10:", "environment variable"),
            ("[[models]]\nname = \"x\"\nbackend = \"embedded\"\nsamples = 3\n", ":9:", "temperature"),
            ("[[models]]\nname = \"x\"\nbackend = \"embedded\"\nmax_tokns = 3\n", "line 9", "max_tokns"),
            ("[[models]]\nname = \"x\"\nbackend = \"embedded\"\nmodel = \"none.gguf\"\n", ":9:", "`none.gguf` does not exist"),
            ("[[models]]\nname = \"x\"\nbackend = \"vllm\"\n", ":8:", "unknown backend"),
            ("[[models]]\nname = \"x\"\nbackend = \"embedded\"\ntemperature = 5.0\n", ":9:", "between 0 and 2"),
            ("[[models]]\nname = \"x\"\nbackend = \"embedded\"\n[stages.repair]\nenabled = true\nmodel = \"nope\"\n", ":9:", "no such [[models]]"),
            ("[[models]]\nname = \"x\"\nbackend = \"embedded\"\nbase_model = \"llama\"\n", ":9:", "base model `llama` is not declared"),
            ("[[models]]\nname = \"x\"\nbackend = \"embedded\"\nbase_model = \"x\"\n", ":9:", "names itself"),
            ("[[models]]\nname = \"x\"\nbackend = \"embedded\"\nformat = \"csv\"\n", ":9:", "`format` applies to the import backend, not embedded"),
            ("[[models]]\nname = \"x\"\nbackend = \"openai\"\nbase_url = \"http://h\"\ncolumns = { a = \"b\" }\n", ":6:", "`columns` applies to the import backend"),
            ("[[models]]\nname = \"x\"\nbackend = \"openai\"\nbase_url = \"http://h\"\nmax_cost = 5.0\n", ":10:", "max_cost needs price_per_1k_input"),
            ("[[models]]\nname = \"x\"\nbackend = \"openai\"\nbase_url = \"http://h\"\nprice_per_1k_input = 1.0\nmax_cost = -1.0\n", ":11:", "above 0"),
            ("[[models]]\nname = \"x\"\nbackend = \"import\"\npath = \"o.csv\"\nmax_cost = 1.0\n", ":10:", "`max_cost`"),
            ("[[models]]\nname = \"x\"\nbackend = \"embedded\"\n[stages.repair]\nenabled = true\nfeedback = [\"lint\"]\n", ":9:", "must include \"schema\""),
        ];
        for (body, line, what) in cases {
            let e = parse(&format!("{HEAD}{body}")).unwrap_err().to_string();
            assert!(e.contains(line) && e.contains(what), "{body}: {e}");
        }
    }

    /// A key pasted where a variable name belongs, quoted or not, is never echoed.
    #[test]
    fn pasted_keys_are_not_echoed() {
        for body in [
            "[[models]]\nname = \"x\"\nbackend = \"openai\"\nbase_url = \"http://h\"\napi_key_env = \"sk-live-ABCDEF123\"\n",
            "[[models]]\nname = \"x\"\nbackend = \"openai\"\nbase_url = \"http://h\"\napi_key_env = sk-live-ABCDEF123\n",
            "[[models]]\nname = \"x\"\nbackend = \"openai\"\nbase_url = \"ftp://u:sk-live-ABCDEF123@h/v1?key=sk-live-ABCDEF123\"\n",
        ] {
            let e = parse(&format!("{HEAD}{body}")).unwrap_err().to_string();
            assert!(!e.contains("ABCDEF123"), "{e}");
            assert!(e.contains("line 10") || e.contains(":10:") || e.contains(":9:"), "names the place: {e}");
        }
    }

    #[test]
    fn missing_file_and_duplicate_model_name_line() {
        let e = parse("[study]\nwarehouse = \"w\"\n[[services]]\nname = \"github-actions\"\ndisplay = \"G\"\n[[sources]]\nkind = \"import\"\nservice = \"github-actions\"\npath = \"nope.csv\"\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains(":9:") && e.contains("nope.csv") && e.contains("sources.path"), "{e}");
    }
}
