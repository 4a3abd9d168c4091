//! `[[models]]`: where each model's outputs come from, as types.
//!
//! An entry is its common keys ([`Common`]) plus the keys of its kind: [`ImportKeys`] for
//! `backend = "import"`, [`GenKeys`] for every generative backend (which of those a backend
//! reads is declared next to its code, in `crate::backends`). A key of the other kind is
//! named as such; any other unknown key is rejected by the type.

use std::collections::BTreeMap;

use anyhow::Result;
use serde::Deserialize;
use toml::Spanned;

use super::spans::{fields_of, Ctx, Entry};
use super::{check_name, ImportModel, Model, ModelKind, Service, Source, BATCH_RESULTS, IMPORT_FORMATS};
use crate::backends::{GenKey, GenSettings};

/// Keys of every `[[models]]` entry.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Common {
    name: Spanned<String>,
    backend: Spanned<String>,
    /// The service an import's outputs answer, or the one service a generative model is asked.
    #[serde(default)]
    service: Option<Spanned<String>>,
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
}

/// Keys of `backend = "import"`: a file of outputs.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ImportKeys {
    #[serde(default)]
    path: Option<Spanned<String>>,
    #[serde(default)]
    format: Option<Spanned<String>>,
    #[serde(default)]
    source: Option<Spanned<String>>,
    #[serde(default)]
    columns: BTreeMap<String, String>,
    #[serde(default)]
    skip_bad_rows: bool,
}

/// Keys of the generative backends.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct GenKeys {
    #[serde(default)]
    base_url: Option<Spanned<String>>,
    #[serde(default)]
    base_urls: Option<Spanned<Vec<String>>>,
    #[serde(default)]
    api_key_env: Option<Spanned<String>>,
    #[serde(default)]
    model: Option<Spanned<String>>,
    #[serde(default)]
    params: Option<Spanned<toml::Table>>,
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
    num_ctx: Option<Spanned<u32>>,
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

/// Every `[[models]]` entry, typed; a model may name as its base one declared after it.
pub(super) fn models(cx: &Ctx, entries: Vec<Entry>, services: &[Service], sources: &[Source]) -> Result<Vec<Model>> {
    let mut models: Vec<Model> = Vec::new();
    let mut bases = Vec::new();
    for mut e in entries {
        let c: Common = e.part(cx)?;
        let name = c.name.get_ref().clone();
        if let Err(msg) = check_name("model name", &name) {
            return cx.err(c.name.span(), "models.name", msg);
        }
        if models.iter().any(|x| x.name == name) {
            return cx.err(c.name.span(), "models.name", format!("duplicate model name `{name}`"));
        }
        let backend = c.backend.get_ref().as_str();
        if backend != "import" && crate::backends::kind(backend).is_none() {
            return cx.err(
                c.backend.span(),
                "models.backend",
                format!("unknown backend `{backend}` (one of {})", crate::backends::names().join(", ")),
            );
        }
        let service = match &c.service {
            Some(s) => Some(super::known_service(cx, services, s, "models.service")?),
            None if services.len() == 1 => Some(services[0].name.clone()),
            None => None,
        };
        // A key of the other kind would be ignored: a typo of the backend, or a key in the wrong entry.
        let import = backend == "import";
        let foreign = if import { e.foreign::<ImportKeys>() } else { e.foreign::<GenKeys>() };
        if let Some((k, sp)) = foreign {
            let (theirs, takers) = if import {
                (fields_of::<GenKeys>(), format!("generative backends ({})", crate::backends::names()[1..].join(", ")))
            } else {
                (fields_of::<ImportKeys>(), "the import backend".to_string())
            };
            if theirs.contains(&k) {
                return cx.err(
                    sp,
                    &format!("models.{k}"),
                    format!("model `{name}`: `{k}` applies to {takers}, not {backend}"),
                );
            }
        }
        let entry_span = e.span.clone();
        let kind = if import {
            ModelKind::Import(import_model(cx, entry_span, &name, service, e.rest(cx)?, sources)?)
        } else {
            ModelKind::Generate(gen_settings(cx, entry_span, &c, e.rest(cx)?, services)?)
        };
        if let Some(b) = &c.base_model {
            bases.push((name.clone(), b.get_ref().clone(), b.span()));
        }
        models.push(Model {
            name,
            family: c.family,
            size_b: c.size_b,
            code: c.code,
            proprietary: c.proprietary,
            base_model: c.base_model.map(|b| b.into_inner()),
            kind,
        });
    }
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
    Ok(models)
}

/// `backend = "import"`: the file, its format, and the source whose pair IDs its rows name.
fn import_model(
    cx: &Ctx,
    span: std::ops::Range<usize>,
    name: &str,
    service: Option<String>,
    m: ImportKeys,
    sources: &[Source],
) -> Result<ImportModel> {
    let Some(path) = &m.path else {
        return cx.err(span, "models.path", format!("model `{name}`: the import backend needs `path`"));
    };
    let path = cx.path(path.span(), "models.path", path.get_ref())?;
    let format = match &m.format {
        Some(f) if !IMPORT_FORMATS.contains(&f.get_ref().as_str()) && f.get_ref() != BATCH_RESULTS => {
            return cx.err(
                f.span(),
                "models.format",
                format!("unknown format `{}` (one of {}, {BATCH_RESULTS})", f.get_ref(), IMPORT_FORMATS.join(", ")),
            )
        }
        Some(f) => f.get_ref().clone(),
        None => "llm4ci".into(),
    };
    let Some(service) = service else {
        return cx.err(
            span,
            "models.service",
            format!("model `{name}`: several services are declared, say which one its outputs answer"),
        );
    };
    let candidates: Vec<&Source> = sources.iter().filter(|s| s.service == service).collect();
    let source = match &m.source {
        Some(s) if candidates.iter().any(|c| c.name == *s.get_ref()) => s.get_ref().clone(),
        Some(s) => {
            return cx.err(s.span(), "models.source", format!("no source `{}` for service `{service}`", s.get_ref()))
        }
        None if candidates.len() == 1 => candidates[0].name.clone(),
        None if candidates.is_empty() => {
            return cx.err(span, "models.source", format!("model `{name}`: no source of pairs for service `{service}`"))
        }
        None => {
            return cx.err(
                span,
                "models.source",
                format!("model `{name}`: several sources serve `{service}`, say which one its IDs refer to"),
            )
        }
    };
    Ok(ImportModel { path, format, service, source, columns: m.columns, skip_bad_rows: m.skip_bad_rows })
}

/// A generative backend's settings, checked against what the backend declares it reads.
fn gen_settings(
    cx: &Ctx,
    span: std::ops::Range<usize>,
    common: &Common,
    m: GenKeys,
    services: &[Service],
) -> Result<GenSettings> {
    let name = common.name.get_ref();
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
    let backend = common.backend.get_ref().as_str();
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
    if let Some(n) = m.num_ctx.as_ref().filter(|_| !kind.keys.contains(&"num_ctx")) {
        return cx.err(
            n.span(),
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
        Some(t) => match serde_json::to_value(t.get_ref())? {
            serde_json::Value::Object(o) => o,
            _ => unreachable!("a TOML table is a JSON object"),
        },
        None => serde_json::Map::new(),
    };
    if !kind.needs_url && !params.is_empty() {
        return cx.err(
            m.params.as_ref().map_or(span.clone(), |p| p.span()),
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
        None => match &common.service {
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
            num_ctx: m.num_ctx.map(|n| n.into_inner()),
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
