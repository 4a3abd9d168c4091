//! `backend = "openai"`: any OpenAI-compatible chat server (vLLM, llama.cpp, OpenAI), a pool of
//! `base_urls` sharing the limits.

use std::sync::Arc;

use anyhow::Result;
use doc2ci_llm::Backend;

use super::{GenSettings, Kind};
use crate::keys::fields_of;

pub const KIND: Kind = Kind {
    name: "openai",
    default_model: None,
    server: true,
    own: fields_of::<super::ApiKeyKeys>,
    keys: super::api_key_keys,
    concurrency: 4,
    model_file: false,
    build,
    pins: |_| vec![],
    batch: None,
};

fn build(g: &GenSettings) -> Result<Arc<dyn Backend>> {
    Ok(doc2ci_llm::openai(doc2ci_llm::OpenAiConfig {
        base_urls: g.base_urls.clone(),
        model: g.key.model_id.clone(),
        api_key_env: g.api_key_env.clone(),
        api_key: None,
        limits: super::limits(g),
    })?)
}
