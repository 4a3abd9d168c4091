//! `backend = "ollama"`: Ollama's native chat API, with its context window (`num_ctx`).

use std::sync::Arc;

use anyhow::Result;
use doc2ci_llm::Backend;
use serde::Deserialize;
use toml::Spanned;

use super::{GenSettings, Kind};
use crate::keys::{fields_of, Ctx, Entry};

pub const KIND: Kind = Kind { own: fields_of::<Keys>, keys, ..Kind::api_server("ollama", build) };

fn build(g: &GenSettings) -> Result<Arc<dyn Backend>> {
    Ok(doc2ci_llm::ollama(doc2ci_llm::OllamaConfig {
        base_urls: g.base_urls.clone(),
        model: g.key.model_id.clone(),
        num_ctx: g.key.num_ctx,
        limits: super::limits(g),
    })?)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Keys {
    /// Ollama's context window (its default truncates long prompts silently).
    #[serde(default)]
    num_ctx: Option<Spanned<u32>>,
}

fn keys(cx: &Ctx, _: &str, e: Entry, g: &mut GenSettings) -> Result<()> {
    let k: Keys = e.rest(cx)?;
    g.key.num_ctx = k.num_ctx.map(Spanned::into_inner);
    // `/api/generate` with `raw: true` continues a text as is.
    g.completions.raw = true;
    Ok(())
}
