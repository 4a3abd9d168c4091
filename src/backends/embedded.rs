//! `backend = "embedded"`: SmolLM2-135M-Instruct run in-process (`libs/smollm`), no server. Its
//! weights are an asset that `doc2ci setup` fetches; their pinned hash stands in the cache key.

use std::sync::{Arc, OnceLock};

use anyhow::{anyhow, Result};
use doc2ci_llm::Backend;

use super::{GenSettings, Kind};
use crate::assets;

/// The embedded model's weights, as `doc2ci setup` fetches them.
pub const SMOLLM2_GGUF: &str = "models/smollm2-135m-instruct/SmolLM2-135M-Instruct.Q4_1.gguf";

pub const KIND: Kind = Kind { name: "embedded", keys: &[], default_model: Some(SMOLLM2_GGUF), needs_url: false, build, pins, batch: None };

fn build(_: &GenSettings) -> Result<Arc<dyn Backend>> {
    Ok(doc2ci_smollm::backend(load()?))
}

fn pins(_: &GenSettings) -> Vec<(String, String)> {
    assets::pinned_sha256(SMOLLM2_GGUF).map(|h| vec![(SMOLLM2_GGUF.to_string(), h)]).unwrap_or_default()
}

/// The weights, loaded once however many model entries use them.
fn load() -> Result<Arc<doc2ci_smollm::Embedded>> {
    static E: OnceLock<std::result::Result<Arc<doc2ci_smollm::Embedded>, String>> = OnceLock::new();
    E.get_or_init(|| {
        let path = assets::require(SMOLLM2_GGUF).map_err(|e| format!("{e:#}"))?;
        doc2ci_smollm::Embedded::load(&path)
            .map(Arc::new)
            .map_err(|e| format!("loading the embedded model {}: {e:#}", path.display()))
    })
    .clone()
    .map_err(|e| anyhow!("{e}"))
}
