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
    /// `import` (a file of pairs) or `crawl` (a documentation site).
    pub kind: String,
    pub format: String,
    pub path: PathBuf,
    pub service: String,
    pub columns: BTreeMap<String, String>,
    pub skip_bad_rows: bool,
    pub crawl: Option<CrawlSource>,
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
    pub crawl: CrawlParams,
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
            user_agent: "doc2ci".into(),
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
    #[serde(default)]
    profiles: BTreeMap<String, Spanned<doc2ci_crawl::Profile>>,
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
            if s.kind.get_ref() == "crawl" {
                let src = crawl_source(&cx, span.clone(), s, service, &raw.profiles, &raw.stages.crawl)?;
                if sources.iter().any(|x| x.name == src.name) {
                    return cx.err(span, "sources.name", format!("duplicate source name `{}`: give one a `name`", src.name));
                }
                sources.push(src);
                continue;
            }
            if s.kind.get_ref() != "import" {
                return cx.err(s.kind.span(), "sources.kind", format!("unsupported kind `{}` (supported: import, crawl)", s.kind.get_ref()));
            }
            for (key, v) in [("profile", &s.profile), ("serve", &s.serve), ("url", &s.url), ("backend", &s.backend)] {
                if let Some(v) = v {
                    return cx.err(v.span(), &format!("sources.{key}"), "only crawl sources take this key");
                }
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
            sources.push(Source { name, kind: "import".into(), format, path: full, service, columns: s.columns, skip_bad_rows: s.skip_bad_rows, crawl: None });
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
        let c = &raw.stages.crawl;
        if !CRAWL_BACKENDS.contains(&c.backend.as_str()) {
            bail!("{}: `stages.crawl.backend`: unknown backend `{}` (one of {})", file.display(), c.backend, CRAWL_BACKENDS.join(", "));
        }
        if c.max_pages == 0 || c.concurrency == 0 || c.timeout_secs <= 0.0 || c.max_page_bytes == 0 || c.rate_limit < 0.0 {
            bail!("{}: `stages.crawl`: max_pages, concurrency, timeout_secs and max_page_bytes must be positive, rate_limit not negative", file.display());
        }
        if raw.stages.import.batch_size == 0 {
            bail!("{}: `stages.import.batch_size` must be at least 1", file.display());
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

/// A `kind = "crawl"` source checked against its profile and the crawl parameters.
fn crawl_source(cx: &Ctx, span: std::ops::Range<usize>, s: RawSource, service: String, profiles: &BTreeMap<String, Spanned<doc2ci_crawl::Profile>>, params: &CrawlParams) -> Result<Source> {
    for (key, v) in [("path", &s.path), ("format", &s.format)] {
        if let Some(v) = v {
            return cx.err(v.span(), &format!("sources.{key}"), "a crawl source takes `serve` or `url`, not this key");
        }
    }
    if !s.columns.is_empty() {
        return cx.err(span, "sources.columns", "a crawl source has no columns");
    }
    let Some(pname) = s.profile else { return cx.err(span, "sources.profile", "missing: a crawl source names its site profile (`[profiles.NAME]`)") };
    let Some(profile) = profiles.get(pname.get_ref()) else {
        let names: Vec<&str> = profiles.keys().map(String::as_str).collect();
        return cx.err(pname.span(), "sources.profile", format!("no profile `{}` (declared: {})", pname.get_ref(), if names.is_empty() { "none".into() } else { names.join(", ") }));
    };
    if let Err(m) = profile.get_ref().compile() {
        return cx.err(profile.span(), &format!("profiles.{}", pname.get_ref()), m);
    }
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
        (None, None) => return cx.err(span, "sources.url", "missing: a crawl source needs `url` (a site) or `serve` (a folder doc2ci serves)"),
    };
    let backend = match &s.backend {
        Some(b) if !CRAWL_BACKENDS.contains(&b.get_ref().as_str()) => return cx.err(b.span(), "sources.backend", format!("unknown backend `{}` (one of {})", b.get_ref(), CRAWL_BACKENDS.join(", "))),
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
        kind: "crawl".into(),
        format: String::new(),
        path: serve.clone().unwrap_or_default(),
        service,
        columns: BTreeMap::new(),
        skip_bad_rows: false,
        crawl: Some(CrawlSource { profile_name: pname.get_ref().clone(), profile: profile.get_ref().clone(), serve, url, backend }),
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
