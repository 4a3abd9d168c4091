//! Times `Embedder::embed` on a JSON array of texts (bench/embed.sh makes it from the real data).
//!
//! Usage: bench_embed TEXTS.json [--backend fused|candle] [--batch-tokens N] [--batch-size N] [--threads N]
//!                    [--repeat N] [--out EMB.f32]
//! Model files come from `$DOC2CI_ASSETS` or `$HOME/.cache/doc2ci/assets` (`doc2ci setup`). Prints one JSON
//! line; with --out, writes the embeddings as little-endian f32 rows in input order.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use doc2ci_embed::{Backend, Embedder, Options};

fn main() -> Result<()> {
    let mut args = std::env::args().skip(1);
    let mut input = None;
    let mut opts = Options::default();
    let mut out = None;
    let mut repeat = 1usize;
    while let Some(a) = args.next() {
        let mut val = || args.next().with_context(|| format!("{a} needs a value"));
        match a.as_str() {
            "--backend" => {
                opts.backend = match val()?.as_str() {
                    "fused" => Backend::Fused,
                    "candle" => Backend::Candle,
                    b => bail!("unknown backend {b}"),
                }
            }
            "--batch-tokens" => opts.batch_tokens = val()?.parse()?,
            "--batch-size" => opts.batch_size = val()?.parse()?,
            "--threads" => opts.threads = val()?.parse()?,
            "--repeat" => repeat = val()?.parse()?,
            "--out" => out = Some(PathBuf::from(val()?)),
            _ if input.is_none() => input = Some(PathBuf::from(a)),
            _ => bail!("unexpected argument {a}"),
        }
    }
    let input = input.context("usage: bench_embed TEXTS.json [options]")?;
    let texts: Vec<String> = serde_json::from_slice(&std::fs::read(&input)?)?;
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();

    let assets = match std::env::var_os("DOC2CI_ASSETS").filter(|d| !d.is_empty()) {
        Some(d) => PathBuf::from(d),
        None => PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache/doc2ci/assets"),
    };
    let dir = assets.join("models/all-minilm-l6-v2");
    let t0 = Instant::now();
    let e = Embedder::load_with(
        &dir.join("model.safetensors"),
        &dir.join("tokenizer.json"),
        &dir.join("config.json"),
        opts.clone(),
    )
    .with_context(|| format!("loading the model from {} (run `doc2ci setup`)", dir.display()))?;
    let load_s = t0.elapsed().as_secs_f64();
    let tokens: usize = e.token_ids(&refs)?.iter().map(Vec::len).sum();

    let mut best = f64::INFINITY;
    let mut emb = Vec::new();
    for _ in 0..repeat.max(1) {
        let t = Instant::now();
        emb = e.embed(&refs)?;
        best = best.min(t.elapsed().as_secs_f64());
    }
    if let Some(p) = out {
        let bytes: Vec<u8> = emb.iter().flatten().flat_map(|v| v.to_le_bytes()).collect();
        std::fs::write(&p, bytes)?;
    }
    println!(
        "{{\"backend\":\"{:?}\",\"texts\":{},\"tokens\":{},\"load_s\":{:.3},\"embed_s\":{:.3},\"texts_per_s\":{:.2},\"threads\":{}}}",
        opts.backend,
        texts.len(),
        tokens,
        load_s,
        best,
        texts.len() as f64 / best,
        if opts.threads == 0 { rayon::current_num_threads() } else { opts.threads }
    );
    Ok(())
}
