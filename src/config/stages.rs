//! `[stages.*]`: every stage's parameters (part of its cache key) and the rules that bind them.

use anyhow::{bail, Result};
use serde::{Deserialize, Serialize};

use super::Model;
use crate::keys::Ctx;

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
#[derive(Default)]
pub struct GenerateParams {
    /// Requests per checkpointed batch: a killed run loses at most one batch of answers.
    /// Default: enough to keep every endpoint busy (16, or 2 × concurrency × endpoints).
    #[serde(default)]
    pub batch_size: Option<usize>,
    /// Budget of the whole run over every priced model (a model's own `max_cost` binds too).
    #[serde(default)]
    pub max_cost: Option<f64>,
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

impl StageParams {
    /// Rules across keys (and across `[[models]]` for repair) that the types cannot say.
    pub(super) fn check(&self, cx: &Ctx, models: &[Model]) -> Result<()> {
        let c = &self.crawl;
        if !CRAWL_BACKENDS.contains(&c.backend.as_str()) {
            bail!(
                "{}: `stages.crawl.backend`: unknown backend `{}` (one of {})",
                cx.file.display(),
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
            bail!("{}: `stages.crawl`: max_pages, concurrency, timeout_secs, max_page_bytes and remote_rate_limit must be positive, rate_limit and max_retry_after_secs not negative", cx.file.display());
        }
        if self.import.batch_size == 0 {
            bail!("{}: `stages.import.batch_size` must be at least 1", cx.file.display());
        }
        if self.generate.batch_size == Some(0) {
            bail!("{}: `stages.generate.batch_size` must be at least 1", cx.file.display());
        }
        if self.generate.max_cost.is_some_and(|c| !(c > 0.0)) {
            bail!("{}: `stages.generate.max_cost` must be above 0", cx.file.display());
        }
        let rp = &self.repair;
        if rp.enabled {
            let line = cx.text.find("[stages.repair]").map_or(0, |o| cx.line(o));
            let at = |msg: String| -> Result<()> { bail!("{}:{line}: `stages.repair`: {msg}", cx.file.display()) };
            if rp.rounds == 0 {
                at("`rounds` must be at least 1".into())?;
            }
            if !self.validate.enabled {
                at("repair needs the validator's errors: enable [stages.validate]".into())?;
            }
            if let Some(name) = &rp.model {
                match models.iter().find(|m| &m.name == name) {
                    None => at(format!("`model = \"{name}\"`: no such [[models]] entry"))?,
                    Some(m) if m.gen().is_none() => at(format!("`model = \"{name}\"` is an imported model; the repairing model must generate (openai, ollama, embedded)"))?,
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
            if rp.lint_feedback() && !self.lint.enabled {
                at("`feedback = [\"schema\", \"lint\"]` needs the lint stage: enable [stages.lint]".into())?;
            }
        }
        if self.stats.bootstrap_resamples == 0 {
            bail!("{}: `stages.stats.bootstrap_resamples` must be at least 1", cx.file.display());
        }
        let known = doc2ci_stats::study::tested_metrics(doc2ci_score::metric_infos());
        if let Some(bad) = self.stats.ci_metrics.iter().find(|m| !known.contains(&m.as_str())) {
            bail!(
                "{}: `stages.stats.ci_metrics`: unknown metric `{bad}` (known: {})",
                cx.file.display(),
                known.join(", ")
            );
        }
        Ok(())
    }
}
