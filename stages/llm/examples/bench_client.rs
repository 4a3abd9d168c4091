//! Client overhead: N chat requests at concurrency C through the `openai` backend; prints one JSON line.
//!
//! Usage: bench_client BASE_URL [--requests N] [--concurrency C] [--max-tokens K]
use std::sync::Arc;
use std::time::Instant;

use doc2ci_llm::{Limits, Message, OpenAiConfig, Request};

#[tokio::main]
async fn main() {
    let mut args = std::env::args().skip(1);
    let url = args.next().expect("usage: bench_client BASE_URL [--requests N] [--concurrency C] [--max-tokens K]");
    let (mut n, mut c, mut k) = (200usize, 4usize, 1u32);
    while let Some(a) = args.next() {
        let v = args.next().expect("flag needs a value");
        match a.as_str() {
            "--requests" => n = v.parse().unwrap(),
            "--concurrency" => c = v.parse().unwrap(),
            "--max-tokens" => k = v.parse().unwrap(),
            _ => panic!("unknown flag {a}"),
        }
    }
    let b = doc2ci_llm::openai(OpenAiConfig {
        base_urls: vec![url],
        model: "smollm2".into(),
        api_key_env: None,
        limits: Limits { concurrency: c, retries: 0, ..Limits::default() },
    })
    .unwrap();
    let req = Arc::new(Request { messages: vec![Message::new("user", "Hi")], temperature: 0.0, max_tokens: k, seed: None, extra: Default::default() });
    // Warm-up (connection, server prompt cache), not timed.
    b.chat(&req).await.unwrap();
    let t = Instant::now();
    // The backend's per-endpoint semaphore is the concurrency limit, as in the engine.
    let tasks: Vec<_> = (0..n)
        .map(|_| {
            let (b, req) = (b.clone(), req.clone());
            tokio::spawn(async move { b.chat(&req).await.map(|r| r.completion_tokens.unwrap_or(0)) })
        })
        .collect();
    let mut tokens = 0u32;
    for t in tasks {
        tokens += t.await.unwrap().unwrap();
    }
    let s = t.elapsed().as_secs_f64();
    println!("{{\"client\": \"doc2ci-llm\", \"requests\": {n}, \"concurrency\": {c}, \"seconds\": {s:.3}, \"requests_per_s\": {:.2}, \"completion_tokens\": {tokens}}}", n as f64 / s);
}
