//! `backend = "openai"`: any OpenAI-compatible chat server (vLLM, llama.cpp, OpenAI), a pool of
//! `base_urls` sharing the limits.

use std::sync::Arc;

use anyhow::Result;
use doc2ci_llm::Backend;

use super::{GenSettings, Kind};

pub const KIND: Kind = Kind::api_server("openai", build);

fn build(g: &GenSettings) -> Result<Arc<dyn Backend>> {
    Ok(doc2ci_llm::openai(doc2ci_llm::OpenAiConfig {
        base_urls: g.base_urls.clone(),
        model: g.key.model_id.clone(),
        api_key_env: g.api_key_env.clone(),
        api_key: None,
        limits: super::limits(g),
    })?)
}
