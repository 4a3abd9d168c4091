//! `backend = "openai-batch"`: OpenAI's Batch API (half the price of synchronous requests, answers
//! within 24 h). A partition's requests go up as one JSONL file (`custom_id` = pair, sample,
//! round), one batch is created and polled, and its output and error files become rows
//! (`src/generation/batch.rs`). The batch id sits in the partition's checkpoint the moment the
//! server gives it, so a killed run polls the same batch again and never submits twice.
//!
//! Prices (`price_per_1k_input` / `_output`) are the batch prices: give those the provider lists
//! for batches. The first `base_url` is used; a pool of endpoints has no meaning for one batch.

use std::sync::Arc;

use anyhow::{bail, Result};
use doc2ci_llm::batch::BatchClient;
use doc2ci_llm::Backend;

use super::{GenSettings, Kind};

pub const KIND: Kind = Kind { batch: Some(client), ..Kind::api_server("openai-batch", build) };

fn build(_: &GenSettings) -> Result<Arc<dyn Backend>> {
    bail!("answers through provider batches, not one request at a time")
}

fn client(g: &GenSettings) -> Result<BatchClient> {
    let key = doc2ci_llm::api_key("openai-batch", &g.key.model_id, g.api_key_env.as_deref())?;
    let base = g.base_urls.first().ok_or_else(|| anyhow::anyhow!("no base_url configured"))?;
    Ok(BatchClient::new(base, key, g.timeout_ms, g.retries)?)
}
