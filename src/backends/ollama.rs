//! `backend = "ollama"`: Ollama's native chat API, with its context window (`num_ctx`).

use std::sync::Arc;

use anyhow::Result;
use doc2ci_llm::Backend;

use super::{GenSettings, Kind};

pub const KIND: Kind =
    Kind { name: "ollama", keys: &["num_ctx"], default_model: None, needs_url: true, concurrency: 4, model_file: false, build, pins: |_| vec![], batch: None };

fn build(g: &GenSettings) -> Result<Arc<dyn Backend>> {
    Ok(doc2ci_llm::ollama(doc2ci_llm::OllamaConfig {
        base_urls: g.base_urls.clone(),
        model: g.key.model_id.clone(),
        num_ctx: g.key.num_ctx,
        limits: super::limits(g),
    })?)
}
