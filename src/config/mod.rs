//! `pipeline.toml`: the declared study, parsed into types.
//!
//! Parsing is strict (unknown keys, wrong types) so a typo never silently runs the wrong study;
//! every error names the file, the line and the key. Each part of the file has its module:
//! [`sources`] and [`models`] (entries typed by their kind) and [`stages`] (each stage's section,
//! typed by the stage that reads it); where a key is written, for messages, is `crate::keys`,
//! which the backends' and the stages' own key types share.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use toml::Spanned;

mod models;
mod sources;
mod stages;
#[cfg(test)]
mod tests;

pub use crate::backends::{GenKey, GenSettings};
pub use stages::*;

use crate::keys::{Ctx, Entry};

/// The whole study, with paths resolved against the config file's folder.
#[derive(Debug, Clone)]
pub struct Config {
    pub file: PathBuf,
    pub warehouse: PathBuf,
    pub threads: usize,
    pub services: Vec<Service>,
    pub sources: Vec<Source>,
    pub models: Vec<Model>,
    /// Read with [`Config::section`], typed by each stage.
    pub stages: Stages,
    /// The request cache shared across studies (`None`: off); not part of any cache key.
    pub request_cache: Option<crate::backends::CacheSettings>,
    /// `[study] remote`: the object-storage URL the warehouse is mirrored to after each run.
    pub remote: Option<String>,
    /// `[study] max_error_rate`: the share of a model's requests that may error before a run
    /// exits non-zero (its answers are kept either way; the errored ones are asked again).
    pub max_error_rate: f64,
}

/// `[study] max_error_rate` when unset: a run missing more than 2% of a model's answers fails.
pub const DEFAULT_MAX_ERROR_RATE: f64 = 0.02;

#[derive(Debug, Clone, Serialize)]
pub struct Service {
    pub name: String,
    pub display: String,
    /// Where the entry's name is written, for the stages' messages about it.
    #[serde(skip)]
    pub line: usize,
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

/// Serialised into the parameters of the jobs that read it (as every runtime config type here):
/// a field skipped there says why.
#[derive(Debug, Clone, Serialize)]
pub struct ImportSource {
    pub format: String,
    /// The file's content stands in the key, not where it lies (moving it re-runs nothing).
    #[serde(skip)]
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
    /// A folder doc2ci serves on loopback itself (the bundled documentation site). Its files'
    /// content stands in the crawl's key, not where the folder lies.
    #[serde(skip)]
    pub serve: Option<PathBuf>,
    /// Or the origin of a documentation site (`https://docs.example.com`), never with credentials.
    pub url: Option<String>,
    /// The credentials the URL was written with: sent to the site, never stored or shown.
    #[serde(skip)]
    pub auth: Option<Credentials>,
    /// The source's own backend; unset, `[stages.crawl] backend` decides.
    pub backend: Option<String>,
}

/// The description fields feed only the `models` table (whose job holds them as rows): changing
/// a model's family re-asks nothing.
/// A site's user and password: Debug never shows them.
#[derive(Clone, PartialEq)]
pub struct Credentials {
    pub user: String,
    pub password: Option<String>,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Credentials(not shown)")
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct Model {
    pub name: String,
    #[serde(skip)]
    pub family: Option<String>,
    #[serde(skip)]
    pub size_b: Option<f64>,
    #[serde(skip)]
    pub code: Option<bool>,
    #[serde(skip)]
    pub proprietary: Option<bool>,
    /// A declared model this one was fine-tuned from (RQ6 compares them pair by pair).
    #[serde(skip)]
    pub base_model: Option<String>,
    #[serde(skip)]
    pub knowledge_cutoff: Option<String>,
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
    /// The file's content stands in the key, not where it lies.
    #[serde(skip)]
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

/// The document without its `[[sources]]` and `[[models]]` (typed by kind, see [`Entry`]).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    study: RawStudy,
    #[serde(default)]
    services: Vec<Spanned<RawService>>,
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
    /// Share of a model's requests that may error (0 to 1; default [`DEFAULT_MAX_ERROR_RATE`]).
    #[serde(default)]
    max_error_rate: Option<Spanned<f64>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawService {
    name: Spanned<String>,
    /// The service's name in prompts and tables; the registry's when left out.
    #[serde(default)]
    display: Option<String>,
}

const IMPORT_FORMATS: &[&str] = &["llm4ci", "csv", "jsonl", "parquet"];
/// How a crawl source fetches (`[[sources]] backend`, `[stages.crawl] backend`): `auto` is
/// webdriver when a browser is available, else http.
pub const CRAWL_BACKENDS: &[&str] = &["webdriver", "http", "auto"];
/// A model's outputs as an OpenAI Batch output file (`vllm run-batch`, a provider's batch),
/// answering `doc2ci export requests`: `custom_id` names the pair, sample and round.
pub const BATCH_RESULTS: &str = "openai-batch";

/// Keys of a file of rows to import, alike for a source's pairs and a model's outputs.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileKeys {
    #[serde(default)]
    path: Option<Spanned<String>>,
    #[serde(default)]
    format: Option<Spanned<String>>,
    #[serde(default)]
    columns: BTreeMap<String, String>,
    #[serde(default)]
    skip_bad_rows: bool,
}

impl FileKeys {
    /// The file, resolved, and its format: one of [`IMPORT_FORMATS`] or `other` (what this kind
    /// of entry reads beyond them), `llm4ci` when not given. `table` is `sources` or `models`.
    fn file_and_format(
        &self,
        cx: &Ctx,
        span: std::ops::Range<usize>,
        table: &str,
        missing: &str,
        other: &str,
    ) -> Result<(PathBuf, String)> {
        let Some(path) = &self.path else {
            return cx.err(span, &format!("{table}.path"), missing);
        };
        let full = cx.path(path.span(), &format!("{table}.path"), path.get_ref())?;
        let format = match &self.format {
            Some(f) if !IMPORT_FORMATS.contains(&f.get_ref().as_str()) && f.get_ref() != other => {
                return cx.err(
                    f.span(),
                    &format!("{table}.format"),
                    format!("unknown format `{}` (one of {}, {other})", f.get_ref(), IMPORT_FORMATS.join(", ")),
                )
            }
            Some(f) => f.get_ref().clone(),
            None => "llm4ci".into(),
        };
        Ok((full, format))
    }
}

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

/// A declared service, by name, when `sp` names one.
fn known_service(cx: &Ctx, services: &[Service], sp: &Spanned<String>, key: &str) -> Result<String> {
    if services.iter().any(|x| x.name == *sp.get_ref()) {
        return Ok(sp.get_ref().clone());
    }
    let names: Vec<_> = services.iter().map(|s| s.name.as_str()).collect();
    cx.err(sp.span(), key, format!("unknown service `{}` (declared: {})", sp.get_ref(), names.join(", ")))
}

/// Every key of `[study]`, of a `[[sources]]` entry and of a `[[models]]` entry, read from the
/// types that parse them (the key walk of `jobs::tests` changes each one).
pub fn entry_keys() -> [(&'static str, Vec<&'static str>); 3] {
    [("study", crate::keys::fields_of::<RawStudy>().to_vec()), ("sources", sources::keys()), ("models", models::keys())]
}

impl Config {
    pub fn load(file: &Path) -> Result<Config> {
        let text = std::fs::read_to_string(file).with_context(|| format!("cannot read config {}", file.display()))?;
        Self::parse(file, &text)
    }

    pub fn parse(file: &Path, text: &str) -> Result<Config> {
        let cx = Ctx { file, text };
        // Parsed once with spans; the entries are typed by their kind, the rest as one table.
        let mut doc = toml::de::DeTable::parse(text).map_err(|e| cx.toml_error(&e))?;
        let source_entries = Entry::take_all(&cx, doc.get_mut(), "sources")?;
        let model_entries = Entry::take_all(&cx, doc.get_mut(), "models")?;
        let stages = Stages::take(&cx, doc.get_mut())?;
        let raw: RawConfig =
            RawConfig::deserialize(toml::de::Deserializer::from(doc)).map_err(|e| cx.toml_error(&e))?;
        let base = file.parent().unwrap_or(Path::new("."));

        let mut services = Vec::new();
        for s in raw.services {
            let span = s.span();
            let s = s.into_inner();
            if let Err(m) = check_name("service name", s.name.get_ref()) {
                return cx.err(s.name.span(), "services.name", m);
            }
            if services.iter().any(|x: &Service| x.name == *s.name.get_ref()) {
                return cx.err(span, "services.name", format!("duplicate service `{}`", s.name.get_ref()));
            }
            let line = cx.line(s.name.span().start);
            let display = match (s.display, doc2ci_sem::service(s.name.get_ref())) {
                (Some(d), _) => d,
                (None, Some(known)) => known.display.to_string(),
                (None, None) => {
                    return cx.err(
                        span,
                        "services.display",
                        format!("`{}` is not one of doc2ci's services: give its display name", s.name.get_ref()),
                    )
                }
            };
            services.push(Service { name: s.name.into_inner(), display, line });
        }
        let sources = sources::sources(&cx, source_entries, &services, &raw.profiles)?;
        let models = models::models(&cx, model_entries, &services, &sources)?;

        if let Some(r) = &raw.study.remote {
            if let Err(e) = crate::remote::check_url(r.get_ref()) {
                return cx.err(r.span(), "study.remote", format!("{e:#}"));
            }
        }
        let max_error_rate = match &raw.study.max_error_rate {
            Some(r) if !(0.0..=1.0).contains(r.get_ref()) => {
                return cx.err(r.span(), "study.max_error_rate", "must be a share between 0 and 1 (0.02 = 2%)");
            }
            Some(r) => *r.get_ref(),
            None => DEFAULT_MAX_ERROR_RATE,
        };
        let threads =
            raw.study.threads.unwrap_or_else(|| std::thread::available_parallelism().map_or(2, |n| n.get())).max(1);
        Ok(Config {
            file: file.to_path_buf(),
            warehouse: base.join(raw.study.warehouse.get_ref()),
            request_cache: crate::backends::CacheSettings::resolve(
                raw.study.request_cache.as_deref(),
                raw.study.request_cache_ttl_days,
                base,
            ),
            remote: raw.study.remote.as_ref().map(|r| r.get_ref().clone()),
            max_error_rate,
            threads,
            services,
            sources,
            models,
            stages,
        })
    }

    pub fn service(&self, name: &str) -> Option<&Service> {
        self.services.iter().find(|s| s.name == name)
    }
}
