//! The llama decoder (SmolLM2's architecture: RMSNorm, interleaved rotary embeddings, grouped-query
//! attention, SwiGLU) over candle-core tensors, with every projection held twice. Prefill multiplies
//! many tokens at once, where f32 weights (dequantized from the GGUF's own tensors) give a real GEMM;
//! decoding multiplies one token per sequence, where our integer kernel (`q8.rs`) reads the file's
//! own Q4_1/Q4_0/Q8_0 blocks against quantized activations, as llama.cpp does: 116–131 tokens/s here
//! against llama.cpp's 100, every greedy token equal to its server's on the study prompt.
//!
//! Several sequences decode together ([`Llama::forward_batch`]): their next tokens are the rows of
//! each projection, so a weight vector is read once per step for all of them; attention runs per
//! sequence over its own [`Cache`] on plain slices. Every row is computed by the same instructions
//! as a sequence alone (row-wise norms, per-row products, per-head attention), so a sequence's
//! tokens do not depend on which others share its batch.

use candle_core::quantized::{gguf_file, GgmlDType, QTensor};
use candle_core::{DType, Device, Tensor};
use doc2ci_errors::{fail, Error, Result, Within};

use rayon::prelude::*;

use crate::q8::{Blocks, Q8Matrix};
use std::io::{Read, Seek};

/// The first chunk of a prompt's prefill (see [`Llama::prefill`]); each next chunk ends at twice
/// the position the last one ended at (64, 128, 256, 512), then every [`LONGEST_CHUNK`]. Prompts
/// share their start (the study's system prompt and instructions, about 75 tokens; few-shot
/// examples), and a prefix is reused in whole chunks; doubling keeps the chunks few, since each
/// chunk's GEMMs pack every weight anew.
pub const PREFILL_CHUNK: usize = 64;
/// Longer chunks would hold a `(heads, chunk, positions)` score matrix of hundreds of MB on a
/// long prompt (a 3,136-token description: 163 tokens/s in chunks up to 2,048).
const LONGEST_CHUNK: usize = 512;

/// The last chunk boundary at or before position `n`: where a reused prefix may end.
pub fn prefill_boundary(n: usize) -> usize {
    match n {
        _ if n < PREFILL_CHUNK => 0,
        _ if n < LONGEST_CHUNK => PREFILL_CHUNK << (n / PREFILL_CHUNK).ilog2(),
        _ => n / LONGEST_CHUNK * LONGEST_CHUNK,
    }
}

/// The first chunk boundary after position `pos`.
fn next_boundary(pos: usize) -> usize {
    match pos {
        _ if pos < PREFILL_CHUNK => PREFILL_CHUNK,
        _ if pos < LONGEST_CHUNK => 2 * prefill_boundary(pos),
        _ => prefill_boundary(pos) + LONGEST_CHUNK,
    }
}

/// `(1, s, in)` through an f32 `(out, in)` matrix: a prompt's projection, a real GEMM.
fn dense_forward(w: &Tensor, x: &Tensor) -> Result<Tensor> {
    let b = x.dim(0)?;
    Ok(x.matmul(&w.broadcast_left(b)?.t()?)?)
}

/// `(b, 1, k)` through a Q8_0 matrix: `(b, 1, n)`.
fn q8_forward(m: &Q8Matrix, x: &Tensor) -> Result<Tensor> {
    let b = x.dim(0)?;
    let out = m.matmul(&x.flatten_all()?.to_vec1::<f32>()?, b);
    Ok(Tensor::from_vec(out, (b, 1, m.rows()), x.device())?)
}

/// A GGUF tensor as a decoding matrix: Q8_0, Q4_0 and Q4_1 blocks as they are, any other type
/// re-quantized to Q8_0.
fn q8_matrix(q: &QTensor, device: &Device) -> Result<Q8Matrix> {
    let (n, k) = q.shape().dims2()?;
    let kind = match q.dtype() {
        GgmlDType::Q8_0 => Blocks::Q8_0,
        GgmlDType::Q4_0 => Blocks::Q4_0,
        GgmlDType::Q4_1 => Blocks::Q4_1,
        _ => {
            let q8 = QTensor::quantize(&q.dequantize(device)?, GgmlDType::Q8_0)?;
            return Q8Matrix::from_blocks(Blocks::Q8_0, &q8.data()?, n, k);
        }
    };
    Q8Matrix::from_blocks(kind, &q.data()?, n, k)
}

/// A block's weights twice: f32 `(out, in)` tensors for a prompt, the file's blocks for decoding,
/// where projections that read the same input are stacked (q, k, v; gate, up) so a step makes one
/// pass over the cores for each.
struct Layer {
    attn_norm: Tensor,
    wq: Tensor,
    wk: Tensor,
    wv: Tensor,
    wo: Tensor,
    ffn_norm: Tensor,
    gate: Tensor,
    up: Tensor,
    down: Tensor,
    /// The norms' weights as slices, for decoding.
    attn_norm_v: Vec<f32>,
    ffn_norm_v: Vec<f32>,
    qkv_q: Q8Matrix,
    wo_q: Q8Matrix,
    gate_up_q: Q8Matrix,
    down_q: Q8Matrix,
}

/// One sequence's keys (rotated) and values per layer, each `(kv_heads, capacity, head_dim)` f32,
/// and how many positions they hold. Grows by doubling, so a token costs no copy of the past.
#[derive(Default)]
pub struct Cache {
    layers: Vec<(Vec<f32>, Vec<f32>)>,
    cap: usize,
    kv_heads: usize,
    hd: usize,
    pub pos: usize,
}

impl Cache {
    /// Room for `need` positions in each of `layers` layers.
    fn reserve(&mut self, layers: usize, kv_heads: usize, hd: usize, need: usize) {
        if self.layers.len() == layers && self.cap >= need {
            return;
        }
        let (old, cap) = (self.cap, need.max(2 * self.cap).max(64));
        self.layers.resize(layers, (Vec::new(), Vec::new()));
        for (k, v) in self.layers.iter_mut() {
            for buf in [k, v] {
                let mut grown = vec![0f32; kv_heads * cap * hd];
                if !buf.is_empty() {
                    for h in 0..kv_heads {
                        grown[h * cap * hd..(h * cap + old) * hd]
                            .copy_from_slice(&buf[h * old * hd..(h + 1) * old * hd]);
                    }
                }
                *buf = grown;
            }
        }
        (self.cap, self.kv_heads, self.hd) = (cap, kv_heads, hd);
    }

    /// `s` positions from `pos`; `k` and `v` are `(kv_heads, s, head_dim)`.
    fn write(&mut self, l: usize, pos: usize, k: &[f32], v: &[f32], s: usize) {
        let (cap, hd) = (self.cap, self.hd);
        let (kb, vb) = &mut self.layers[l];
        for h in 0..self.kv_heads {
            let (dst, src) = ((h * cap + pos) * hd, h * s * hd);
            kb[dst..dst + s * hd].copy_from_slice(&k[src..src + s * hd]);
            vb[dst..dst + s * hd].copy_from_slice(&v[src..src + s * hd]);
        }
    }

    /// A cache holding this one's first `n` positions (a prompt prefix another prompt shares).
    pub fn prefix(&self, n: usize) -> Cache {
        let n = n.min(self.pos);
        let mut c = Cache::default();
        if n == 0 {
            return c;
        }
        c.reserve(self.layers.len(), self.kv_heads, self.hd, n);
        for l in 0..self.layers.len() {
            for h in 0..self.kv_heads {
                let (k, v) = self.head(l, h);
                let (kc, vc) = &mut c.layers[l];
                let at = h * c.cap * self.hd;
                kc[at..at + n * self.hd].copy_from_slice(&k[..n * self.hd]);
                vc[at..at + n * self.hd].copy_from_slice(&v[..n * self.hd]);
            }
        }
        c.pos = n;
        c
    }

    /// Keys and values of key/value head `h` in layer `l`, one row of `head_dim` per position.
    fn head(&self, l: usize, h: usize) -> (&[f32], &[f32]) {
        let (k, v) = &self.layers[l];
        let r = h * self.cap * self.hd..(h + 1) * self.cap * self.hd;
        (&k[r.clone()], &v[r])
    }
}

/// What the layers leave: a decoding step's logits, or a prefill's hidden states `(1, s, dim)`.
enum Hidden {
    Logits(Tensor),
    States(Tensor),
}

pub struct Llama {
    embeddings: Tensor,
    layers: Vec<Layer>,
    norm: Tensor,
    norm_v: Vec<f32>,
    /// Only the last position's logits are ever computed: one token per sequence, the quantized path.
    output: Q8Matrix,
    heads: usize,
    kv_heads: usize,
    head_dim: usize,
    eps: f32,
    cos: Tensor,
    sin: Tensor,
    /// The same tables as flat rows of `head_dim / 2`, for decoding on slices.
    cos_t: Vec<f32>,
    sin_t: Vec<f32>,
    /// Positions the rotary tables cover.
    pub context: usize,
}

fn meta_u32(ct: &gguf_file::Content, k: &str) -> Result<usize> {
    Ok(ct
        .metadata
        .get(k)
        .ok_or_else(|| Error::Unsupported(format!("GGUF has no {k}")))?
        .to_u32()
        .within(|| k.to_string())? as usize)
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
            fail!(Unsupported, "architecture {arch:?}: the embedded model runs llama-architecture GGUFs only");
        }
        let heads = meta_u32(ct, "llama.attention.head_count")?;
        let kv_heads = meta_u32(ct, "llama.attention.head_count_kv").unwrap_or(heads);
        let blocks = meta_u32(ct, "llama.block_count")?;
        let dim = meta_u32(ct, "llama.embedding_length")?;
        let head_dim = dim / heads;
        let rope_dim = meta_u32(ct, "llama.rope.dimension_count").unwrap_or(head_dim);
        if rope_dim != head_dim || heads % kv_heads != 0 {
            fail!(
                Unsupported,
                "unsupported llama shape: rope over {rope_dim} of {head_dim} dimensions, {heads} heads / {kv_heads}"
            );
        }
        let eps = meta_f32(ct, "llama.attention.layer_norm_rms_epsilon").unwrap_or(1e-5);
        let base = meta_f32(ct, "llama.rope.freq_base").unwrap_or(10_000.0);
        let context = meta_u32(ct, "llama.context_length").unwrap_or(4096).min(8192);

        let dense = |r: &mut R1, name: &str| -> Result<Tensor> {
            ct.tensor(r, name, device).and_then(|q| q.dequantize(device)).within(|| format!("GGUF tensor {name}"))
        };
        // Decoding reads the file's own blocks where the kernel takes them (Q8_0, Q4_0, Q4_1),
        // else the Q8_0 copy.
        let quantized = |r: &mut R1, qr: &mut R2, name: &str| -> Result<Q8Matrix> {
            let q = ct.tensor(r, name, device).within(|| format!("GGUF tensor {name}"))?;
            let m = match q.dtype() {
                GgmlDType::Q8_0 | GgmlDType::Q4_0 | GgmlDType::Q4_1 => q8_matrix(&q, device),
                _ => q8_matrix(&qct.tensor(qr, name, device)?, device),
            };
            m.within(|| format!("GGUF tensor {name}"))
        };

        let embeddings = dense(r, "token_embd.weight")?;
        let norm = dense(r, "output_norm.weight")?;
        let norm_v = norm.to_vec1::<f32>()?;
        let out_name =
            if ct.tensor_infos.contains_key("output.weight") { "output.weight" } else { "token_embd.weight" };
        let output = quantized(r, qr, out_name)?;
        let mut layers = Vec::with_capacity(blocks);
        for i in 0..blocks {
            let p = format!("blk.{i}");
            let name = |t: &str| format!("{p}.{t}.weight");
            let mut q8 = |t: &str| quantized(r, qr, &name(t));
            let qkv_q = Q8Matrix::stack(vec![q8("attn_q")?, q8("attn_k")?, q8("attn_v")?])?;
            let gate_up_q = Q8Matrix::stack(vec![q8("ffn_gate")?, q8("ffn_up")?])?;
            let (wo_q, down_q) = (q8("attn_output")?, q8("ffn_down")?);
            let attn_norm = dense(r, &name("attn_norm"))?;
            let ffn_norm = dense(r, &name("ffn_norm"))?;
            layers.push(Layer {
                attn_norm_v: attn_norm.to_vec1()?,
                ffn_norm_v: ffn_norm.to_vec1()?,
                attn_norm,
                ffn_norm,
                wq: dense(r, &name("attn_q"))?,
                wk: dense(r, &name("attn_k"))?,
                wv: dense(r, &name("attn_v"))?,
                wo: dense(r, &name("attn_output"))?,
                gate: dense(r, &name("ffn_gate"))?,
                up: dense(r, &name("ffn_up"))?,
                down: dense(r, &name("ffn_down"))?,
                qkv_q,
                wo_q,
                gate_up_q,
                down_q,
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
            norm_v,
            output,
            heads,
            kv_heads,
            head_dim,
            eps,
            cos: angles.cos()?,
            sin: angles.sin()?,
            cos_t: angles.cos()?.flatten_all()?.to_vec1()?,
            sin_t: angles.sin()?.flatten_all()?.to_vec1()?,
            context,
        })
    }

    /// `tokens` of one sequence at positions `cache.pos..`, after what its cache holds. Returns the
    /// logits of the last position, `(vocab)`.
    pub fn forward(&self, tokens: &[u32], cache: &mut Cache) -> Result<Tensor> {
        let x = Tensor::new(tokens, &Device::Cpu)?.unsqueeze(0)?;
        Ok(self.run(&x, &mut [cache], false)?.squeeze(0)?)
    }

    /// A prompt's tokens (or what follows the prefix its cache holds) through the f32 prefill,
    /// even a single one: its logits are the ones the whole prompt prefilled at once gives.
    ///
    /// Positions go through in chunks that end at fixed positions ([`prefill_boundary`]), whatever
    /// the cache held before: a GEMM's sums depend on how many rows it multiplies, so a prompt's
    /// logits are then the same bit for bit whether a shared prefix (a whole number of chunks)
    /// came from a cache or was prefilled with it.
    pub fn prefill(&self, tokens: &[u32], cache: &mut Cache) -> Result<Tensor> {
        let mut rest = tokens;
        loop {
            let room = next_boundary(cache.pos) - cache.pos;
            let (now, later) = rest.split_at(room.min(rest.len()));
            let x = Tensor::new(now, &Device::Cpu)?.unsqueeze(0)?;
            let logits = self.run(&x, &mut [&mut *cache], true)?.squeeze(0)?;
            if later.is_empty() {
                return Ok(logits);
            }
            rest = later;
        }
    }

    /// One next token for each sequence, `tokens[i]` at position `caches[i].pos`. Returns `(b, vocab)`.
    pub fn forward_batch(&self, tokens: &[u32], caches: &mut [&mut Cache]) -> Result<Tensor> {
        if tokens.len() != caches.len() {
            fail!(Request, "{} tokens for {} sequences", tokens.len(), caches.len());
        }
        let x = Tensor::new(tokens, &Device::Cpu)?.unsqueeze(1)?;
        self.run(&x, caches, false)
    }

    /// The logits after every one of `tokens` (a whole text, teacher forcing), `(s, vocab)`: the
    /// same chunks as [`Self::prefill`], each keeping all its positions.
    pub fn prefill_all(&self, tokens: &[u32], cache: &mut Cache) -> Result<Tensor> {
        let mut rest = tokens;
        let mut parts = Vec::new();
        while !rest.is_empty() {
            let room = next_boundary(cache.pos) - cache.pos;
            let (now, later) = rest.split_at(room.min(rest.len()));
            let x = Tensor::new(now, &Device::Cpu)?.unsqueeze(0)?;
            parts.push(self.run_all(&x, cache)?);
            rest = later;
        }
        Ok(Tensor::cat(&parts, 0)?)
    }

    /// `tokens`: `(b, s)` ids, one row per cache; several rows only with `s == 1`.
    fn run(&self, tokens: &Tensor, caches: &mut [&mut Cache], prompt: bool) -> Result<Tensor> {
        let x = self.hidden(tokens, caches, prompt)?;
        let x = match x {
            Hidden::Logits(l) => return Ok(l),
            Hidden::States(x) => x,
        };
        let s = x.dim(1)?;
        let last = x.narrow(1, s - 1, 1)?;
        let last = candle_nn::ops::rms_norm(&last, &self.norm, self.eps)?;
        Ok(q8_forward(&self.output, &last)?.squeeze(1)?)
    }

    /// One sequence's `(1, s)` tokens through the prefill, the logits of every position.
    fn run_all(&self, tokens: &Tensor, cache: &mut Cache) -> Result<Tensor> {
        let Hidden::States(x) = self.hidden(tokens, &mut [cache], true)? else {
            fail!(Request, "a prefill gave logits, not states");
        };
        let x = candle_nn::ops::rms_norm(&x.squeeze(0)?.unsqueeze(1)?, &self.norm, self.eps)?;
        Ok(q8_forward(&self.output, &x)?.squeeze(1)?)
    }

    fn hidden(&self, tokens: &Tensor, caches: &mut [&mut Cache], prompt: bool) -> Result<Hidden> {
        let (b, s) = tokens.dims2()?;
        if b != 1 && s != 1 {
            fail!(Request, "a batch of {b} sequences takes one token each, not {s}");
        }
        let (kv_heads, hd) = (self.kv_heads, self.head_dim);
        for c in caches.iter_mut() {
            if c.pos + s > self.context {
                fail!(Request, "position {} is past the model's context of {}", c.pos + s, self.context);
            }
            c.reserve(self.layers.len(), kv_heads, hd, c.pos + s);
        }
        let dim = self.embeddings.dim(1)?;
        let x = self.embeddings.index_select(&tokens.flatten_all()?, 0)?;
        if s == 1 && !prompt {
            return Ok(Hidden::Logits(self.decode(x.flatten_all()?.to_vec1()?, caches)?));
        }
        let mut x = x.reshape((b, s, dim))?;
        for (l, layer) in self.layers.iter().enumerate() {
            let h = candle_nn::ops::rms_norm(&x, &layer.attn_norm, self.eps)?;
            let (q, k, v) =
                (dense_forward(&layer.wq, &h)?, dense_forward(&layer.wk, &h)?, dense_forward(&layer.wv, &h)?);
            let y = self.prefill_attention(l, &q, &k, &v, caches[0])?;
            x = (x + dense_forward(&layer.wo, &y)?)?;
            let h = candle_nn::ops::rms_norm(&x, &layer.ffn_norm, self.eps)?;
            let act = (dense_forward(&layer.gate, &h)?.silu()? * dense_forward(&layer.up, &h)?)?;
            x = (x + dense_forward(&layer.down, &act)?)?;
        }
        caches[0].pos += s;
        Ok(Hidden::States(x))
    }

    /// One token per sequence on plain slices, `x` holding their embeddings row by row: no tensor
    /// op, so no thread pool wakes up but the kernel's. Norms, SiLU and sums are candle's own
    /// formulas in candle's order, so a step gives what candle's ops gave, bit for bit.
    fn decode(&self, mut x: Vec<f32>, caches: &mut [&mut Cache]) -> Result<Tensor> {
        let b = caches.len();
        let (q_n, kv_n) = (self.heads * self.head_dim, self.kv_heads * self.head_dim);
        for (l, layer) in self.layers.iter().enumerate() {
            let h = rms_norm_rows(&x, &layer.attn_norm_v, self.eps);
            let qkv = layer.qkv_q.matmul(&h, b);
            let row = q_n + 2 * kv_n;
            let part = |from: usize, n: usize| -> Vec<f32> {
                qkv.chunks_exact(row).flat_map(|r| r[from..from + n].iter().copied()).collect()
            };
            let y = self.attention(l, part(0, q_n), part(q_n, kv_n), &part(q_n + kv_n, kv_n), caches);
            add_rows(&mut x, &layer.wo_q.matmul(&y, b));
            let h = rms_norm_rows(&x, &layer.ffn_norm_v, self.eps);
            let gu = layer.gate_up_q.matmul(&h, b);
            let hidden = gu.len() / b / 2;
            let act: Vec<f32> = gu
                .chunks_exact(2 * hidden)
                .flat_map(|r| r[..hidden].iter().zip(&r[hidden..]).map(|(&g, &u)| silu(g) * u))
                .collect();
            add_rows(&mut x, &layer.down_q.matmul(&act, b));
        }
        for c in caches.iter_mut() {
            c.pos += 1;
        }
        let h = rms_norm_rows(&x, &self.norm_v, self.eps);
        Ok(Tensor::from_vec(self.output.matmul(&h, b), (b, self.output.rows()), &Device::Cpu)?)
    }

    /// A prompt's causal attention on candle tensors (one GEMM per head group); its keys and
    /// values then go into the sequence's cache. The cache may already hold a prefix of the
    /// prompt (`c.pos` positions, [`Cache::prefix`]): the new tokens then attend to it as well.
    fn prefill_attention(&self, l: usize, q: &Tensor, k: &Tensor, v: &Tensor, c: &mut Cache) -> Result<Tensor> {
        let (heads, kv_heads, hd) = (self.heads, self.kv_heads, self.head_dim);
        let (s, start) = (q.dim(1)?, c.pos);
        let split =
            |t: &Tensor, n: usize| -> Result<Tensor> { Ok(t.reshape((1, s, n, hd))?.transpose(1, 2)?.contiguous()?) };
        let (cos, sin) = (self.cos.narrow(0, start, s)?, self.sin.narrow(0, start, s)?);
        let q = candle_nn::rotary_emb::rope_i(&split(q, heads)?, &cos, &sin)?;
        let mut k = candle_nn::rotary_emb::rope_i(&split(k, kv_heads)?, &cos, &sin)?;
        let mut v = split(v, kv_heads)?;
        c.write(l, start, &k.flatten_all()?.to_vec1::<f32>()?, &v.flatten_all()?.to_vec1::<f32>()?, s);
        if start > 0 {
            // Every position so far, as the cache holds them: `(1, kv_heads, start + s, hd)`.
            let t = start + s;
            let (mut kk, mut vv) = (Vec::with_capacity(kv_heads * t * hd), Vec::with_capacity(kv_heads * t * hd));
            for h in 0..kv_heads {
                let (kh, vh) = c.head(l, h);
                kk.extend_from_slice(&kh[..t * hd]);
                vv.extend_from_slice(&vh[..t * hd]);
            }
            k = Tensor::from_vec(kk, (1, kv_heads, t, hd), q.device())?;
            v = Tensor::from_vec(vv, (1, kv_heads, t, hd), q.device())?;
        }
        let k = repeat_kv(&k, heads / kv_heads)?;
        let v = repeat_kv(&v, heads / kv_heads)?;
        let att = (q.matmul(&k.t()?)? / (hd as f64).sqrt())?.broadcast_add(&causal_mask(s, start, q.device())?)?;
        let att = candle_nn::ops::softmax_last_dim(&att)?;
        Ok(att.matmul(&v)?.transpose(1, 2)?.reshape((1, s, heads * hd))?)
    }

    /// One new token per sequence attending to its own cache, on plain slices: per (sequence,
    /// head) a fixed order of operations, so neither the batch nor the threads change a result.
    fn attention(&self, l: usize, mut q: Vec<f32>, mut k: Vec<f32>, v: &[f32], caches: &mut [&mut Cache]) -> Vec<f32> {
        let (heads, kv_heads, hd) = (self.heads, self.kv_heads, self.head_dim);
        let b = caches.len();
        let mut y = vec![0f32; b * heads * hd];
        for (i, c) in caches.iter_mut().enumerate() {
            let pos = c.pos;
            let (cos, sin) =
                (&self.cos_t[pos * hd / 2..(pos + 1) * hd / 2], &self.sin_t[pos * hd / 2..(pos + 1) * hd / 2]);
            let qi = &mut q[i * heads * hd..(i + 1) * heads * hd];
            qi.chunks_exact_mut(hd).for_each(|h| rope(h, cos, sin));
            let ki = &mut k[i * kv_heads * hd..(i + 1) * kv_heads * hd];
            ki.chunks_exact_mut(hd).for_each(|h| rope(h, cos, sin));
            c.write(l, pos, ki, &v[i * kv_heads * hd..(i + 1) * kv_heads * hd], 1);
        }
        let group = heads / kv_heads;
        let scale = (hd as f32).sqrt();
        let caches: &[&mut Cache] = caches;
        y.par_chunks_mut(hd).enumerate().for_each(|(j, out)| {
            let (i, h) = (j / heads, j % heads);
            let c = &caches[i];
            let t = c.pos + 1;
            let (keys, values) = c.head(l, h / group);
            let qh = &q[j * hd..(j + 1) * hd];
            let mut w: Vec<f32> = (0..t).map(|p| dot(qh, &keys[p * hd..(p + 1) * hd]) / scale).collect();
            let max = w.iter().copied().fold(f32::NEG_INFINITY, f32::max);
            let mut sum = 0f32;
            for x in w.iter_mut() {
                *x = exp_neg(*x - max);
            }
            for x in &w {
                sum += x;
            }
            for (p, x) in w.iter().enumerate() {
                let p_v = &values[p * hd..(p + 1) * hd];
                let wp = x / sum;
                out.iter_mut().zip(p_v).for_each(|(o, vv)| *o += wp * vv);
            }
        });
        y
    }
}

/// candle's RMSNorm row by row (`candle_nn::ops::rms_norm` on up to 32 rows, sequentially).
fn rms_norm_rows(x: &[f32], alpha: &[f32], eps: f32) -> Vec<f32> {
    let n = alpha.len();
    let mut out = vec![0f32; x.len()];
    for (src, dst) in x.chunks_exact(n).zip(out.chunks_exact_mut(n)) {
        let sum2 = src.iter().map(|&v| v * v).sum::<f32>();
        let m = (sum2 / n as f32 + eps).sqrt();
        for ((d, s), a) in dst.iter_mut().zip(src).zip(alpha) {
            *d = *s / m * *a;
        }
    }
    out
}

/// candle's SiLU on f32.
fn silu(v: f32) -> f32 {
    v / (1.0 + (-v).exp())
}

fn add_rows(x: &mut [f32], y: &[f32]) {
    x.iter_mut().zip(y).for_each(|(a, b)| *a += b);
}

/// Interleaved rotary embedding of one head at one position (candle's `rope_i`).
fn rope(x: &mut [f32], cos: &[f32], sin: &[f32]) {
    for (i, (c, s)) in cos.iter().zip(sin).enumerate() {
        let (a, b) = (x[2 * i], x[2 * i + 1]);
        x[2 * i] = a * c - b * s;
        x[2 * i + 1] = a * s + b * c;
    }
}

/// `e^x` for `x ≤ 0` (softmax scores less their maximum), Cephes' `expf`: `2^n · p(r)` with
/// `r = x − n·ln 2` and a degree-6 polynomial, within 2 ulp. Plain arithmetic the compiler
/// vectorises; libm's `expf` per score was most of a decoding step's attention.
fn exp_neg(x: f32) -> f32 {
    if x < -87.0 {
        return 0.0;
    }
    // Round to nearest by adding and removing 1.5 · 2^23.
    let n = (x * std::f32::consts::LOG2_E + 12_582_912.0) - 12_582_912.0;
    let r = x - n * 0.693_359_4 - n * -2.121_944_4e-4;
    let z = r * r;
    let p = (((((1.987_569_1e-4 * r + 1.398_199_9e-3) * r + 8.333_452e-3) * r + 4.166_579_6e-2) * r + 0.166_666_65)
        * r
        + 0.5)
        * z
        + r
        + 1.0;
    p * f32::from_bits(((n as i32 + 127) as u32) << 23)
}

/// A dot product in 16 independent lanes (which the compiler vectorises), summed in lane order.
fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut acc = [0f32; 16];
    let (ca, cb) = (a.chunks_exact(16), b.chunks_exact(16));
    let (ra, rb) = (ca.remainder(), cb.remainder());
    for (x, y) in ca.zip(cb) {
        for l in 0..16 {
            acc[l] += x[l] * y[l];
        }
    }
    let tail: f32 = ra.iter().zip(rb).map(|(x, y)| x * y).sum();
    acc.iter().sum::<f32>() + tail
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
