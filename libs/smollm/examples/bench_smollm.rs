//! Embedded-model throughput on the study prompt: prompt (prefill) and generated tokens per second.
//!
//! Usage: bench_smollm [GGUF] [--max-tokens N] [--repeat R] [--batch B]; prints one JSON line. With
//! `--batch B`: B study prompts (B different pairs' descriptions) answered one after another and then
//! decoded together (`Embedded::generate_batch`), aggregate generated tokens per second of each. The GGUF defaults to
//! `$DOC2CI_ASSETS` (or ~/.cache/doc2ci/assets)/models/smollm2-135m-instruct/SmolLM2-135M-Instruct.Q4_1.gguf.
use std::path::PathBuf;
use std::time::Instant;

use doc2ci_llm::Message;
use doc2ci_smollm::Embedded;

fn main() -> anyhow::Result<()> {
    let mut gguf = None;
    let (mut max_tokens, mut repeat, mut batch) = (128u32, 3usize, 0usize);
    let (mut descriptions, mut reuse) = (None, true);
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--max-tokens" => max_tokens = args.next().unwrap().parse()?,
            "--repeat" => repeat = args.next().unwrap().parse()?,
            "--batch" => batch = args.next().unwrap().parse()?,
            // A JSON array of pair descriptions (real ones: bench/smollm.sh takes them from llm4ci).
            "--descriptions" => descriptions = Some(PathBuf::from(args.next().unwrap())),
            "--no-prefix-reuse" => reuse = false,
            p => gguf = Some(PathBuf::from(p)),
        }
    }
    let gguf = gguf.unwrap_or_else(|| {
        let assets = std::env::var_os("DOC2CI_ASSETS")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(std::env::var("HOME").unwrap()).join(".cache/doc2ci/assets"));
        assets.join("models/smollm2-135m-instruct/SmolLM2-135M-Instruct.Q4_1.gguf")
    });
    let t = Instant::now();
    let m = Embedded::load(&gguf)?;
    m.reuse_prefixes(reuse);
    let load_s = t.elapsed().as_secs_f64();
    if batch > 0 {
        let descriptions: Vec<String> = match descriptions {
            Some(p) => serde_json::from_str(&std::fs::read_to_string(p)?)?,
            None => (0..batch).map(|i| format!("{PAIR} The workflow is number {i} of the repository.")).collect(),
        };
        return aggregate(&m, batch, max_tokens, &descriptions, reuse);
    }
    // llama.cpp's server is asked with `cache_prompt: false`: each run prefills the whole prompt.
    m.reuse_prefixes(false);
    let msgs = study_prompt();
    // Prefill alone: one token of output.
    let mut prefill = f64::INFINITY;
    let mut total = f64::INFINITY;
    let mut reply = None;
    for _ in 0..repeat {
        let r = m.generate(&msgs, 1, 0.0, None)?;
        prefill = prefill.min(r.latency_ms / 1e3);
        let r = m.generate(&msgs, max_tokens, 0.0, None)?;
        total = total.min(r.latency_ms / 1e3);
        reply = Some(r);
    }
    let r = reply.unwrap();
    let (p, c) = (r.prompt_tokens.unwrap(), r.completion_tokens.unwrap());
    let decode_tps = (c.saturating_sub(1)) as f64 / (total - prefill);
    println!(
        "{{\"backend\": \"doc2ci-smollm (own decoder: f32 prefill, integer decoding on the Q4_1 blocks)\", \"load_s\": {load_s:.3}, \"prompt_tokens\": {p}, \"completion_tokens\": {c}, \"prefill_s\": {prefill:.3}, \"total_s\": {total:.3}, \"prompt_tokens_per_s\": {:.1}, \"gen_tokens_per_s\": {decode_tps:.1}, \"end_to_end_tokens_per_s\": {:.1}}}",
        p as f64 / prefill,
        c as f64 / total
    );
    Ok(())
}

const PAIR: &str = "About workflows - Advanced workflow features - Creating dependent jobs: This section briefly describes some of the advanced features of GitHub Actions that help you create more complex workflows. By default, the jobs in your workflow all run in parallel at the same time. If you have a job that must only run after another job has completed, you can use the needs keyword to create this dependency. If one of the jobs fails, all dependent jobs are skipped; however, if you need the jobs to continue, you can define this using the if conditional statement.";

fn study_prompt() -> Vec<Message> {
    prompt_for(PAIR)
}

/// The study's prompt (the paper's system prompt and instructions) for one pair's description.
fn prompt_for(pair: &str) -> Vec<Message> {
    let task = "Given the description below, generate a minimal and single valid GitHub Actions YAML configuration. Do not provide any reasoning. Only output the single YAML configuration, with no comments, markdown, or extra formatting. The YAML must match the described task exactly. Do not add any unneeded directives unless told.";
    vec![
        Message::new("system", "You are a highly skilled software developer and DevOps engineer."),
        Message::new("user", format!("{task}\n\n{pair}")),
    ]
}

/// Aggregate tokens/s of `b` answers one after another against the same `b` decoded together,
/// prefill included, and the ratio of the decoding parts alone (each pass less the prefill time).
fn aggregate(m: &Embedded, b: usize, max_tokens: u32, descriptions: &[String], reuse: bool) -> anyhow::Result<()> {
    let asks: Vec<doc2ci_smollm::Ask> = (0..b)
        .map(|i| doc2ci_smollm::Ask {
            messages: prompt_for(&descriptions[i % descriptions.len()]),
            max_tokens,
            temperature: 0.0,
            seed: None,
        })
        .collect();
    // The prompts' prefill alone (one token each), to tell decoding's share of either pass.
    let t = Instant::now();
    for a in &asks {
        m.generate(&a.messages, 1, 0.0, None)?;
    }
    let prefill_s = t.elapsed().as_secs_f64();
    m.reuse_prefixes(reuse);
    let t = Instant::now();
    let mut seq_tokens = 0u32;
    for a in &asks {
        seq_tokens += m.generate(&a.messages, a.max_tokens, 0.0, None)?.completion_tokens.unwrap_or(0);
    }
    let seq_s = t.elapsed().as_secs_f64();
    m.reuse_prefixes(reuse);
    let t = Instant::now();
    let mut batch_tokens = 0u32;
    for r in m.generate_batch(&asks) {
        batch_tokens += r?.1.completion_tokens.unwrap_or(0);
    }
    let batch_s = t.elapsed().as_secs_f64();
    let reused = m.reused_positions() / 3;
    let decode_ratio = (seq_s - prefill_s) / (batch_s - prefill_s);
    println!(
        "{{\"batch\": {b}, \"completion_tokens\": {seq_tokens}, \"one_at_a_time_s\": {seq_s:.3}, \"batched_s\": {batch_s:.3}, \"one_at_a_time_tokens_per_s\": {:.1}, \"batched_tokens_per_s\": {:.1}, \"ratio\": {:.2}, \"same_tokens\": {}, \"prefix_reuse\": {reuse}, \"reused_positions_per_pass\": {reused}, \"prefill_s\": {prefill_s:.3}, \"decode_ratio\": {decode_ratio:.2}}}",
        seq_tokens as f64 / seq_s,
        batch_tokens as f64 / batch_s,
        seq_s / batch_s,
        seq_tokens == batch_tokens
    );
    Ok(())
}
