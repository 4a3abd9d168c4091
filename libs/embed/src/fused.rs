//! BERT encoder over packed rows: the texts of a batch are stacked token after token with no padding, so
//! every dense layer multiplies exactly the real tokens; attention runs per text and per head on strided
//! views of the fused QKV projection, so it needs no mask either.

use std::collections::HashMap;

use candle_core::{DType, Tensor};
use doc2ci_errors::{fail, Error, Result};
use gemm::Parallelism;
use rayon::prelude::*;

use crate::simd;

pub struct Config {
    pub hidden: usize,
    pub heads: usize,
    pub layers: usize,
    pub intermediate: usize,
    pub max_positions: usize,
    pub eps: f32,
}

impl Config {
    pub fn from_json(text: &str) -> Result<Self> {
        let v: serde_json::Value = serde_json::from_str(text)?;
        let get = |k: &str| -> Result<usize> {
            v.get(k)
                .and_then(|x| x.as_u64())
                .map(|x| x as usize)
                .ok_or_else(|| Error::Unsupported(format!("config lacks {k}")))
        };
        let act = v.get("hidden_act").and_then(|x| x.as_str()).unwrap_or("gelu");
        if act != "gelu" {
            fail!(Unsupported, "hidden_act {act:?} is not supported (only BERT's erf GELU)");
        }
        let pos = v.get("position_embedding_type").and_then(|x| x.as_str()).unwrap_or("absolute");
        if pos != "absolute" {
            fail!(Unsupported, "position_embedding_type {pos:?} is not supported");
        }
        let cfg = Config {
            hidden: get("hidden_size")?,
            heads: get("num_attention_heads")?,
            layers: get("num_hidden_layers")?,
            intermediate: get("intermediate_size")?,
            max_positions: get("max_position_embeddings")?,
            eps: v.get("layer_norm_eps").and_then(|x| x.as_f64()).unwrap_or(1e-12) as f32,
        };
        if cfg.heads == 0 || !cfg.hidden.is_multiple_of(cfg.heads) {
            fail!(Unsupported, "hidden_size {} is not a multiple of num_attention_heads {}", cfg.hidden, cfg.heads);
        }
        Ok(cfg)
    }
}

struct Layer {
    wqkv: Vec<f32>, // (3h, h): query, key and value projections stacked, one gemm for all three
    bqkv: Vec<f32>,
    wo: Vec<f32>,
    bo: Vec<f32>,
    ln1_g: Vec<f32>,
    ln1_b: Vec<f32>,
    wi: Vec<f32>,
    bi: Vec<f32>,
    wo2: Vec<f32>,
    bo2: Vec<f32>,
    ln2_g: Vec<f32>,
    ln2_b: Vec<f32>,
}

pub struct Encoder {
    h: usize,
    heads: usize,
    inter: usize,
    eps: f32,
    word: Vec<f32>,
    pos: Vec<f32>,
    typ0: Vec<f32>,
    ln_g: Vec<f32>,
    ln_b: Vec<f32>,
    layers: Vec<Layer>,
}

/// Activation buffers reused across batches: fresh multi-megabyte allocations per op cost page faults
/// (SPEC §9 measured ~10% of candle's time there).
#[derive(Default)]
struct Workspace {
    x: Vec<f32>,
    qkv: Vec<f32>,
    ctx: Vec<f32>,
    tmp: Vec<f32>,
    inter: Vec<f32>,
    scores: Vec<f32>,
}

fn grow(v: &mut Vec<f32>, n: usize) -> &mut [f32] {
    if v.len() < n {
        v.resize(n, 0.0);
    }
    &mut v[..n]
}

impl Encoder {
    pub fn from_tensors(cfg: &Config, t: &HashMap<String, Tensor>) -> Result<Self> {
        let (h, i) = (cfg.hidden, cfg.intermediate);
        let get = |name: &str, shape: &[usize]| -> Result<Vec<f32>> {
            let tensor = t
                .get(name)
                .or_else(|| t.get(&format!("bert.{name}")))
                .ok_or_else(|| Error::Unsupported(format!("weights lack {name}")))?;
            if tensor.dims() != shape {
                fail!(Unsupported, "weight {name} has shape {:?}, expected {shape:?}", tensor.dims());
            }
            Ok(tensor.to_dtype(DType::F32)?.flatten_all()?.to_vec1::<f32>()?)
        };
        let word = get("embeddings.word_embeddings.weight", &[t_rows(t, "embeddings.word_embeddings.weight")?, h])?;
        let pos = get("embeddings.position_embeddings.weight", &[cfg.max_positions, h])?;
        let types = get(
            "embeddings.token_type_embeddings.weight",
            &[t_rows(t, "embeddings.token_type_embeddings.weight")?, h],
        )?;
        let mut layers = Vec::with_capacity(cfg.layers);
        for l in 0..cfg.layers {
            let p = format!("encoder.layer.{l}");
            let mut wqkv = get(&format!("{p}.attention.self.query.weight"), &[h, h])?;
            wqkv.extend(get(&format!("{p}.attention.self.key.weight"), &[h, h])?);
            wqkv.extend(get(&format!("{p}.attention.self.value.weight"), &[h, h])?);
            let mut bqkv = get(&format!("{p}.attention.self.query.bias"), &[h])?;
            bqkv.extend(get(&format!("{p}.attention.self.key.bias"), &[h])?);
            bqkv.extend(get(&format!("{p}.attention.self.value.bias"), &[h])?);
            layers.push(Layer {
                wqkv,
                bqkv,
                wo: get(&format!("{p}.attention.output.dense.weight"), &[h, h])?,
                bo: get(&format!("{p}.attention.output.dense.bias"), &[h])?,
                ln1_g: get(&format!("{p}.attention.output.LayerNorm.weight"), &[h])?,
                ln1_b: get(&format!("{p}.attention.output.LayerNorm.bias"), &[h])?,
                wi: get(&format!("{p}.intermediate.dense.weight"), &[i, h])?,
                bi: get(&format!("{p}.intermediate.dense.bias"), &[i])?,
                wo2: get(&format!("{p}.output.dense.weight"), &[h, i])?,
                bo2: get(&format!("{p}.output.dense.bias"), &[h])?,
                ln2_g: get(&format!("{p}.output.LayerNorm.weight"), &[h])?,
                ln2_b: get(&format!("{p}.output.LayerNorm.bias"), &[h])?,
            });
        }
        Ok(Encoder {
            h,
            heads: cfg.heads,
            inter: i,
            eps: cfg.eps,
            word,
            pos,
            typ0: types[..h].to_vec(),
            ln_g: get("embeddings.LayerNorm.weight", &[h])?,
            ln_b: get("embeddings.LayerNorm.bias", &[h])?,
            layers,
        })
    }

    /// Embeds each batch (lists of indices into `ids`); results follow `batches`.
    ///
    /// With enough batches, each worker runs whole batches with single-threaded gemm (no synchronisation
    /// inside a batch, and the element-wise work is parallel too); with few, batches run one after another
    /// and gemm itself uses the threads.
    pub fn embed_batches(&self, ids: &[Vec<u32>], batches: &[Vec<usize>], threads: usize) -> Vec<Vec<Vec<f32>>> {
        let run = |ws: &mut Workspace, b: &Vec<usize>, par: Parallelism| {
            let seqs: Vec<&[u32]> = b.iter().map(|&i| ids[i].as_slice()).collect();
            self.forward(ws, &seqs, par)
        };
        if threads > 1 && batches.len() >= 2 * threads {
            batches
                .par_iter()
                .with_max_len(1)
                .map_init(Workspace::default, |ws, b| run(ws, b, Parallelism::None))
                .collect()
        } else {
            let par = if threads > 1 { Parallelism::Rayon(threads) } else { Parallelism::None };
            let mut ws = Workspace::default();
            batches.iter().map(|b| run(&mut ws, b, par)).collect()
        }
    }

    fn forward(&self, ws: &mut Workspace, seqs: &[&[u32]], par: Parallelism) -> Vec<Vec<f32>> {
        let h = self.h;
        let t: usize = seqs.iter().map(|s| s.len()).sum();
        let vocab = self.word.len() / h;
        let x = grow(&mut ws.x, t * h);
        let mut row = 0;
        for s in seqs {
            for (p, &id) in s.iter().enumerate() {
                // Out-of-vocabulary ids cannot come from the model's own tokenizer; map them to [UNK]'s slot 100
                // rather than read out of bounds.
                let id = if (id as usize) < vocab { id as usize } else { 100.min(vocab - 1) };
                let dst = &mut x[row * h..(row + 1) * h];
                let w = &self.word[id * h..(id + 1) * h];
                let pe = &self.pos[p * h..(p + 1) * h];
                for k in 0..h {
                    dst[k] = w[k] + pe[k] + self.typ0[k];
                }
                row += 1;
            }
        }
        simd::layernorm(x, &self.ln_g, &self.ln_b, self.eps);
        for layer in &self.layers {
            self.layer(ws, layer, seqs, t, par);
        }
        let x = &ws.x[..t * h];
        let mut out = Vec::with_capacity(seqs.len());
        let mut off = 0;
        for s in seqs {
            let n = s.len();
            let mut v = vec![0f32; h];
            for r in off..off + n {
                for (a, b) in v.iter_mut().zip(&x[r * h..(r + 1) * h]) {
                    *a += b;
                }
            }
            let inv_n = 1.0 / n.max(1) as f32;
            v.iter_mut().for_each(|a| *a *= inv_n);
            let norm = v.iter().map(|a| a * a).sum::<f32>().sqrt().max(1e-12);
            v.iter_mut().for_each(|a| *a /= norm);
            out.push(v);
            off += n;
        }
        out
    }

    fn layer(&self, ws: &mut Workspace, l: &Layer, seqs: &[&[u32]], t: usize, par: Parallelism) {
        let (h, i) = (self.h, self.inter);
        let h3 = 3 * h;
        grow(&mut ws.qkv, t * h3);
        grow(&mut ws.ctx, t * h);
        grow(&mut ws.tmp, t * h);
        grow(&mut ws.inter, t * i);
        let x = &mut ws.x[..t * h];
        let qkv = &mut ws.qkv[..t * h3];
        matmul_t(qkv, x, &l.wqkv, t, h3, h, par);
        simd::add_bias(qkv, &l.bqkv);

        let d = h / self.heads;
        let scale = 1.0 / (d as f32).sqrt();
        let ctx = &mut ws.ctx[..t * h];
        let mut off = 0;
        for s in seqs {
            let n = s.len();
            let scores = grow(&mut ws.scores, n * n);
            for head in 0..self.heads {
                let q = off * h3 + head * d;
                let k = q + h;
                let v = q + 2 * h;
                // SAFETY: every index stays inside `qkv`, `scores` and `ctx`: rows off..off+n of width h3/h,
                // columns head*d..head*d+d, and an n×n score block.
                unsafe {
                    gemm_panels(
                        n,
                        n,
                        d,
                        scores.as_mut_ptr(),
                        n as isize,
                        qkv.as_ptr().add(q),
                        1,
                        h3 as isize,
                        qkv.as_ptr().add(k),
                        h3 as isize,
                        1,
                        scale,
                        Parallelism::None,
                    );
                }
                simd::softmax_rows(scores, n);
                unsafe {
                    gemm::gemm(
                        n,
                        d,
                        n,
                        ctx.as_mut_ptr().add(off * h + head * d),
                        1,
                        h as isize,
                        false,
                        scores.as_ptr(),
                        1,
                        n as isize,
                        qkv.as_ptr().add(v),
                        1,
                        h3 as isize,
                        0.0,
                        1.0,
                        false,
                        false,
                        false,
                        Parallelism::None,
                    );
                }
            }
            off += n;
        }

        let tmp = &mut ws.tmp[..t * h];
        matmul_t(tmp, ctx, &l.wo, t, h, h, par);
        simd::residual_layernorm(x, tmp, &l.bo, &l.ln1_g, &l.ln1_b, self.eps);
        let inter = &mut ws.inter[..t * i];
        matmul_t(inter, x, &l.wi, t, i, h, par);
        simd::bias_gelu(inter, &l.bi);
        matmul_t(tmp, inter, &l.wo2, t, h, i, par);
        simd::residual_layernorm(x, tmp, &l.bo2, &l.ln2_g, &l.ln2_b, self.eps);
    }
}

fn t_rows(t: &HashMap<String, Tensor>, name: &str) -> Result<usize> {
    let tensor = t
        .get(name)
        .or_else(|| t.get(&format!("bert.{name}")))
        .ok_or_else(|| Error::Unsupported(format!("weights lack {name}")))?;
    Ok(tensor.dims().first().copied().unwrap_or(0))
}

/// `out (m×n) = a (m×k) · wᵀ`, all row-major, `w` in PyTorch's (out, in) layout.
fn matmul_t(out: &mut [f32], a: &[f32], w: &[f32], m: usize, n: usize, k: usize, par: Parallelism) {
    assert!(out.len() >= m * n && a.len() >= m * k && w.len() >= n * k);
    // SAFETY: the asserted lengths cover every element the strides below address.
    unsafe {
        gemm_panels(
            m,
            n,
            k,
            out.as_mut_ptr(),
            n as isize,
            a.as_ptr(),
            1,
            k as isize,
            w.as_ptr(),
            k as isize,
            1,
            1.0,
            par,
        )
    }
}

/// Output columns per gemm call. gemm 0.19 changes strategy once the output is wider than 48 columns,
/// and on this machine's Zen 4 cores that path runs at ≈ 30 GFLOP/s against ≈ 80 for narrow panels
/// (single thread, the model's shapes); whole-model throughput was best with 16 (`bench/embed.sh`).
const PANEL: usize = 16;

/// `dst (m×n, row stride dst_rs, unit column stride) = scale · lhs (m×k) · rhs (k×n)`, overwriting dst,
/// computed panel by panel of PANEL output columns.
///
/// # Safety
/// Every element addressed by the sizes and strides must lie inside the pointed-to buffers.
#[allow(clippy::too_many_arguments)]
unsafe fn gemm_panels(
    m: usize,
    n: usize,
    k: usize,
    dst: *mut f32,
    dst_rs: isize,
    lhs: *const f32,
    lhs_cs: isize,
    lhs_rs: isize,
    rhs: *const f32,
    rhs_cs: isize,
    rhs_rs: isize,
    scale: f32,
    par: Parallelism,
) {
    let mut j = 0;
    while j < n {
        let w = PANEL.min(n - j);
        gemm::gemm(
            m,
            w,
            k,
            dst.add(j),
            1,
            dst_rs,
            false,
            lhs,
            lhs_cs,
            lhs_rs,
            rhs.offset(j as isize * rhs_cs),
            rhs_cs,
            rhs_rs,
            0.0,
            scale,
            false,
            false,
            false,
            par,
        );
        j += w;
    }
}
