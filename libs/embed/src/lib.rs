//! all-MiniLM-L6-v2 sentence embeddings computed in-process, matching sentence-transformers
//! (mean pooling over real tokens, L2 normalisation, truncation at 256 word pieces).
//!
//! Owns: text → vector. Never caches (the engine keeps the embedding cache) and never scores.
//!
//! Two forward passes share one tokenizer set-up:
//! - [`Backend::Fused`] (default): the weights are loaded with candle, then the encoder runs on packed
//!   rows (the tokens of a batch's texts stacked with no padding at all), with candle's `gemm` for the
//!   matrix products and fused, runtime-dispatched SIMD loops for bias + GELU, residual + LayerNorm and
//!   softmax. Padding-free packing makes the dense layers cost exactly the real tokens.
//! - [`Backend::Candle`]: candle-transformers' `BertModel` on length-sorted, padded batches; kept as the
//!   independent second implementation the tests compare the fused path against.

mod fused;
mod simd;

pub use doc2ci_errors::{Error, Result};

use std::path::Path;

use candle_core::{DType, Device, Tensor};
use doc2ci_errors::{fail, Within};
use tokenizers::{Tokenizer, TruncationDirection, TruncationParams, TruncationStrategy};

/// sentence-transformers' `max_seq_length` for this model (from its `sentence_bert_config.json`).
pub const MAX_TOKENS: usize = 256;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    Fused,
    Candle,
}

#[derive(Clone, Debug)]
pub struct Options {
    pub backend: Backend,
    /// Fused backend: word pieces per packed batch (bounds activation memory, keeps gemm fed).
    pub batch_tokens: usize,
    /// Candle backend: texts per padded batch (sentence-transformers' default is 32).
    pub batch_size: usize,
    /// Worker threads in a pool of the embedder's own; 0 means rayon's global pool.
    pub threads: usize,
}

impl Default for Options {
    fn default() -> Self {
        Options { backend: Backend::Fused, batch_tokens: 2048, batch_size: 32, threads: 0 }
    }
}

enum Model {
    Fused(fused::Encoder),
    Candle(candle_transformers::models::bert::BertModel),
}

pub struct Embedder {
    tokenizer: Tokenizer,
    model: Model,
    opts: Options,
    pool: Option<rayon::ThreadPool>,
    dim: usize,
}

impl Embedder {
    /// Loads `model.safetensors`, `tokenizer.json` and `config.json` with the default options.
    pub fn load(model: &Path, tokenizer: &Path, config: &Path) -> Result<Self> {
        Self::load_with(model, tokenizer, config, Options::default())
    }

    pub fn load_with(model: &Path, tokenizer: &Path, config: &Path, opts: Options) -> Result<Self> {
        if opts.batch_tokens < MAX_TOKENS {
            fail!(Request, "batch_tokens must be at least {MAX_TOKENS} (one full-length text)");
        }
        if opts.batch_size == 0 {
            fail!(Request, "batch_size must be at least 1");
        }
        let pool = match opts.threads {
            0 => None,
            n => Some(
                rayon::ThreadPoolBuilder::new()
                    .num_threads(n)
                    .build()
                    .within(|| "starting embedding threads".into())?,
            ),
        };
        let mut tok = Tokenizer::from_file(tokenizer)
            .map_err(|e| Error::Tokenizer(format!("loading tokenizer {}: {e}", tokenizer.display())))?;
        // tokenizer.json ships truncation 128 + fixed padding 128; sentence-transformers overrides both
        // (SPEC §9), and so must we or the embeddings drift far from the peer's.
        tok.with_truncation(Some(TruncationParams {
            max_length: MAX_TOKENS,
            strategy: TruncationStrategy::LongestFirst,
            stride: 0,
            direction: TruncationDirection::Right,
        }))
        .map_err(|e| Error::Tokenizer(e.to_string()))?;
        tok.with_padding(None);

        let cfg_text =
            std::fs::read_to_string(config).within(|| format!("reading model config {}", config.display()))?;
        let bert_cfg: candle_transformers::models::bert::Config =
            serde_json::from_str(&cfg_text).within(|| format!("parsing model config {}", config.display()))?;
        let cfg =
            fused::Config::from_json(&cfg_text).within(|| format!("parsing model config {}", config.display()))?;
        if cfg.max_positions < MAX_TOKENS {
            fail!(Unsupported, "model supports only {} positions, need {MAX_TOKENS}", cfg.max_positions);
        }
        let dim = cfg.hidden;
        let tensors = candle_core::safetensors::load(model, &Device::Cpu)
            .within(|| format!("loading weights {}", model.display()))?;
        let model = match opts.backend {
            Backend::Fused => Model::Fused(fused::Encoder::from_tensors(&cfg, &tensors)?),
            Backend::Candle => {
                let vb = candle_nn::VarBuilder::from_tensors(tensors, DType::F32, &Device::Cpu);
                // Checkpoints exported from a BertForX model carry a "bert." prefix; this one has none.
                let m = candle_transformers::models::bert::BertModel::load(vb.clone(), &bert_cfg)
                    .or_else(|_| candle_transformers::models::bert::BertModel::load(vb.pp("bert"), &bert_cfg))
                    .within(|| "building candle BertModel".into())?;
                Model::Candle(m)
            }
        };
        Ok(Embedder { tokenizer: tok, model, opts, pool, dim })
    }

    pub fn dim(&self) -> usize {
        self.dim
    }

    /// Word-piece ids (with [CLS]/[SEP], truncated at 256) exactly as the model sees them.
    pub fn token_ids(&self, texts: &[&str]) -> Result<Vec<Vec<u32>>> {
        let enc = self
            .tokenizer
            .encode_batch(texts.to_vec(), true)
            .map_err(|e| Error::Tokenizer(format!("tokenizing: {e}")))?;
        Ok(enc.into_iter().map(|e| e.get_ids().to_vec()).collect())
    }

    /// Unit-length embeddings, one per text, in input order.
    pub fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>> {
        match &self.pool {
            Some(pool) => pool.install(|| self.embed_here(texts)),
            None => self.embed_here(texts),
        }
    }

    fn embed_here(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        let ids = self.token_ids(texts)?;
        // Longest first: the expensive batches start early, so the parallel tail is short.
        let mut order: Vec<usize> = (0..ids.len()).collect();
        order.sort_by_key(|&i| std::cmp::Reverse(ids[i].len()));
        let threads = rayon::current_num_threads();
        let mut out = vec![Vec::new(); texts.len()];
        match &self.model {
            Model::Fused(enc) => {
                let batches = pack(&order, &ids, self.opts.batch_tokens);
                let vecs = enc.embed_batches(&ids, &batches, threads);
                for (batch, vs) in batches.iter().zip(vecs) {
                    for (&i, v) in batch.iter().zip(vs) {
                        out[i] = v;
                    }
                }
            }
            Model::Candle(m) => {
                for batch in order.chunks(self.opts.batch_size) {
                    let vs = candle_batch(m, &ids, batch)?;
                    for (&i, v) in batch.iter().zip(vs) {
                        out[i] = v;
                    }
                }
            }
        }
        Ok(out)
    }
}

/// Consecutive runs of `order` whose token counts add up to at most `budget`.
fn pack(order: &[usize], ids: &[Vec<u32>], budget: usize) -> Vec<Vec<usize>> {
    let mut batches = Vec::new();
    let mut cur = Vec::new();
    let mut used = 0;
    for &i in order {
        let n = ids[i].len();
        if used + n > budget && !cur.is_empty() {
            batches.push(std::mem::take(&mut cur));
            used = 0;
        }
        cur.push(i);
        used += n;
    }
    if !cur.is_empty() {
        batches.push(cur);
    }
    batches
}

fn candle_batch(
    m: &candle_transformers::models::bert::BertModel,
    ids: &[Vec<u32>],
    batch: &[usize],
) -> Result<Vec<Vec<f32>>> {
    let longest = batch.iter().map(|&i| ids[i].len()).max().unwrap_or(0);
    let b = batch.len();
    let mut flat = vec![0u32; b * longest];
    let mut mask = vec![0f32; b * longest];
    for (r, &i) in batch.iter().enumerate() {
        for (c, &t) in ids[i].iter().enumerate() {
            flat[r * longest + c] = t;
            mask[r * longest + c] = 1.0;
        }
    }
    let dev = Device::Cpu;
    let input = Tensor::from_vec(flat, (b, longest), &dev)?;
    let types = input.zeros_like()?;
    let mask_t = Tensor::from_vec(mask, (b, longest), &dev)?;
    let hidden = m.forward(&input, &types, Some(&mask_t))?; // (b, l, h)
    let m3 = mask_t.unsqueeze(2)?;
    let summed = hidden.broadcast_mul(&m3)?.sum(1)?;
    let counts = m3.sum(1)?.clamp(1e-9, f32::MAX)?;
    let mean = summed.broadcast_div(&counts)?;
    let norm = mean.sqr()?.sum_keepdim(1)?.sqrt()?.clamp(1e-12, f32::MAX)?;
    Ok(mean.broadcast_div(&norm)?.to_vec2::<f32>()?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pack_respects_budget_and_keeps_every_index() {
        let ids: Vec<Vec<u32>> = [5, 3, 8, 2, 8, 1].iter().map(|&n| vec![0; n]).collect();
        let order = vec![2, 4, 0, 1, 3, 5];
        let b = pack(&order, &ids, 10);
        assert_eq!(b, vec![vec![2], vec![4], vec![0, 1, 3], vec![5]]);
        let single = pack(&order, &ids, 4);
        assert_eq!(single.len(), 5, "{single:?}"); // a text over budget still gets its own batch
    }
}
