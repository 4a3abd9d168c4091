//! The HTTP client against tiny loopback servers that misbehave on purpose (garbage, empty, endless, non-UTF-8,
//! truncated, resets, 429/5xx) and against an Ollama-shaped `/api/chat` server that checks the request body:
//! every failure must come back as a classified `LlmError` naming the endpoint, never a panic.
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use doc2ci_llm::{Limits, LlmError, Message, OllamaConfig, OpenAiConfig, Request};
use serde_json::{json, Value};

/// What the server saw: method+path, headers (lower-case names), body.
#[derive(Debug, Clone)]
struct Seen {
    line: String,
    headers: Vec<(String, String)>,
    body: Value,
}

type Handler = Arc<dyn Fn(usize, &Seen, &mut TcpStream) + Send + Sync>;

struct Server {
    url: String,
    hits: Arc<AtomicUsize>,
    seen: Arc<Mutex<Vec<Seen>>>,
}

fn read_request(s: &mut TcpStream) -> Option<Seen> {
    let mut buf = Vec::new();
    let mut byte = [0u8; 1];
    while !buf.ends_with(b"\r\n\r\n") {
        if s.read(&mut byte).ok()? == 0 {
            return None;
        }
        buf.push(byte[0]);
    }
    let head = String::from_utf8(buf).ok()?;
    let mut lines = head.split("\r\n");
    let line = lines.next()?.to_string();
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':').map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string())))
        .collect();
    let len: usize = headers.iter().find(|(k, _)| k == "content-length").map(|(_, v)| v.parse().unwrap()).unwrap_or(0);
    let mut body = vec![0u8; len];
    s.read_exact(&mut body).ok()?;
    Some(Seen { line, headers, body: serde_json::from_slice(&body).unwrap_or(Value::Null) })
}

/// A thread-per-connection HTTP/1.1 server; `handler(n, request, stream)` writes the raw response for hit n (0-based).
/// Connections are closed after each response, so every attempt is a fresh hit.
fn serve(handler: impl Fn(usize, &Seen, &mut TcpStream) + Send + Sync + 'static) -> Server {
    let handler: Handler = Arc::new(handler);
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", l.local_addr().unwrap());
    let hits = Arc::new(AtomicUsize::new(0));
    let seen = Arc::new(Mutex::new(Vec::new()));
    let (h2, s2) = (hits.clone(), seen.clone());
    std::thread::spawn(move || {
        for conn in l.incoming() {
            let Ok(mut s) = conn else { continue };
            let (handler, hits, seen) = (handler.clone(), h2.clone(), s2.clone());
            std::thread::spawn(move || {
                let Some(req) = read_request(&mut s) else { return };
                let n = hits.fetch_add(1, Ordering::SeqCst);
                seen.lock().unwrap().push(req.clone());
                handler(n, &req, &mut s);
                let _ = s.flush();
                let _ = s.shutdown(std::net::Shutdown::Both);
            });
        }
    });
    Server { url, hits, seen }
}

fn respond(s: &mut TcpStream, status: &str, extra_headers: &str, body: &[u8]) {
    let head = format!("HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n{extra_headers}\r\n", body.len());
    let _ = s.write_all(head.as_bytes());
    let _ = s.write_all(body);
}

fn ok_body(text: &str, finish: &str) -> Vec<u8> {
    json!({"id": "x", "object": "chat.completion", "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": finish}],
           "usage": {"prompt_tokens": 11, "completion_tokens": 3, "total_tokens": 14}})
    .to_string()
    .into_bytes()
}

fn limits(retries: u32, timeout_ms: u64) -> Limits {
    Limits { retries, backoff_initial_ms: 10, backoff_max_ms: 50, timeout_ms, ..Limits::default() }
}

/// An Ollama client of `model` at `url`, without a context size.
fn ollama_at(url: &str, model: &str, retries: u32) -> std::sync::Arc<dyn doc2ci_llm::Backend> {
    doc2ci_llm::ollama(OllamaConfig {
        base_urls: vec![url.into()],
        model: model.into(),
        num_ctx: None,
        limits: limits(retries, 5_000),
    })
    .unwrap()
}

fn openai(urls: &[&String], l: Limits) -> Arc<dyn doc2ci_llm::Backend> {
    doc2ci_llm::openai(OpenAiConfig {
        base_urls: urls.iter().map(|u| format!("{u}/v1")).collect(),
        model: "m".into(),
        api_key_env: None,
        api_key: None,
        limits: l,
    })
    .unwrap()
}

fn req() -> Request {
    Request {
        messages: vec![Message::new("user", "hi")],
        temperature: 0.0,
        max_tokens: 8,
        seed: None,
        extra: Default::default(),
    }
}

fn bad(e: LlmError, want: &str, url: &str) {
    match &e {
        LlmError::BadResponse(m) => {
            assert!(m.contains(want), "{m:?} should mention {want:?}");
            assert!(m.contains(url), "{m:?} should name {url}");
        }
        other => panic!("expected BadResponse({want}), got {other:?}"),
    }
}

#[tokio::test]
async fn garbage_empty_non_utf8_and_truncated_bodies_are_bad_responses() {
    let cases: Vec<(&[u8], &str)> = vec![
        (&b"<html>502 gateway says hello</html>"[..], "not JSON"),
        (&b""[..], "empty response body"),
        (&b"  \n "[..], "empty response body"),
        (&b"{\"choices\": [{\"message\": {\"content\": \"\xff\xfe oops\"}}]}"[..], "not UTF-8"),
        (&b"{\"choices\": [{\"message\": {\"content\": \"jobs:\\n  bu"[..], "truncated"),
        (&b"{\"object\": \"chat.completion\"}"[..], "no choices[0]"),
        (&b"{\"choices\": [{\"message\": {\"content\": 42}}]}"[..], "not a string"),
        (&b"{\"error\": {\"message\": \"model overloaded\"}}"[..], "model overloaded"),
    ];
    for (body, want) in cases {
        let body = body.to_vec();
        let srv = serve(move |_, _, s| respond(s, "200 OK", "", &body));
        let e = openai(&[&srv.url], limits(3, 5_000)).chat(&req()).await.unwrap_err();
        bad(e, want, &srv.url);
        assert_eq!(srv.hits.load(Ordering::SeqCst), 1, "a bad body is not retried");
    }
}

#[tokio::test]
async fn endless_body_is_size_capped_and_slow_drip_is_time_capped() {
    // Endless: no Content-Length, no end; the client must stop reading at its cap.
    let srv = serve(|_, _, s| {
        let _ = s.write_all(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n{\"choices\": [",
        );
        let chunk = vec![b' '; 1 << 16];
        while s.write_all(&chunk).is_ok() {}
    });
    let t = Instant::now();
    let e = openai(&[&srv.url], limits(2, 60_000)).chat(&req()).await.unwrap_err();
    bad(e, "exceeds", &srv.url);
    assert!(t.elapsed() < Duration::from_secs(30));

    // A trickle that never finishes: the per-attempt timeout ends it, then retries, then Retryable.
    let srv = serve(|_, _, s| {
        let _ = s.write_all(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{");
        for _ in 0..100 {
            std::thread::sleep(Duration::from_millis(50));
            if s.write_all(b" ").is_err() {
                return;
            }
        }
    });
    let t = Instant::now();
    let e = openai(&[&srv.url], limits(1, 400)).chat(&req()).await.unwrap_err();
    match e {
        LlmError::Retryable(m) => {
            assert!(m.contains("timed out after 400 ms") && m.contains(&srv.url) && m.contains("2 attempts"), "{m}")
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(srv.hits.load(Ordering::SeqCst), 2);
    // Two 400 ms attempts at least; the upper bound only guards against a hang.
    assert!(t.elapsed() >= Duration::from_millis(800) && t.elapsed() < Duration::from_secs(60), "{:?}", t.elapsed());
}

#[tokio::test]
async fn resets_and_short_bodies_are_retried_then_reported() {
    // Accept, read, close without a byte: a reset every time.
    let srv = serve(|_, _, _| {});
    let e = openai(&[&srv.url], limits(2, 5_000)).chat(&req()).await.unwrap_err();
    assert!(matches!(&e, LlmError::Retryable(m) if m.contains(&srv.url) && m.contains("3 attempts")), "{e:?}");
    assert_eq!(srv.hits.load(Ordering::SeqCst), 3);

    // Content-Length promises more than arrives: the connection died mid-body, retried, then succeeds.
    let srv = serve(|n, _, s| {
        if n == 0 {
            let _ = s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n{\"choices\"");
        } else {
            respond(s, "200 OK", "", &ok_body("fine", "stop"));
        }
    });
    let r = openai(&[&srv.url], limits(2, 5_000)).chat(&req()).await.unwrap();
    assert_eq!((r.text.as_str(), r.attempts), ("fine", 2));

    // Nobody listening at all: refused, retried, reported with the URL.
    let dead = {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}", l.local_addr().unwrap())
    };
    let e = openai(&[&dead], limits(1, 2_000)).chat(&req()).await.unwrap_err();
    assert!(matches!(&e, LlmError::Retryable(m) if m.contains(&dead)), "{e:?}");
}

#[tokio::test]
async fn status_codes_are_classified_and_retry_after_is_honoured() {
    // 500, 503 then success.
    let srv = serve(|n, _, s| match n {
        0 => respond(s, "500 Internal Server Error", "", b"{\"error\": \"boom\"}"),
        1 => respond(s, "503 Service Unavailable", "", b"busy"),
        _ => respond(s, "200 OK", "", &ok_body("ok", "stop")),
    });
    let r = openai(&[&srv.url], limits(5, 5_000)).chat(&req()).await.unwrap();
    assert_eq!((r.attempts, r.text.as_str()), (3, "ok"));
    assert_eq!(r.endpoint, format!("{}/v1/chat/completions", srv.url));

    // 429 with Retry-After: 1 → the retry waits at least a second although the backoff is 10 ms.
    let srv = serve(|n, _, s| match n {
        0 => respond(s, "429 Too Many Requests", "Retry-After: 1\r\n", b"{\"error\": \"slow down\"}"),
        _ => respond(s, "200 OK", "", &ok_body("ok", "stop")),
    });
    let t = Instant::now();
    let r = openai(&[&srv.url], limits(5, 5_000)).chat(&req()).await.unwrap();
    assert_eq!(r.attempts, 2);
    assert!(t.elapsed() >= Duration::from_millis(990), "{:?}", t.elapsed());

    // 429 forever → Retryable once retries are exhausted, naming status and body.
    let srv = serve(|_, _, s| respond(s, "429 Too Many Requests", "", b"{\"error\": \"quota\"}"));
    let e = openai(&[&srv.url], limits(2, 5_000)).chat(&req()).await.unwrap_err();
    assert!(
        matches!(&e, LlmError::Retryable(m) if m.contains("429") && m.contains("quota") && m.contains(&srv.url)),
        "{e:?}"
    );
    assert_eq!(srv.hits.load(Ordering::SeqCst), 3);

    // 400 and 404 are not retried.
    for status in ["400 Bad Request", "401 Unauthorized", "404 Not Found"] {
        let srv = serve(move |_, _, s| respond(s, status, "", b"{\"error\": \"no such model\"}"));
        let e = openai(&[&srv.url], limits(5, 5_000)).chat(&req()).await.unwrap_err();
        assert!(matches!(&e, LlmError::Http(m) if m.contains(&status[..3]) && m.contains("no such model")), "{e:?}");
        assert_eq!(srv.hits.load(Ordering::SeqCst), 1);
    }
}

#[tokio::test]
async fn openai_request_shape_key_extra_params_and_finish_reason() {
    let srv = serve(|_, _, s| respond(s, "200 OK", "", &ok_body("jobs: {}", "length")));
    let b = doc2ci_llm::openai(OpenAiConfig {
        base_urls: vec![format!("{}/v1/", srv.url)],
        model: "qwen2.5-coder".into(),
        // The key itself: a process-wide set_var would race the other tests of this binary.
        api_key_env: None,
        api_key: Some("sk-wire-secret".into()),
        limits: limits(0, 5_000),
    })
    .unwrap();
    assert!(!b.describe().contains("sk-wire"), "{}", b.describe());
    let mut r = req();
    r.seed = Some(42);
    r.temperature = 0.2;
    r.messages.insert(0, Message::new("system", "be brief"));
    r.extra.insert("top_p".into(), json!(0.9));
    r.extra.insert("max_tokens".into(), json!(5)); // extra wins over ours
    let reply = b.chat(&r).await.unwrap();
    assert_eq!(reply.finish_reason.as_deref(), Some("length"));
    assert_eq!((reply.prompt_tokens, reply.completion_tokens), (Some(11), Some(3)));
    let seen = srv.seen.lock().unwrap()[0].clone();
    assert_eq!(seen.line, "POST /v1/chat/completions HTTP/1.1");
    assert!(seen.headers.contains(&("authorization".into(), "Bearer sk-wire-secret".into())));
    assert_eq!(seen.body["model"], "qwen2.5-coder");
    assert_eq!(
        seen.body["messages"],
        json!([{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}])
    );
    assert_eq!(seen.body["seed"], 42);
    assert_eq!(seen.body["top_p"], 0.9);
    assert_eq!(seen.body["max_tokens"], 5);
    assert_eq!(seen.body["stream"], false);
    assert!((seen.body["temperature"].as_f64().unwrap() - 0.2).abs() < 1e-6);

    // A named key variable that is not set is a configuration error, naming the variable (not a value).
    let e = doc2ci_llm::openai(OpenAiConfig {
        base_urls: vec![srv.url.clone()],
        model: "m".into(),
        api_key_env: Some("DOC2CI_TEST_UNSET_KEY_VAR".into()),
        api_key: None,
        limits: Limits::default(),
    })
    .err()
    .unwrap();
    assert!(matches!(&e, LlmError::Other(m) if m.contains("DOC2CI_TEST_UNSET_KEY_VAR")), "{e:?}");
    let e = doc2ci_llm::openai(OpenAiConfig {
        base_urls: vec!["ftp://x".into()],
        model: "m".into(),
        api_key_env: None,
        api_key: None,
        limits: Limits::default(),
    })
    .err()
    .unwrap();
    assert!(matches!(&e, LlmError::Other(m) if m.contains("ftp://x")), "{e:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pool_spreads_load_skips_dead_endpoints_and_caps_concurrency() {
    // In flight = from arrival until the answer starts: the client can send its next request only
    // after it has the answer, so this count cannot exceed its concurrency however slow the
    // server's threads are scheduled (the server's own counter also spans the close after writing).
    let counters = || (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let ((na, ma), (nb, mb)) = (counters(), counters());
    let slow = |n: Arc<AtomicUsize>, m: Arc<AtomicUsize>| {
        move |_: usize, _: &Seen, s: &mut TcpStream| {
            let now = n.fetch_add(1, Ordering::SeqCst) + 1;
            m.fetch_max(now, Ordering::SeqCst);
            std::thread::sleep(Duration::from_millis(200));
            n.fetch_sub(1, Ordering::SeqCst);
            respond(s, "200 OK", "", &ok_body("ok", "stop"));
        }
    };
    let (a, b) = (serve(slow(na, ma.clone())), serve(slow(nb, mb.clone())));
    let dead = {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}", l.local_addr().unwrap())
    };
    let pool = openai(&[&a.url, &b.url, &dead], Limits { concurrency: 2, ..limits(4, 5_000) });
    let t = Instant::now();
    let replies = futures_join(pool.clone(), 8).await;
    assert!(replies.iter().all(|r| r.as_ref().is_ok_and(|r| r.text == "ok")), "{replies:?}");
    let (ha, hb) = (a.hits.load(Ordering::SeqCst), b.hits.load(Ordering::SeqCst));
    assert_eq!(ha + hb, 8);
    assert!(ha >= 2 && hb >= 2, "load spread {ha}/{hb}");
    assert!(ma.load(Ordering::SeqCst) <= 2 && mb.load(Ordering::SeqCst) <= 2, "{ma:?} {mb:?}");
    assert!(
        t.elapsed() >= Duration::from_millis(400),
        "8 requests at 2+2 in flight take two rounds: {:?}",
        t.elapsed()
    );
}

async fn futures_join(b: Arc<dyn doc2ci_llm::Backend>, n: usize) -> Vec<Result<doc2ci_llm::Reply, LlmError>> {
    let tasks: Vec<_> = (0..n)
        .map(|_| {
            let b = b.clone();
            tokio::spawn(async move { b.chat(&req()).await })
        })
        .collect();
    let mut out = Vec::new();
    for t in tasks {
        out.push(t.await.unwrap());
    }
    out
}

#[tokio::test]
async fn token_window_delays_when_the_budget_is_spent() {
    let w = doc2ci_llm::TokenWindow::new(100, Duration::from_millis(600));
    let t = Instant::now();
    // Within the budget: admitted at once (ready on the first poll, whatever the machine's load).
    assert!(ready_now(w.acquire(60)));
    assert!(ready_now(w.acquire(30)));
    w.acquire(30).await; // 120 > 100: waits for the first entry to leave the window
    assert!(t.elapsed() >= Duration::from_millis(590), "{:?}", t.elapsed());
    // Corrections: a request that used fewer tokens than estimated frees budget.
    let w = doc2ci_llm::TokenWindow::new(100, Duration::from_secs(60));
    w.acquire(90).await;
    w.correct(90, 10);
    assert!(ready_now(w.acquire(80)));
}

/// Completes on its first poll, without waiting on a timer.
fn ready_now<F: std::future::Future>(f: F) -> bool {
    let mut f = std::pin::pin!(f);
    std::future::Future::poll(f.as_mut(), &mut std::task::Context::from_waker(std::task::Waker::noop())).is_ready()
}

#[tokio::test]
async fn ollama_native_chat_request_and_reply() {
    let srv = serve(|n, req, s| {
        // Reject anything that does not look like Ollama's /api/chat, the way Ollama does (400 + error JSON).
        let b = &req.body;
        let ok = req.line == "POST /api/chat HTTP/1.1"
            && b["model"] == "qwen2.5-coder:7b"
            && b["stream"] == false
            && b["messages"][0]["role"] == "system"
            && b["options"]["num_predict"] == 64
            && b["options"]["num_ctx"] == 8192
            && b["options"]["temperature"] == 0.0
            && b["options"]["seed"] == 7
            && b["options"]["top_k"] == 1
            && b["keep_alive"] == "5m"
            && b.get("max_tokens").is_none();
        if !ok {
            return respond(
                s,
                "400 Bad Request",
                "",
                json!({"error": format!("unexpected request {} {}", req.line, b)}).to_string().as_bytes(),
            );
        }
        if n == 0 {
            // Ollama answers 503 while a model is loading with OLLAMA_MAX_QUEUE exceeded.
            return respond(
                s,
                "503 Service Unavailable",
                "",
                b"{\"error\":\"server busy, please try again.  maximum pending requests exceeded\"}",
            );
        }
        let body = json!({
            "model": "qwen2.5-coder:7b", "created_at": "2026-11-29T23:00:00.000000Z",
            "message": {"role": "assistant", "content": "on: push\njobs: {}\n"},
            "done_reason": "length", "done": true, "total_duration": 1_000_000_000u64, "load_duration": 1000,
            "prompt_eval_count": 57, "prompt_eval_duration": 1000, "eval_count": 64, "eval_duration": 1000
        });
        respond(s, "200 OK", "", body.to_string().as_bytes())
    });
    let b = doc2ci_llm::ollama(OllamaConfig {
        base_urls: vec![srv.url.clone()],
        model: "qwen2.5-coder:7b".into(),
        num_ctx: Some(8192),
        limits: limits(2, 5_000),
    })
    .unwrap();
    assert!(b.describe().starts_with("ollama "));
    let mut r = req();
    r.messages.insert(0, Message::new("system", "sys"));
    r.max_tokens = 64;
    r.seed = Some(7);
    r.extra.insert("top_k".into(), json!(1));
    r.extra.insert("keep_alive".into(), json!("5m"));
    let reply = b.chat(&r).await.unwrap();
    assert_eq!(reply.text, "on: push\njobs: {}\n");
    assert_eq!(reply.finish_reason.as_deref(), Some("length"));
    assert_eq!((reply.prompt_tokens, reply.completion_tokens), (Some(57), Some(64)));
    assert_eq!(reply.attempts, 2);
    assert_eq!(reply.endpoint, format!("{}/api/chat", srv.url));

    // Ollama's 404 for a model that is not pulled: a non-retryable error with its message.
    let srv = serve(|_, _, s| {
        respond(s, "404 Not Found", "", b"{\"error\":\"model \\\"nope\\\" not found, try pulling it first\"}")
    });
    let b = ollama_at(&srv.url, "nope", 3);
    let e = b.chat(&req()).await.unwrap_err();
    assert!(matches!(&e, LlmError::Http(m) if m.contains("try pulling it first") && m.contains("/api/chat")), "{e:?}");

    // A streamed chunk (done=false) is not a whole answer.
    let srv = serve(|_, _, s| {
        respond(s, "200 OK", "", b"{\"message\":{\"role\":\"assistant\",\"content\":\"o\"},\"done\":false}")
    });
    let b = ollama_at(&srv.url, "m", 0);
    bad(b.chat(&req()).await.unwrap_err(), "done=false", &srv.url);
}

/// rpm spacing seen where it matters, at the server: arrivals are at least 60/rpm apart although
/// four may be in flight. A lower bound on gaps holds on any machine (load only widens them).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rpm_spaces_arrivals() {
    let arrivals: Arc<Mutex<Vec<Instant>>> = Arc::default();
    let a2 = arrivals.clone();
    let srv = serve(move |_, _, s| {
        a2.lock().unwrap().push(Instant::now());
        respond(s, "200 OK", "", &ok_body("ok", "stop"))
    });
    let l = Limits { concurrency: 4, requests_per_minute: Some(300), ..limits(0, 10_000) };
    let b = openai(&[&srv.url], l);
    let tasks: Vec<_> = (0..5)
        .map(|_| {
            let b = b.clone();
            tokio::spawn(async move { b.chat(&req()).await })
        })
        .collect();
    for t in tasks {
        t.await.unwrap().unwrap();
    }
    let mut at = arrivals.lock().unwrap().clone();
    at.sort();
    assert_eq!(at.len(), 5);
    for w in at.windows(2) {
        // 300 rpm = 200 ms; a few ms of slack for the clock read on either side.
        assert!(w[1] - w[0] >= Duration::from_millis(190), "arrivals too close: {:?}", w[1] - w[0]);
    }
}

/// Adaptive limits: a server that enforces a token bucket (40 requests/s, burst 8) and says so in
/// OpenAI's `x-ratelimit-*` headers, asked 240 requests at concurrency 8 with no configured rpm.
/// Once the first answers have taught the pool the bucket, at most 1% of the requests are answered
/// 429 (a stall of a loaded 2-core machine can bunch two arrivals; a pool that ignored the headers
/// would have most of its 240 refused), and the answered rate stays within 10% of the bucket's (it
/// cannot exceed it: the server refuses).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pacing_follows_the_providers_rate_limit_headers() {
    const RATE: f64 = 40.0;
    const BURST: f64 = 8.0;
    struct Bucket {
        level: f64,
        at: Instant,
    }
    let bucket = Arc::new(Mutex::new(Bucket { level: BURST, at: Instant::now() }));
    // (arrival, answered 429)
    let log: Arc<Mutex<Vec<(Instant, bool)>>> = Arc::default();
    let (b2, l2) = (bucket.clone(), log.clone());
    let srv = serve(move |_, _, s| {
        let (ok, level) = {
            let mut b = b2.lock().unwrap();
            let now = Instant::now();
            b.level = (b.level + RATE * now.duration_since(b.at).as_secs_f64()).min(BURST);
            b.at = now;
            let ok = b.level >= 1.0;
            if ok {
                b.level -= 1.0;
            }
            l2.lock().unwrap().push((now, !ok));
            (ok, b.level)
        };
        let headers = format!(
            "x-ratelimit-limit-requests: {BURST}\r\nx-ratelimit-remaining-requests: {}\r\nx-ratelimit-reset-requests: {:.3}s\r\n",
            level.floor().max(0.0),
            (BURST - level) / RATE
        );
        if ok {
            respond(s, "200 OK", &headers, &ok_body("ok", "stop"))
        } else {
            respond(s, "429 Too Many Requests", &headers, br#"{"error":{"message":"rate limited"}}"#)
        }
    });
    let l = Limits { concurrency: 8, ..limits(10, 10_000) };
    let b = openai(&[&srv.url], l);
    for r in futures_join(b, 240).await {
        r.unwrap();
    }
    let log = log.lock().unwrap().clone();
    let mut answered: Vec<Instant> = log.iter().filter(|(_, refused)| !refused).map(|(t, _)| *t).collect();
    answered.sort();
    assert_eq!(answered.len(), 240);
    let refused_late = log.iter().skip(20).filter(|(_, refused)| *refused).count();
    assert!(
        refused_late <= 2,
        "{refused_late} 429s at steady state ({} in all)",
        log.iter().filter(|(_, r)| *r).count()
    );
    let steady = &answered[20..];
    let rate = (steady.len() - 1) as f64 / (steady[steady.len() - 1] - steady[0]).as_secs_f64();
    eprintln!("adaptive pacing: {rate:.1} requests/s answered against a bucket of {RATE}/s");
    assert!(rate >= 0.9 * RATE, "{rate:.1} requests/s is under 90% of the bucket's {RATE}/s");
}

/// Issue 30: a `Retry-After` no duration can hold is an error row's 429, not a panic. Issue 31:
/// nor a wait: more than doc2ci ever waits (600 s) fails the request at once, retries left or not.
#[tokio::test]
async fn an_absurd_retry_after_is_clamped_not_a_panic() {
    for (header, refused) in
        [("Retry-After: 1e20\r\n", true), ("retry-after-ms: 1e300\r\n", true), ("Retry-After: inf\r\n", false)]
    {
        let srv = serve(move |_, _, s| respond(s, "429 Too Many Requests", header, b"{}"));
        let t0 = std::time::Instant::now();
        let e = openai(&[&srv.url], limits(2, 10_000)).chat(&req()).await.unwrap_err();
        assert!(e.to_string().contains("429"), "{e}");
        assert_eq!(e.to_string().contains("more than the 600 s doc2ci waits"), refused, "{header}: {e}");
        assert!(t0.elapsed() < Duration::from_secs(10), "{header}: {:?}", t0.elapsed());
    }
}

/// Issue 30: attempts that reached the server and may have been billed are counted; a 429 is not.
#[tokio::test]
async fn billed_retries_count_what_may_have_been_billed() {
    for (first, billed) in [("500 Internal Server Error", 1), ("429 Too Many Requests", 0)] {
        let srv = serve(move |n, _, s| match n {
            0 => respond(s, first, "", b"{}"),
            _ => respond(s, "200 OK", "", &ok_body("on: push", "stop")),
        });
        let r = openai(&[&srv.url], limits(2, 10_000)).chat(&req()).await.unwrap();
        assert_eq!((r.attempts, r.billed_retries), (2, billed), "{first}");
    }
}
