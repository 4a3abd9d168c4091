//! `backend = "openai"`: any OpenAI-compatible chat server (vLLM, llama.cpp, OpenAI), a pool of
//! `base_urls` sharing the limits; with `completions = true`, also its legacy `/completions`
//! endpoint (raw continuation; `echo_logprobs = true`: a prompt's log-probabilities).

use std::sync::Arc;

use anyhow::Result;
use doc2ci_llm::Backend;
use serde::Deserialize;
use toml::Spanned;

use super::{GenSettings, Kind};
use crate::keys::{fields_of, Ctx, Entry};

pub const KIND: Kind = Kind { own: fields_of::<Keys>, keys, ..Kind::api_server("openai", build) };

fn build(g: &GenSettings) -> Result<Arc<dyn Backend>> {
    let config = doc2ci_llm::OpenAiConfig {
        base_urls: g.base_urls.clone(),
        model: g.key.model_id.clone(),
        api_key_env: g.api_key_env.clone(),
        api_key: None,
        limits: super::limits(g),
    };
    Ok(doc2ci_llm::openai_with(config, g.completions)?)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Keys {
    #[serde(default)]
    api_key_env: Option<Spanned<String>>,
    /// The server also serves `/completions`: the contamination screen continues prefixes raw.
    #[serde(default)]
    completions: bool,
    /// Its `/completions` echoes a prompt's log-probabilities (`echo` + `logprobs`: OpenAI's
    /// legacy API, vLLM): the screen computes Min-K% Prob through it.
    #[serde(default)]
    echo_logprobs: bool,
}

fn keys(cx: &Ctx, model: &str, e: Entry, g: &mut GenSettings) -> Result<()> {
    let k: Keys = e.rest(cx)?;
    g.api_key_env = super::api_key_env(cx, model, k.api_key_env)?;
    g.completions = doc2ci_llm::Completions { raw: k.completions || k.echo_logprobs, echo_logprobs: k.echo_logprobs };
    Ok(())
}
