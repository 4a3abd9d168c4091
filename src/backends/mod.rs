//! Generative backends: one file each, registered once in [`BACKENDS`]. A backend declares its
//! config keys as a type of its own (parsed after the keys every generative model shares, and the
//! server keys of [`server`] if it calls one), how a model's settings become a client, and which
//! pinned assets stand in its cache key; nothing outside this folder matches on a backend's name.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use anyhow::{anyhow, Result};
use doc2ci_llm::{Backend, Limits};
use serde::{Deserialize, Serialize};
use toml::Spanned;

use crate::keys::{Ctx, Entry};

pub mod budget;
pub mod cache;
pub mod server;

pub use budget::Budget;
pub use cache::{CacheSettings, RequestCache};
pub use embedded::SMOLLM2_GGUF;
pub use llama_cpp::{ChatTemplate, LocalServer};

/// How a generative model is called. Its `key` (what changes the outputs) is in the cache key;
/// throughput knobs (concurrency, limits, retries), prices and credentials are not (skipped
/// below), so a model given more room re-generates nothing.
#[derive(Debug, Clone, Serialize)]
pub struct GenSettings {
    pub key: GenKey,
    #[serde(skip)]
    pub base_urls: Vec<String>,
    #[serde(skip)]
    pub api_key_env: Option<String>,
    #[serde(skip)]
    pub concurrency: usize,
    #[serde(skip)]
    pub rpm: Option<u32>,
    #[serde(skip)]
    pub tpm: Option<u32>,
    #[serde(skip)]
    pub retries: u32,
    #[serde(skip)]
    pub timeout_ms: u64,
    #[serde(skip)]
    pub price_per_1k_input: Option<f64>,
    #[serde(skip)]
    pub price_per_1k_output: Option<f64>,
    /// This model's budget in one run (`backends::budget`).
    #[serde(skip)]
    pub max_cost: Option<f64>,
    /// Services this model answers (default: every declared service): which partitions exist,
    /// not what is in them.
    #[serde(skip)]
    pub services: Vec<String>,
    /// The weights file `model` names, resolved (backends that run a file: `embedded`, `llama-cpp`).
    #[serde(skip)]
    pub model_file: Option<std::path::PathBuf>,
    /// A server doc2ci starts itself (`llama-cpp`): its slots, threads and chat template.
    #[serde(skip)]
    pub local: LocalServer,
    /// What the backend does beside chat: continue a text as is, score a text's tokens (set by
    /// its keys; the contamination screen's key holds it).
    #[serde(skip)]
    pub completions: doc2ci_llm::Completions,
}

/// The parameters that decide what a model outputs.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct GenKey {
    pub backend: String,
    /// The id the server knows the model by (default: the model's name); for `embedded`, the GGUF asset.
    pub model_id: String,
    pub max_tokens: u32,
    pub temperature: f32,
    pub samples: u32,
    pub seed: u64,
    pub few_shot: usize,
    /// Documentation sections quoted in the prompt (0 = off).
    pub retrieval: usize,
    pub retrieval_chars: usize,
    /// The context window: Ollama's `num_ctx`, llama.cpp's `ctx_size` (per slot).
    pub num_ctx: Option<u32>,
    /// Who answers (server backends): `cache_namespace` when given, else the normalised
    /// `base_url`s. Another server is another model as far as any cache knows.
    pub endpoint: Option<String>,
    /// Extra body parameters (`[models.params]`), merged into every request.
    pub params: serde_json::Map<String, serde_json::Value>,
    /// Only this many pairs of each service are asked (a spread sample, the same whatever else
    /// is added); absent from the key when unset, so existing studies keep their cache.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_pairs: Option<usize>,
}

/// One generative backend.
pub struct Kind {
    /// `backend = "…"` in `[[models]]`.
    pub name: &'static str,
    /// The model id when `model` is not given (None: the model's name).
    pub default_model: Option<&'static str>,
    /// It calls a server: it takes the keys of [`server`] (`base_url` required).
    pub server: bool,
    /// Its own keys' names, from its keys type (`fields_of::<Keys>`).
    pub own: fn() -> &'static [&'static str],
    /// Its own keys, typed from what is left of the entry, checked and set on the settings.
    pub keys: fn(&Ctx, &str, Entry, &mut GenSettings) -> Result<()>,
    /// Requests in flight per model when `concurrency` is not given.
    pub concurrency: usize,
    /// `model` may name a weights file instead of the default (`embedded`: any llama GGUF).
    pub model_file: bool,
    pub build: fn(&GenSettings) -> Result<Arc<dyn Backend>>,
    /// Assets that stand in the cache key by their pinned hash (the embedded weights).
    pub pins: fn(&GenSettings) -> Vec<(String, String)>,
    /// A backend that answers a whole partition as one provider batch instead of request by
    /// request (`openai-batch`): the Files and Batches client it talks through.
    pub batch: Option<fn(&GenSettings) -> Result<doc2ci_llm::batch::BatchClient>>,
}

impl Kind {
    /// The common case, which a backend overrides field by field (`..Kind::api_server(…)`): a
    /// server that may need an API key, 4 requests in flight, request by request, no pinned assets.
    pub const fn api_server(name: &'static str, build: fn(&GenSettings) -> Result<Arc<dyn Backend>>) -> Kind {
        Kind {
            name,
            default_model: None,
            server: true,
            own: crate::keys::fields_of::<ApiKeyKeys>,
            keys: api_key_keys,
            concurrency: 4,
            model_file: false,
            build,
            pins: no_pins,
            batch: None,
        }
    }

    /// Every key this backend takes beyond the generative ones all share.
    pub fn fields(&self) -> Vec<&'static str> {
        let server: &[&str] = if self.server { server::fields() } else { &[] };
        server.iter().chain((self.own)()).copied().collect()
    }

    /// Why `key`, a key of other backends, means nothing to this one (None: no backend takes it).
    pub fn refuse(&self, key: &str) -> Option<String> {
        let takers: Vec<&str> = BACKENDS.iter().filter(|k| k.fields().contains(&key)).map(|k| k.name).collect();
        if takers.is_empty() {
            return None;
        }
        let what = match key {
            "params" => "extra request parameters".to_string(),
            "api_key_env" => "API key".to_string(),
            "num_ctx" => "context window".to_string(),
            "base_url" | "base_urls" => "server: it runs in-process".to_string(),
            k => format!("`{k}`"),
        };
        Some(format!("the {} backend takes no {what} (`{key}` is a setting of {})", self.name, takers.join(", ")))
    }
}

/// The pins of a backend whose answers depend on no asset of ours.
pub fn no_pins(_: &GenSettings) -> Vec<(String, String)> {
    vec![]
}

/// The keys of a backend that has none of its own.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NoKeys {}

pub fn no_keys(cx: &Ctx, _: &str, e: Entry, _: &mut GenSettings) -> Result<()> {
    e.rest::<NoKeys>(cx).map(|_| ())
}

/// The keys of a backend that sends an API key: which environment variable holds it.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApiKeyKeys {
    #[serde(default)]
    api_key_env: Option<Spanned<String>>,
}

pub fn api_key_keys(cx: &Ctx, model: &str, e: Entry, g: &mut GenSettings) -> Result<()> {
    let k: ApiKeyKeys = e.rest(cx)?;
    g.api_key_env = api_key_env(cx, model, k.api_key_env)?;
    Ok(())
}

/// `api_key_env`, checked to name a variable (never the key itself).
pub fn api_key_env(cx: &Ctx, model: &str, k: Option<Spanned<String>>) -> Result<Option<String>> {
    if let Some(k) = &k {
        let v = k.get_ref();
        if v.is_empty() || !v.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            // Never echo the value: people paste the key itself here.
            return cx.err(
                k.span(),
                "models.api_key_env",
                format!(
                    "model `{model}`: the value ({} characters, not shown) is not an environment variable name \
                     (letters, digits and `_`): name the variable that holds the key; the key itself never goes in the config",
                    v.chars().count()
                ),
            );
        }
    }
    Ok(k.map(Spanned::into_inner))
}

// Each backend's file, declared where rustfmt sees it; [`registry!`] lists it in [`BACKENDS`]
// (a backend file not listed there fails `every_backend_file_is_registered`).
mod embedded;
mod llama_cpp;
mod ollama;
mod openai;
mod openai_batch;
mod responses;

/// A backend file is a module exporting `KIND`; listing it here registers it.
macro_rules! registry {
    ($($m:ident),* $(,)?) => {
        /// Every generative backend (`import` is not one: it reads a file of outputs).
        pub const BACKENDS: &[Kind] = &[$($m::KIND),*];
        /// The file of each, for the test that none is left out.
        #[cfg(test)]
        const FILES: &[&str] = &[$(stringify!($m)),*];
    };
}

registry! {
    openai,
    ollama,
    embedded,
    responses,
    openai_batch,
    llama_cpp,
}

pub fn kind(name: &str) -> Option<&'static Kind> {
    BACKENDS.iter().find(|k| k.name == name)
}

/// Every backend name a `[[models]]` entry may give, for messages.
pub fn names() -> Vec<&'static str> {
    std::iter::once("import").chain(BACKENDS.iter().map(|k| k.name)).collect()
}

fn limits(g: &GenSettings) -> Limits {
    Limits {
        concurrency: g.concurrency,
        requests_per_minute: g.rpm,
        tokens_per_minute: g.tpm,
        retries: g.retries,
        timeout_ms: g.timeout_ms,
        ..Limits::default()
    }
}

/// One client per model name for the whole process: connection pools and rate limits are
/// shared by every partition of the model, and the embedded weights load once.
pub fn client(model: &str, g: &GenSettings) -> Result<Arc<dyn Backend>> {
    static CACHE: OnceLock<Mutex<HashMap<String, Arc<dyn Backend>>>> = OnceLock::new();
    let cache = CACHE.get_or_init(|| Mutex::new(HashMap::new()));
    let mut guard = cache.lock().map_err(|_| anyhow!("backend cache poisoned"))?;
    if let Some(b) = guard.get(model) {
        return Ok(b.clone());
    }
    let k =
        kind(&g.key.backend).ok_or_else(|| anyhow!("model `{model}`: backend `{}` cannot generate", g.key.backend))?;
    let b = (k.build)(g).map_err(|e| anyhow!("model `{model}`: {e:#}"))?;
    guard.insert(model.to_string(), b.clone());
    Ok(b)
}

/// The batch client of a model whose backend answers in provider batches (None: request by request).
pub fn batch_client(model: &str, g: &GenSettings) -> Result<Option<doc2ci_llm::batch::BatchClient>> {
    match kind(&g.key.backend).and_then(|k| k.batch) {
        Some(make) => make(g).map(Some).map_err(|e| anyhow!("model `{model}`: {e:#}")),
        None => Ok(None),
    }
}

/// The pinned assets of a generative model's backend, for its cache keys (none for an import).
pub fn pins(g: Option<&GenSettings>) -> Vec<(String, String)> {
    match g.and_then(|g| kind(&g.key.backend).map(|k| (k, g))) {
        Some((k, g)) => (k.pins)(g),
        None => vec![],
    }
}

#[cfg(test)]
mod tests {
    /// A file of this folder that declares a `KIND` is a backend only once listed in `registry!`.
    #[test]
    fn every_backend_file_is_registered() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/backends");
        let mut kinds: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .flatten()
            .filter(|e| std::fs::read_to_string(e.path()).is_ok_and(|t| t.contains("pub const KIND: Kind")))
            .filter_map(|e| e.file_name().to_str()?.strip_suffix(".rs").map(str::to_string))
            .filter(|f| f != "mod")
            .collect();
        kinds.sort();
        let mut listed: Vec<String> = super::FILES.iter().map(|f| f.to_string()).collect();
        listed.sort();
        assert_eq!(kinds, listed);
    }
}
