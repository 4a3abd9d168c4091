//! `[[models]]`: where each model's outputs come from, as types.
//!
//! An entry is its common keys ([`Common`]) plus the keys of its kind: [`FileKeys`] and
//! [`ImportKeys`] for `backend = "import"`; for a generative backend, [`GenKeys`] (what every one of them takes)
//! and then the backend's own keys, a type declared next to its code in `crate::backends`. A
//! key of another kind or backend is named as such; any other unknown key is rejected by the type.

use anyhow::Result;
use serde::Deserialize;
use toml::Spanned;

use super::{check_name, FileKeys, ImportModel, Model, ModelKind, Service, Source, BATCH_RESULTS};
use crate::backends::{GenKey, GenSettings};
use crate::keys::{fields_of, Ctx, Entry};

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
    /// The last day the model's training data covers (`YYYY-MM-DD`): the time split compares
    /// pairs published after it with those before.
    #[serde(default)]
    knowledge_cutoff: Option<Spanned<String>>,
}

/// Keys of `backend = "import"` beside its file's ([`FileKeys`]).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ImportKeys {
    /// The source whose pair IDs the file's rows name.
    #[serde(default)]
    source: Option<Spanned<String>>,
}

/// Every key of `backend = "import"`.
fn import_keys() -> Vec<&'static str> {
    [fields_of::<FileKeys>(), fields_of::<ImportKeys>()].concat()
}

/// Keys every generative backend takes.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct GenKeys {
    #[serde(default)]
    model: Option<Spanned<String>>,
    #[serde(default)]
    concurrency: Option<Spanned<usize>>,
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
    price_per_1k_input: Option<f64>,
    #[serde(default)]
    price_per_1k_output: Option<f64>,
    /// Budget of this model in one run (needs a price).
    #[serde(default)]
    max_cost: Option<Spanned<f64>>,
    #[serde(default)]
    services: Option<Spanned<Vec<String>>>,
}

/// Every key a `[[models]]` entry may take, whatever its backend (read from the types).
pub(super) fn keys() -> Vec<&'static str> {
    let mut all = [fields_of::<Common>(), &import_keys(), fields_of::<GenKeys>()].concat();
    for b in crate::backends::BACKENDS {
        all.extend(b.fields());
    }
    all.sort();
    all.dedup();
    all
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
        // A key of another kind or backend would be ignored: a typo of the backend, or a key in
        // the wrong entry.
        let entry_span = e.span.clone();
        let kind = if backend == "import" {
            if let Some((k, sp)) = e.outside(&import_keys()) {
                let generative = crate::backends::BACKENDS.iter().any(|b| b.fields().contains(&k));
                if generative || fields_of::<GenKeys>().contains(&k) {
                    let takers = crate::backends::names()[1..].join(", ");
                    return cx.err(
                        sp,
                        &format!("models.{k}"),
                        format!("model `{name}`: `{k}` applies to generative backends ({takers}), not import"),
                    );
                }
            }
            let file: FileKeys = e.part(cx)?;
            ModelKind::Import(import_model(cx, entry_span, &name, service, file, e.rest(cx)?, sources)?)
        } else {
            let b = crate::backends::kind(backend).expect("checked against the registry");
            let g: GenKeys = e.part(cx)?;
            if let Some((k, sp)) = e.outside(&b.fields()) {
                if import_keys().contains(&k) {
                    return cx.err(
                        sp,
                        &format!("models.{k}"),
                        format!("model `{name}`: `{k}` applies to the import backend, not {backend}"),
                    );
                }
                if let Some(why) = b.refuse(k) {
                    return cx.err(sp, &format!("models.{k}"), format!("model `{name}`: {why}"));
                }
            }
            let mut settings = gen_settings(cx, &c, g, services)?;
            if b.server {
                crate::backends::server::take(cx, &mut e, &name, &mut settings)?;
            }
            (b.keys)(cx, &name, e, &mut settings)?;
            ModelKind::Generate(settings)
        };
        if let Some(b) = &c.base_model {
            bases.push((name.clone(), b.get_ref().clone(), b.span()));
        }
        let knowledge_cutoff = match &c.knowledge_cutoff {
            None => None,
            Some(k) => match doc2ci_rows::iso_day(k.get_ref()) {
                Some(d) => Some(d),
                None => {
                    return cx.err(
                        k.span(),
                        "models.knowledge_cutoff",
                        format!("model `{name}`: knowledge_cutoff `{}` is not a day (YYYY-MM-DD)", k.get_ref()),
                    )
                }
            },
        };
        models.push(Model {
            name,
            family: c.family,
            size_b: c.size_b,
            code: c.code,
            proprietary: c.proprietary,
            base_model: c.base_model.map(|b| b.into_inner()),
            knowledge_cutoff,
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
    file: FileKeys,
    m: ImportKeys,
    sources: &[Source],
) -> Result<ImportModel> {
    let missing = format!("model `{name}`: the import backend needs `path`");
    let (path, format) = file.file_and_format(cx, span.clone(), "models", &missing, BATCH_RESULTS)?;
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
    Ok(ImportModel { path, format, service, source, columns: file.columns, skip_bad_rows: file.skip_bad_rows })
}

/// A generative model's settings from the keys every backend shares; the backend's own keys
/// (`Kind::keys`, and `backends::server`) set the rest.
fn gen_settings(cx: &Ctx, common: &Common, m: GenKeys, services: &[Service]) -> Result<GenSettings> {
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
    let kind = crate::backends::kind(backend).expect("checked against the registry");
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
            // Set by the backend's own keys (`num_ctx`: ollama; `params`: server backends).
            num_ctx: None,
            endpoint: None,
            params: serde_json::Map::new(),
            max_pairs,
        },
        // Set by the server keys, for backends that call one (`backends::server`).
        base_urls: vec![],
        api_key_env: None,
        concurrency,
        rpm: None,
        tpm: None,
        retries: 5,
        timeout_ms: 120_000,
        price_per_1k_input: m.price_per_1k_input,
        price_per_1k_output: m.price_per_1k_output,
        max_cost,
        services: svcs,
        model_file,
        // Set by the backend's own keys (`llama-cpp`).
        local: Default::default(),
        completions: Default::default(),
    })
}
