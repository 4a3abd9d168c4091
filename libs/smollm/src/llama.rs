//! The llama decoder (SmolLM2's architecture: RMSNorm, interleaved rotary embeddings, grouped-query
//! attention, SwiGLU) over candle-core tensors, with every projection held twice. Prefill multiplies
//! many tokens at once, where f32 weights give a real GEMM (413 prompt tokens/s here against 168 for
//! candle's quantized dot products, measured on the study prompt); decoding multiplies one token, where
//! reading a quarter of the bytes wins (56 against 25 tokens/s for f32). The f32 copies are dequantized
//! from the GGUF's own tensors, so prefill computes with the file's exact weights; both paths write the
//! same KV cache, so decoding continues the prefill.
//!
//! Several sequences decode together ([`Llama::forward_batch`]): their next tokens go through each
//! projection as the rows of one quantized matmul, which reads a weight tile once for up to 16 rows;
//! attention runs per sequence over its own [`Cache`]. Every row is computed by the same kernels as
//! a sequence alone (row-wise norms, one dot product per output), so a sequence's tokens do not
//! depend on which others share its batch.

use anyhow::{anyhow, bail, Context, Result};
use candle_core::quantized::{gguf_file, QMatMul};
use candle_core::{DType, Device, Module, Tensor};
use std::io::{Read, Seek};

/// One projection: Q8_0 for a single token, f32 for several.
struct Linear {
    quantized: QMatMul,
    /// `(out, in)`, dequantized from the original tensor.
    dense: Tensor,
}

impl Linear {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let (b, s, _) = x.dims3()?;
        Ok(if s > 1 { x.matmul(&self.dense.broadcast_left(b)?.t()?)? } else { self.quantized.forward(x)? })
    }
}

struct Layer {
    attn_norm: Tensor,
    wq: Linear,
    wk: Linear,
    wv: Linear,
    wo: Linear,
    ffn_norm: Tensor,
    gate: Linear,
    up: Linear,
    down: Linear,
}

/// One sequence's keys and values per layer, and how many positions they hold.
#[derive(Default)]
pub struct Cache {
    layers: Vec<Option<(Tensor, Tensor)>>,
    pub pos: usize,
}

pub struct Llama {
    embeddings: Tensor,
    layers: Vec<Layer>,
    norm: Tensor,
    /// Only the last position's logits are ever computed: one token, the quantized path.
    output: QMatMul,
    heads: usize,
    kv_heads: usize,
    head_dim: usize,
    eps: f32,
    cos: Tensor,
    sin: Tensor,
    /// Positions the rotary tables cover.
    pub context: usize,
}

fn meta_u32(ct: &gguf_file::Content, k: &str) -> Result<usize> {
    Ok(ct.metadata.get(k).ok_or_else(|| anyhow!("GGUF has no {k}"))?.to_u32().map_err(|e| anyhow!("{k}: {e}"))?
        as usize)
}

fn meta_f32(ct: &gguf_file::Content, k: &str) -> Option<f32> {
    ct.metadata.get(k).and_then(|v| v.to_f32().ok())
}

impl Llama {
    /// `q8` (the re-quantized file) gives the decoding weights, `original` the prefill ones and
    /// everything else; both must hold the same architecture.
    pub fn load<R1: Read + Seek, R2: Read + Seek>(
        original: (&gguf_file::Content, &mut R1),
        q8: (&gguf_file::Content, &mut R2),
        device: &Device,
    ) -> Result<Llama> {
        let (ct, r) = original;
        let (qct, qr) = q8;
        let arch = ct.metadata.get("general.architecture").and_then(|v| v.to_string().ok()).cloned();
        if arch.as_deref() != Some("llama") {
            bail!("architecture {arch:?}: the embedded model runs llama-architecture GGUFs only");
        }
        let heads = meta_u32(ct, "llama.attention.head_count")?;
        let kv_heads = meta_u32(ct, "llama.attention.head_count_kv").unwrap_or(heads);
        let blocks = meta_u32(ct, "llama.block_count")?;
        let dim = meta_u32(ct, "llama.embedding_length")?;
        let head_dim = dim / heads;
        let rope_dim = meta_u32(ct, "llama.rope.dimension_count").unwrap_or(head_dim);
        if rope_dim != head_dim || heads % kv_heads != 0 {
            bail!("unsupported llama shape: rope over {rope_dim} of {head_dim} dimensions, {heads} heads / {kv_heads}");
        }
        let eps = meta_f32(ct, "llama.attention.layer_norm_rms_epsilon").unwrap_or(1e-5);
        let base = meta_f32(ct, "llama.rope.freq_base").unwrap_or(10_000.0);
        let context = meta_u32(ct, "llama.context_length").unwrap_or(4096).min(8192);

        let dense = |r: &mut R1, name: &str| -> Result<Tensor> {
            ct.tensor(r, name, device).and_then(|q| q.dequantize(device)).with_context(|| format!("GGUF tensor {name}"))
        };
        let quantized = |qr: &mut R2, name: &str| -> Result<QMatMul> {
            let q = qct.tensor(qr, name, device).with_context(|| format!("GGUF tensor {name}"))?;
            Ok(QMatMul::from_qtensor(q)?)
        };
        let linear = |r: &mut R1, qr: &mut R2, name: &str| -> Result<Linear> {
            Ok(Linear { quantized: quantized(qr, name)?, dense: dense(r, name)? })
        };

        let embeddings = dense(r, "token_embd.weight")?;
        let norm = dense(r, "output_norm.weight")?;
        let out_name =
            if qct.tensor_infos.contains_key("output.weight") { "output.weight" } else { "token_embd.weight" };
        let output = quantized(qr, out_name)?;
        let mut layers = Vec::with_capacity(blocks);
        for i in 0..blocks {
            let p = format!("blk.{i}");
            layers.push(Layer {
                attn_norm: dense(r, &format!("{p}.attn_norm.weight"))?,
                wq: linear(r, qr, &format!("{p}.attn_q.weight"))?,
                wk: linear(r, qr, &format!("{p}.attn_k.weight"))?,
                wv: linear(r, qr, &format!("{p}.attn_v.weight"))?,
                wo: linear(r, qr, &format!("{p}.attn_output.weight"))?,
                ffn_norm: dense(r, &format!("{p}.ffn_norm.weight"))?,
                gate: linear(r, qr, &format!("{p}.ffn_gate.weight"))?,
                up: linear(r, qr, &format!("{p}.ffn_up.weight"))?,
                down: linear(r, qr, &format!("{p}.ffn_down.weight"))?,
            });
        }
        // Rotary tables: position × frequency, one frequency per pair of dimensions.
        let freqs: Vec<f32> = (0..head_dim / 2).map(|i| 1.0 / base.powf(2.0 * i as f32 / head_dim as f32)).collect();
        let freqs = Tensor::new(freqs.as_slice(), device)?.reshape((1, head_dim / 2))?;
        let pos = Tensor::arange(0u32, context as u32, device)?.to_dtype(DType::F32)?.reshape((context, 1))?;
        let angles = pos.broadcast_mul(&freqs)?;
        Ok(Llama {
            embeddings,
            layers,
            norm,
            output,
            heads,
            kv_heads,
            head_dim,
            eps,
            cos: angles.cos()?,
            sin: angles.sin()?,
            context,
        })
    }

    /// `tokens` of one sequence at positions `cache.pos..`, after what its cache holds. Returns the
    /// logits of the last position, `(vocab)`.
    pub fn forward(&self, tokens: &[u32], cache: &mut Cache) -> Result<Tensor> {
        let x = Tensor::new(tokens, &Device::Cpu)?.unsqueeze(0)?;
        Ok(self.run(&x, &mut [cache])?.squeeze(0)?)
    }

    /// One next token for each sequence, `tokens[i]` at position `caches[i].pos`. Returns `(b, vocab)`.
    pub fn forward_batch(&self, tokens: &[u32], caches: &mut [&mut Cache]) -> Result<Tensor> {
        if tokens.len() != caches.len() {
            bail!("{} tokens for {} sequences", tokens.len(), caches.len());
        }
        let x = Tensor::new(tokens, &Device::Cpu)?.unsqueeze(1)?;
        self.run(&x, caches)
    }

    /// `tokens`: `(b, s)` ids, one row per cache; several rows only with `s == 1`.
    fn run(&self, tokens: &Tensor, caches: &mut [&mut Cache]) -> Result<Tensor> {
        let (b, s) = tokens.dims2()?;
        if b != 1 && s != 1 {
            bail!("a batch of {b} sequences takes one token each, not {s}");
        }
        for c in caches.iter_mut() {
            if c.pos + s > self.context {
                bail!("position {} is past the model's context of {}", c.pos + s, self.context);
            }
            c.layers.resize(self.layers.len(), None);
        }
        let dim = self.embeddings.dim(1)?;
        let mut x = self.embeddings.index_select(&tokens.flatten_all()?, 0)?.reshape((b, s, dim))?;
        let (heads, kv_heads, hd) = (self.heads, self.kv_heads, self.head_dim);
        let masks: Vec<Option<Tensor>> = caches
            .iter()
            .map(|c| (s > 1).then(|| causal_mask(s, c.pos, x.device())).transpose())
            .collect::<Result<_>>()?;
        for (l, layer) in self.layers.iter().enumerate() {
            let h = candle_nn::ops::rms_norm(&x, &layer.attn_norm, self.eps)?;
            let (q, k, v) = (layer.wq.forward(&h)?, layer.wk.forward(&h)?, layer.wv.forward(&h)?);
            let mut ys = Vec::with_capacity(b);
            for (i, c) in caches.iter_mut().enumerate() {
                let split = |t: &Tensor, n: usize| -> Result<Tensor> {
                    Ok(t.narrow(0, i, 1)?.reshape((1, s, n, hd))?.transpose(1, 2)?.contiguous()?)
                };
                let (cos, sin) = (self.cos.narrow(0, c.pos, s)?, self.sin.narrow(0, c.pos, s)?);
                let q = candle_nn::rotary_emb::rope_i(&split(&q, heads)?, &cos, &sin)?;
                let k = candle_nn::rotary_emb::rope_i(&split(&k, kv_heads)?, &cos, &sin)?;
                let v = split(&v, kv_heads)?;
                let (k, v) = match c.layers[l].take() {
                    Some((ck, cv)) if c.pos > 0 => (Tensor::cat(&[&ck, &k], 2)?, Tensor::cat(&[&cv, &v], 2)?),
                    _ => (k, v),
                };
                c.layers[l] = Some((k.clone(), v.clone()));
                let k = repeat_kv(&k, heads / kv_heads)?;
                let v = repeat_kv(&v, heads / kv_heads)?;
                let mut att = (q.matmul(&k.t()?)? / (hd as f64).sqrt())?;
                if let Some(m) = &masks[i] {
                    att = att.broadcast_add(m)?;
                }
                let att = candle_nn::ops::softmax_last_dim(&att)?;
                ys.push(att.matmul(&v)?.transpose(1, 2)?.reshape((1, s, heads * hd))?);
            }
            let y = if b == 1 { ys.pop().expect("one sequence") } else { Tensor::cat(&ys, 0)? };
            x = (x + layer.wo.forward(&y)?)?;
            let h = candle_nn::ops::rms_norm(&x, &layer.ffn_norm, self.eps)?;
            let act = (layer.gate.forward(&h)?.silu()? * layer.up.forward(&h)?)?;
            x = (x + layer.down.forward(&act)?)?;
        }
        for c in caches.iter_mut() {
            c.pos += s;
        }
        let last = x.narrow(1, s - 1, 1)?;
        let last = candle_nn::ops::rms_norm(&last, &self.norm, self.eps)?;
        Ok(self.output.forward(&last)?.squeeze(1)?)
    }
}

/// `(s, start + s)`: 0 where a position may attend, −∞ above the diagonal (offset by `start`).
fn causal_mask(s: usize, start: usize, device: &Device) -> Result<Tensor> {
    let t = start + s;
    let v: Vec<f32> =
        (0..s).flat_map(|i| (0..t).map(move |j| if j > start + i { f32::NEG_INFINITY } else { 0.0 })).collect();
    Ok(Tensor::from_vec(v, (s, t), device)?)
}

/// `(b, kv, t, d)` → `(b, kv · n, t, d)`, each key/value head shared by `n` query heads in turn.
fn repeat_kv(x: &Tensor, n: usize) -> Result<Tensor> {
    if n == 1 {
        return Ok(x.clone());
    }
    let (b, kv, t, d) = x.dims4()?;
    Ok(x.unsqueeze(2)?.expand((b, kv, n, t, d))?.reshape((b, kv * n, t, d))?)
}
