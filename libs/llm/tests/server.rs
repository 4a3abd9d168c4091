//! The `openai` backend against a real OpenAI-compatible server on loopback: llama.cpp's own C++ server
//! (`peers/llama_server.py`, the prebuilt `xllamacpp` wheel installed by scripts/deps.sh) serving the
//! same SmolLM2 GGUF as the embedded model.
//! Each test starts its own server on a free port and kills it when done.
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use doc2ci_llm::{Backend, Limits, LlmError, Message, OpenAiConfig, Request};

/// The port in the launcher's "listening on http://127.0.0.1:PORT" line (stdout).
fn listening_port(stdout: std::process::ChildStdout) -> u16 {
    use std::io::BufRead;
    let mut lines = std::io::BufReader::new(stdout).lines();
    let mut seen = Vec::new();
    for line in lines.by_ref() {
        let Ok(line) = line else { break };
        if let Some(rest) = line.split("listening on http://127.0.0.1:").nth(1) {
            let port: u16 = rest.split(|c: char| !c.is_ascii_digit()).next().unwrap().parse().unwrap();
            std::thread::spawn(move || lines.for_each(drop));
            return port;
        }
        seen.push(line);
    }
    panic!("the llama.cpp server exited before it listened:\n{}", seen.join("\n"));
}

/// A running llama.cpp server (`peers/llama_server.py`); killed on drop.
struct LlamaServer {
    child: Option<Child>,
    port: u16,
}

impl LlamaServer {
    /// `port` 0: the OS picks one at bind time and the launcher's start line says which (no
    /// bind-close-reuse race with the other tests); a given port is for restarting on the same one.
    fn start(port: u16) -> LlamaServer {
        let root =
            PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR")).join("../..");
        let mut child = Command::new("python3")
            .current_dir(root)
            .args(["-m", "peers.llama_server"])
            .args(["--port", &port.to_string(), "--threads", "1", "--alias", "smollm2", "--model"])
            .arg(doc2ci_testkit::gguf())
            .stdout(Stdio::piped())
            .spawn()
            .expect("python3 -m peers.llama_server (run scripts/deps.sh: pip xllamacpp)");
        let port = listening_port(child.stdout.take().unwrap());
        let s = LlamaServer { child: Some(child), port };
        s.wait_ready();
        s
    }

    fn wait_ready(&self) {
        let t = Instant::now();
        while t.elapsed() < Duration::from_secs(60) {
            if let Ok(mut c) = std::net::TcpStream::connect(("127.0.0.1", self.port)) {
                use std::io::{Read, Write};
                let _ = c.write_all(b"GET /v1/models HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
                let mut s = String::new();
                let _ = c.read_to_string(&mut s);
                if s.starts_with("HTTP/1.1 200") {
                    return;
                }
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!("the llama.cpp server on port {} did not come up in 60 s", self.port);
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}/v1", self.port)
    }

    fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for LlamaServer {
    fn drop(&mut self) {
        self.kill();
    }
}

fn backend(url: &str, limits: Limits) -> Arc<dyn Backend> {
    doc2ci_llm::openai(OpenAiConfig {
        base_urls: vec![url.to_string()],
        model: "smollm2".into(),
        api_key_env: None,
        api_key: None,
        limits,
    })
    .unwrap()
}

fn ask(q: &str, max_tokens: u32) -> Request {
    Request {
        messages: vec![Message::new("user", q)],
        temperature: 0.0,
        max_tokens,
        seed: Some(1),
        extra: Default::default(),
    }
}

/// The greedy answer llama.cpp gave in-process (committed by the smollm crate's reference script).
fn reference_chat() -> (String, usize) {
    let p = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"))
        .join("../smollm/tests/data/llamacpp_reference.json");
    let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap();
    let chat = &v["chats"][1];
    assert_eq!(chat["messages"][0]["content"], "What is 2+2?");
    (chat["greedy_text"].as_str().unwrap().to_string(), chat["prompt_ids"].as_array().unwrap().len())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn generates_through_a_real_server_and_reports_usage() {
    let srv = LlamaServer::start(0);
    let b = backend(&srv.url(), Limits::default());
    let (want, prompt_len) = reference_chat();
    let r = b.chat(&ask("What is 2+2?", 64)).await.unwrap();
    assert_eq!(r.text, want, "the server's greedy answer equals llama.cpp's in-process one");
    assert_eq!(r.finish_reason.as_deref(), Some("stop"));
    assert_eq!(r.prompt_tokens, Some(prompt_len as u32));
    assert!(r.completion_tokens.unwrap() > 3);
    assert_eq!((r.attempts, r.endpoint.as_str()), (1, format!("{}/chat/completions", srv.url()).as_str()));

    // The output cap: finish_reason "length" is preserved.
    let r = b.chat(&ask("Write a long story about YAML.", 3)).await.unwrap();
    assert_eq!((r.finish_reason.as_deref(), r.completion_tokens), (Some("length"), Some(3)));

    // Extra parameters reach the server: a stop string cuts the answer.
    let mut q = ask("What is 2+2?", 64);
    q.extra.insert("stop".into(), serde_json::json!(["classic"]));
    let r = b.chat(&q).await.unwrap();
    assert!(want.contains("classic") && !r.text.contains("classic") && want.starts_with(&r.text), "{:?}", r.text);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn survives_the_server_being_killed_and_restarted() {
    let mut srv = LlamaServer::start(0);
    let port = srv.port;
    let limits = Limits {
        concurrency: 2,
        retries: 30,
        backoff_initial_ms: 100,
        backoff_max_ms: 800,
        timeout_ms: 20_000,
        ..Limits::default()
    };
    let b = backend(&srv.url(), limits);
    let first = b.chat(&ask("What is 2+2?", 8)).await.unwrap();
    assert_eq!(first.attempts, 1);
    srv.kill();
    let t = Instant::now();
    let tasks: Vec<_> = (0..4)
        .map(|_| {
            let b = b.clone();
            tokio::spawn(async move { b.chat(&ask("What is 2+2?", 8)).await })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let _srv2 = tokio::task::spawn_blocking(move || LlamaServer::start(port)).await.unwrap();
    for t in tasks {
        let r = t.await.unwrap().expect("requests succeed once the server is back");
        assert!(r.attempts > 1, "the first attempt hit a dead server");
        assert_eq!(r.text, first.text, "greedy answers agree across the restart");
    }
    assert!(t.elapsed() >= Duration::from_millis(1500));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_per_minute_are_spaced() {
    let srv = LlamaServer::start(0);
    // 150 rpm = one request every 400 ms, although 4 may be in flight.
    let b = backend(&srv.url(), Limits { concurrency: 4, requests_per_minute: Some(150), ..Limits::default() });
    // Warm-up: the server's first answer is slow (cold caches) and would make the next ones queue behind it.
    b.chat(&ask("Hi", 1)).await.unwrap();
    let t0 = Instant::now();
    let tasks: Vec<_> = (0..5)
        .map(|_| {
            let b = b.clone();
            tokio::spawn(async move {
                let r = b.chat(&ask("Hi", 1)).await;
                (r, t0.elapsed())
            })
        })
        .collect();
    let mut done = Vec::new();
    for t in tasks {
        let (r, at) = t.await.unwrap();
        r.unwrap();
        done.push(at);
    }
    done.sort();
    // Admissions 0.4 s apart: the fifth is admitted 1.6 s after the first at the earliest, so it cannot
    // be answered sooner, however loaded the machine (a busy server only delays answers further). The
    // spacing of arrivals themselves is checked at the wire (`wire.rs`, rpm_spaces_arrivals).
    assert!(done[4] >= Duration::from_millis(1590), "{done:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_generation_times_out_as_retryable() {
    let srv = LlamaServer::start(0);
    let b = backend(
        &srv.url(),
        Limits { retries: 1, backoff_initial_ms: 10, backoff_max_ms: 10, timeout_ms: 150, ..Limits::default() },
    );
    let t = Instant::now();
    let e = b.chat(&ask("Write a very long story about continuous integration.", 400)).await.unwrap_err();
    assert!(
        matches!(&e, LlmError::Retryable(m) if m.contains("timed out after 150 ms") && m.contains(&srv.url())),
        "{e:?}"
    );
    // Only a guard against a hang: two 150 ms attempts end long before.
    assert!(t.elapsed() < Duration::from_secs(60));
}
