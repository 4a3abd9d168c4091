//! `backend = "embedded"`: a llama-architecture GGUF run in-process (`libs/smollm`), no server. By
//! default SmolLM2-135M-Instruct, an asset `doc2ci setup` fetches, whose pinned hash stands in the
//! cache key; `model = "path/to/any.gguf"` runs that file instead, keyed by its content hash.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use anyhow::{anyhow, Context, Result};
use doc2ci_llm::Backend;

use super::{GenSettings, Kind};
use crate::assets;
use crate::keys::fields_of;

/// The embedded model's weights, as `doc2ci setup` fetches them.
pub const SMOLLM2_GGUF: &str = "models/smollm2-135m-instruct/SmolLM2-135M-Instruct.Q4_1.gguf";

pub const KIND: Kind = Kind {
    name: "embedded",
    default_model: Some(SMOLLM2_GGUF),
    server: false,
    own: fields_of::<super::NoKeys>,
    keys,
    // As many requests in flight as the model decodes together.
    concurrency: doc2ci_smollm::MAX_BATCH,
    model_file: true,
    build,
    pins,
    batch: None,
};

/// No keys of its own; the kernel continues a text as is and scores a given text token by token.
fn keys(cx: &crate::keys::Ctx, model: &str, e: crate::keys::Entry, g: &mut GenSettings) -> Result<()> {
    super::no_keys(cx, model, e, g)?;
    g.completions = doc2ci_llm::Completions { raw: true, echo_logprobs: true };
    Ok(())
}

/// One loaded model and one decoding loop per weights file, however many model entries use it:
/// their requests share its batches.
fn build(g: &GenSettings) -> Result<Arc<dyn Backend>> {
    static LOADED: OnceLock<Mutex<HashMap<PathBuf, Arc<dyn Backend>>>> = OnceLock::new();
    let path = match &g.model_file {
        Some(p) => p.clone(),
        None => assets::require(SMOLLM2_GGUF)?,
    };
    let mut loaded = LOADED.get_or_init(Default::default).lock().map_err(|_| anyhow!("embedded models poisoned"))?;
    if let Some(b) = loaded.get(&path) {
        return Ok(b.clone());
    }
    let model = doc2ci_smollm::Embedded::load(&path)
        .with_context(|| format!("loading the embedded model {}", path.display()))?;
    let b = doc2ci_smollm::backend(Arc::new(model));
    loaded.insert(path, b.clone());
    Ok(b)
}

/// The weights by their hash, and the decoder's numerics: outputs change with either.
fn pins(g: &GenSettings) -> Vec<(String, String)> {
    let mut pins = match &g.model_file {
        Some(p) => content_hash(p).map(|h| vec![(g.key.model_id.clone(), h)]).unwrap_or_default(),
        None => assets::pinned_sha256(SMOLLM2_GGUF).map(|h| vec![(SMOLLM2_GGUF.to_string(), h)]).unwrap_or_default(),
    };
    pins.push(("doc2ci-smollm numerics".into(), doc2ci_smollm::NUMERICS.into()));
    // Each kernel adds floats in its own order: a cache shared by an AVX2 and an AVX-512 machine
    // keeps their answers apart.
    let kernel = doc2ci_smollm::Kernel::chosen().map_or_else(|e| e.to_string(), |k| format!("{k:?}").to_lowercase());
    pins.push(("doc2ci-smollm kernel".into(), kernel));
    pins
}

/// blake3 of a weights file, computed once per (path, size, mtime) in a process.
pub(super) fn content_hash(p: &Path) -> Option<String> {
    type Seen = HashMap<(PathBuf, u64, Option<std::time::SystemTime>), String>;
    static SEEN: OnceLock<Mutex<Seen>> = OnceLock::new();
    let meta = std::fs::metadata(p).ok()?;
    let k = (p.to_path_buf(), meta.len(), meta.modified().ok());
    let mut seen = SEEN.get_or_init(Default::default).lock().ok()?;
    if let Some(h) = seen.get(&k) {
        return Some(h.clone());
    }
    let mut hasher = blake3::Hasher::new();
    hasher.update_reader(std::fs::File::open(p).ok()?).ok()?;
    let h = hasher.finalize().to_hex().to_string();
    seen.insert(k, h.clone());
    Some(h)
}
