//! Generative backends: one file each, registered once in [`BACKENDS`]. A backend says which
//! config keys it takes, how a model's settings become a client, and which pinned assets stand
//! in its cache key; nothing outside this folder matches on a backend's name.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use anyhow::{anyhow, Result};
use doc2ci_llm::{Backend, Limits};

use crate::config::{GenSettings, Model};

pub use embedded::SMOLLM2_GGUF;

/// One generative backend.
pub struct Kind {
    /// `backend = "…"` in `[[models]]`.
    pub name: &'static str,
    /// Config keys of `[[models]]` that only this backend reads (beside the common ones).
    pub keys: &'static [&'static str],
    /// The model id when `model` is not given (None: the model's name).
    pub default_model: Option<&'static str>,
    /// Whether `base_url`/`base_urls` are required.
    pub needs_url: bool,
    pub build: fn(&GenSettings) -> Result<Arc<dyn Backend>>,
    /// Assets that stand in the cache key by their pinned hash (the embedded weights).
    pub pins: fn(&GenSettings) -> Vec<(String, String)>,
}

/// A backend file is a module exporting `KIND`; listing it here declares and registers it.
macro_rules! registry {
    ($($m:ident),* $(,)?) => {
        $(mod $m;)*
        /// Every generative backend (`import` is not one: it reads a file of outputs).
        pub const BACKENDS: &[Kind] = &[$($m::KIND),*];
    };
}

registry! {
    openai,
    ollama,
    embedded,
    responses,
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
pub fn client(m: &Model) -> Result<Arc<dyn Backend>> {
    static CACHE: OnceLock<Mutex<HashMap<String, Arc<dyn Backend>>>> = OnceLock::new();
    let cache = CACHE.get_or_init(|| Mutex::new(HashMap::new()));
    let mut guard = cache.lock().map_err(|_| anyhow!("backend cache poisoned"))?;
    if let Some(b) = guard.get(&m.name) {
        return Ok(b.clone());
    }
    let g = m.gen().ok_or_else(|| anyhow!("model `{}` is imported: it has no backend to call", m.name))?;
    let k = kind(&g.key.backend)
        .ok_or_else(|| anyhow!("model `{}`: backend `{}` cannot generate", m.name, g.key.backend))?;
    let b = (k.build)(g).map_err(|e| anyhow!("model `{}`: {e:#}", m.name))?;
    guard.insert(m.name.clone(), b.clone());
    Ok(b)
}

/// The pinned assets of a model's backend, for its cache keys.
pub fn pins(m: &Model) -> Vec<(String, String)> {
    match m.gen().and_then(|g| kind(&g.key.backend).map(|k| (k, g))) {
        Some((k, g)) => (k.pins)(g),
        None => vec![],
    }
}
