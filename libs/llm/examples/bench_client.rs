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
        api_key: None,
        limits: Limits { concurrency: c, retries: 0, ..Limits::default() },
    })
    .unwrap();
    let req = Arc::new(Request {
        messages: vec![Message::new("user", "Hi")],
        temperature: 0.0,
        max_tokens: k,
        seed: None,
        extra: Default::default(),
    });
    // Warm-up (connection, server prompt cache), not timed.
    b.chat(&req).await.unwrap();
    let cpu0 = cpu_seconds();
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
    let cpu_ms = (cpu_seconds() - cpu0) * 1e3 / n as f64;
    println!("{{\"client\": \"doc2ci-llm\", \"requests\": {n}, \"concurrency\": {c}, \"seconds\": {s:.3}, \"requests_per_s\": {:.2}, \"client_cpu_ms_per_request\": {cpu_ms:.4}, \"completion_tokens\": {tokens}}}", n as f64 / s);
}

/// This process's user + system CPU time: with the server as the bottleneck, requests/s of any two
/// clients converge, and the CPU a client spends per request is its real overhead.
fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the parenthesised command name; utime and stime are the 12th and 13th of them.
    let rest = stat.rsplit_once(") ").map(|(_, r)| r).unwrap_or("");
    let f: Vec<f64> = rest.split(' ').skip(11).take(2).filter_map(|x| x.parse().ok()).collect();
    f.iter().sum::<f64>() / 100.0 // USER_HZ is 100 in /proc on Linux
}
