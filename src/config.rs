//! `pipeline.toml`: the declared study.
//!
//! Parsing is strict (unknown keys, wrong types) so a typo never silently runs the wrong study;
//! every error names the file, the line and the key.

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
}

#[derive(Debug, Clone, Serialize)]
pub struct Service {
    pub name: String,
    pub display: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct Source {
    pub name: String,
    pub kind: String,
    pub format: String,
    pub path: PathBuf,
    pub service: String,
    pub columns: BTreeMap<String, String>,
    pub skip_bad_rows: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct Model {
    pub name: String,
    pub backend: String,
    pub family: Option<String>,
    pub size_b: Option<f64>,
    pub code: Option<bool>,
    pub proprietary: Option<bool>,
    /// `import` backend: the file of outputs, its format, which service and source it answers.
    pub path: Option<PathBuf>,
    pub format: String,
    pub service: Option<String>,
    pub source: Option<String>,
    pub columns: BTreeMap<String, String>,
    pub skip_bad_rows: bool,
}

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
        Self { enabled: true, bootstrap_seed: default_seed(), bootstrap_resamples: default_resamples(), ci_metrics: default_ci_metrics() }
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
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawStudy {
    warehouse: Spanned<String>,
    #[serde(default)]
    threads: Option<usize>,
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
}

const IMPORT_FORMATS: &[&str] = &["llm4ci", "csv", "jsonl", "parquet"];
const BACKENDS: &[&str] = &["import"];

/// Partition values end up in folder names (`model=…`), so they must be path-safe.
fn check_name(what: &str, v: &str) -> std::result::Result<(), String> {
    if v.is_empty() || !v.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')) || v.starts_with('.') {
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
        let raw: RawConfig = toml::from_str(text).map_err(|e| anyhow::anyhow!("{}: {}", file.display(), e))?;
        let cx = Ctx { file, text };
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
            if s.kind.get_ref() != "import" {
                return cx.err(s.kind.span(), "sources.kind", format!("unsupported kind `{}` (supported: import)", s.kind.get_ref()));
            }
            let Some(path) = s.path else { return cx.err(span, "sources.path", "missing: an import source needs a file") };
            let full = cx.path(path.span(), "sources.path", path.get_ref())?;
            let format = match &s.format {
                Some(f) if !IMPORT_FORMATS.contains(&f.get_ref().as_str()) => {
                    return cx.err(f.span(), "sources.format", format!("unknown format `{}` (one of {})", f.get_ref(), IMPORT_FORMATS.join(", ")))
                }
                Some(f) => f.get_ref().clone(),
                None => "llm4ci".into(),
            };
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
            sources.push(Source { name, kind: "import".into(), format, path: full, service, columns: s.columns, skip_bad_rows: s.skip_bad_rows });
        }

        let mut models: Vec<Model> = Vec::new();
        for m in raw.models {
            let span = m.span();
            let m = m.into_inner();
            if let Err(msg) = check_name("model name", m.name.get_ref()) {
                return cx.err(m.name.span(), "models.name", msg);
            }
            if models.iter().any(|x| x.name == *m.name.get_ref()) {
                return cx.err(m.name.span(), "models.name", format!("duplicate model name `{}`", m.name.get_ref()));
            }
            if !BACKENDS.contains(&m.backend.get_ref().as_str()) {
                return cx.err(m.backend.span(), "models.backend", format!("unknown backend `{}` (one of {})", m.backend.get_ref(), BACKENDS.join(", ")));
            }
            let service = match &m.service {
                Some(s) => Some(known_service(&cx, s, "models.service")?),
                None if services.len() == 1 => Some(services[0].name.clone()),
                None => None,
            };
            let mut model = Model {
                name: m.name.get_ref().clone(),
                backend: m.backend.get_ref().clone(),
                family: m.family,
                size_b: m.size_b,
                code: m.code,
                proprietary: m.proprietary,
                path: None,
                format: "llm4ci".into(),
                service,
                source: None,
                columns: m.columns,
                skip_bad_rows: m.skip_bad_rows,
            };
            if model.backend == "import" {
                let Some(path) = &m.path else { return cx.err(span, "models.path", format!("model `{}`: the import backend needs `path`", model.name)) };
                model.path = Some(cx.path(path.span(), "models.path", path.get_ref())?);
                if let Some(f) = &m.format {
                    if !IMPORT_FORMATS.contains(&f.get_ref().as_str()) {
                        return cx.err(f.span(), "models.format", format!("unknown format `{}` (one of {})", f.get_ref(), IMPORT_FORMATS.join(", ")));
                    }
                    model.format = f.get_ref().clone();
                }
                let Some(service) = model.service.clone() else {
                    return cx.err(span, "models.service", format!("model `{}`: several services are declared, say which one its outputs answer", model.name));
                };
                let candidates: Vec<&Source> = sources.iter().filter(|s| s.service == service).collect();
                model.source = Some(match &m.source {
                    Some(s) if candidates.iter().any(|c| c.name == *s.get_ref()) => s.get_ref().clone(),
                    Some(s) => return cx.err(s.span(), "models.source", format!("no source `{}` for service `{service}`", s.get_ref())),
                    None if candidates.len() == 1 => candidates[0].name.clone(),
                    None if candidates.is_empty() => return cx.err(span, "models.source", format!("model `{}`: no source of pairs for service `{service}`", model.name)),
                    None => return cx.err(span, "models.source", format!("model `{}`: several sources serve `{service}`, say which one its IDs refer to", model.name)),
                });
            }
            models.push(model);
        }

        let threads = raw.study.threads.unwrap_or_else(|| std::thread::available_parallelism().map_or(2, |n| n.get())).max(1);
        if raw.stages.import.batch_size == 0 {
            bail!("{}: `stages.import.batch_size` must be at least 1", file.display());
        }
        if raw.stages.stats.bootstrap_resamples == 0 {
            bail!("{}: `stages.stats.bootstrap_resamples` must be at least 1", file.display());
        }
        let known: Vec<&str> = doc2ci_stats::study::SIMILARITY.iter().chain(doc2ci_stats::study::VALIDITY).copied().collect();
        if let Some(bad) = raw.stages.stats.ci_metrics.iter().find(|m| !known.contains(&m.as_str())) {
            bail!("{}: `stages.stats.ci_metrics`: unknown metric `{bad}` (known: {})", file.display(), known.join(", "));
        }
        Ok(Config {
            file: file.to_path_buf(),
            warehouse: base.join(raw.study.warehouse.get_ref()),
            threads,
            services,
            sources,
            models,
            stages: raw.stages,
        })
    }

    pub fn service(&self, name: &str) -> Option<&Service> {
        self.services.iter().find(|s| s.name == name)
    }
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
    fn wrong_type_names_line() {
        let e = parse("[study]\nwarehouse = \"w\"\n[[services]]\nname = 3\ndisplay = \"x\"\n").unwrap_err().to_string();
        assert!(e.contains("line 4"), "{e}");
    }

    #[test]
    fn missing_file_and_duplicate_model_name_line() {
        let e = parse("[study]\nwarehouse = \"w\"\n[[services]]\nname = \"gha\"\ndisplay = \"G\"\n[[sources]]\nkind = \"import\"\nservice = \"gha\"\npath = \"nope.csv\"\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains(":9:") && e.contains("nope.csv") && e.contains("sources.path"), "{e}");
    }
}
