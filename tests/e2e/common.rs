//! Helpers for end-to-end tests: run the real binary on real data, read back with real DuckDB.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub fn shared() -> PathBuf {
    let p = Path::new(&std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"))
        .join("../shared/data/llm4ci");
    assert!(p.exists(), "real data missing: {} (tests read ../shared beside the clone)", p.display());
    p.canonicalize().unwrap()
}

pub const MODELS: &[&str] = &["gpt-4o", "gpt-4.1", "llama3.1-8b", "codellama-7b", "gemma3-12b", "codegemma-7b"];

pub fn output_file(model: &str) -> PathBuf {
    shared().join(format!("GitHubActions_{model}_output.csv.gz"))
}

/// A study over the real llm4ci data in `dir`, with `extra` appended (more models, stage params);
/// import and dedupe only, so engine tests do not pay for embeddings or lint tools.
pub fn write_config(dir: &Path, models: &[&str], extra: &str) -> PathBuf {
    study(
        dir,
        models,
        &format!(
            "{extra}\n[stages.validate]\nenabled = false\n[stages.score]\nenabled = false\n[stages.lint]\nenabled = false\n"
        ),
    )
}

/// A study of `pairs` (JSONL rows) and one imported model `model` answering them (`outputs`) for
/// `service` (name, display), with `extra` appended; the files are written into `d`.
pub fn jsonl_study(
    d: &Path,
    (service, display): (&str, &str),
    model: &str,
    (pairs, outputs): (&[serde_json::Value], &[serde_json::Value]),
    extra: &str,
) -> PathBuf {
    let lines = |rows: &[serde_json::Value]| rows.iter().map(|r| r.to_string() + "\n").collect::<String>();
    std::fs::write(d.join("pairs.jsonl"), lines(pairs)).unwrap();
    std::fs::write(d.join("outputs.jsonl"), lines(outputs)).unwrap();
    let cfg = d.join("pipeline.toml");
    std::fs::write(
        &cfg,
        format!(
            "[study]\nwarehouse = \"wh\"\nthreads = 2\n\n[[services]]\nname = \"{service}\"\ndisplay = \"{display}\"\n\n\
             [[sources]]\nname = \"docs\"\nkind = \"import\"\nformat = \"jsonl\"\npath = \"pairs.jsonl\"\nservice = \"{service}\"\n\n\
             [[models]]\nname = \"{model}\"\nbackend = \"import\"\nformat = \"jsonl\"\npath = \"outputs.jsonl\"\nsource = \"docs\"\n\n{extra}"
        ),
    )
    .unwrap();
    cfg
}

/// The same study with validate, lint and score on.
pub fn write_quality_config(dir: &Path, models: &[&str], extra: &str) -> PathBuf {
    study(dir, models, extra)
}

fn study(dir: &Path, models: &[&str], extra: &str) -> PathBuf {
    let mut s = format!(
        "[study]\nwarehouse = \"wh\"\nthreads = 2\n\n[[services]]\nname = \"github-actions\"\ndisplay = \"GitHub Actions\"\n\n[[sources]]\nname = \"docs\"\nkind = \"import\"\nformat = \"llm4ci\"\npath = \"{}\"\nservice = \"github-actions\"\n",
        shared().join("GitHubActions_Docs.csv.gz").display()
    );
    for m in models {
        s.push_str(&format!(
            "\n[[models]]\nname = \"{m}\"\nbackend = \"import\"\npath = \"{}\"\nfamily = \"x\"\n",
            output_file(m).display()
        ));
    }
    s.push_str(extra);
    let p = dir.join("pipeline.toml");
    std::fs::write(&p, s).unwrap();
    p
}

/// Rows `range` of a real gzipped CSV, as a small CSV of the same format.
pub fn slice_rows(src: &Path, dst: &Path, range: std::ops::Range<usize>) {
    use std::io::Read;
    let mut text = String::new();
    flate2::read::GzDecoder::new(std::fs::File::open(src).unwrap()).read_to_string(&mut text).unwrap();
    let mut r = csv::Reader::from_reader(text.as_bytes());
    let mut w = csv::Writer::from_path(dst).unwrap();
    w.write_record(r.headers().unwrap()).unwrap();
    for rec in r.records().skip(range.start).take(range.len()) {
        w.write_record(&rec.unwrap()).unwrap();
    }
    w.flush().unwrap();
}

/// The binary, with the request cache shared across studies off (tests count the requests a
/// server receives; the cache's own test turns it on in a folder of its own).
pub fn doc2ci(args: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_doc2ci"));
    c.args(args).env("DOC2CI_REQUEST_CACHE", "off");
    c
}

pub fn run_ok(args: &[&str]) -> String {
    let out = doc2ci(args).output().unwrap();
    assert!(
        out.status.success(),
        "doc2ci {args:?} failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr)
}

pub fn run_err(args: &[&str]) -> String {
    let out: Output = doc2ci(args).output().unwrap();
    assert!(!out.status.success(), "doc2ci {args:?} should have failed:\n{}", String::from_utf8_lossy(&out.stdout));
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Table counts as the real DuckDB sees them (`pip install duckdb` is part of the test setup).
pub fn duckdb(warehouse: &Path) -> serde_json::Value {
    let out = Command::new("python3")
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args(["-m", "peers.duckdb_check"])
        .arg(warehouse)
        .output()
        .expect("python3");
    assert!(out.status.success(), "DuckDB could not read the warehouse: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Every Parquet file under a folder with its modification time, to prove files were untouched.
pub fn file_times(dir: &Path) -> Vec<(PathBuf, std::time::SystemTime)> {
    let mut v = Vec::new();
    fn walk(d: &Path, v: &mut Vec<(PathBuf, std::time::SystemTime)>) {
        for e in std::fs::read_dir(d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(&p, v);
            } else if p.extension().is_some_and(|x| x == "parquet") {
                v.push((p.clone(), e.metadata().unwrap().modified().unwrap()));
            }
        }
    }
    walk(dir, &mut v);
    v.sort();
    v
}

/// Rows of a query run by the real DuckDB; `{wh}` in the SQL stands for the warehouse folder.
pub fn duck(wh: &Path, sql: &str) -> Vec<Vec<serde_json::Value>> {
    let sql = sql.replace("{wh}", wh.to_str().unwrap());
    let out = std::process::Command::new("python3")
        .args([
            "-c",
            "import duckdb,json,sys; print(json.dumps(duckdb.connect().execute(sys.argv[1]).fetchall(), default=str))",
            &sql,
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "DuckDB: {}\n{sql}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// `doc2ci run --config config` with a pause at every checkpointed batch, killed with SIGKILL once
/// `done()` holds (or after 120 s): a kill that lands mid-stage.
pub fn run_killed_when(config: &str, done: impl Fn() -> bool) {
    run_killed_with(config, ("DOC2CI_TEST_BATCH_DELAY_MS", "150"), done)
}

/// As [`run_killed_when`], with the engine's pause `hook` (the variable, milliseconds) instead.
pub fn run_killed_with(config: &str, hook: (&str, &str), done: impl Fn() -> bool) {
    let mut child = doc2ci(&["run", "--config", config])
        .env(hook.0, hook.1)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let t0 = std::time::Instant::now();
    while !done() && t0.elapsed() < std::time::Duration::from_secs(120) {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
}

/// The body of one HTTP/1.1 request read from `s` (a loopback test server's), by its
/// Content-Length.
pub fn request_body(s: &std::net::TcpStream) -> Option<String> {
    use std::io::{BufRead, BufReader, Read};
    let mut r = BufReader::new(s.try_clone().ok()?);
    let mut len = 0usize;
    loop {
        let mut line = String::new();
        if r.read_line(&mut line).ok()? == 0 {
            return None;
        }
        if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
            len = v.trim().parse().unwrap_or(0);
        }
        if line == "\r\n" {
            break;
        }
    }
    let mut body = vec![0u8; len];
    r.read_exact(&mut body).ok()?;
    Some(String::from_utf8_lossy(&body).into_owned())
}

/// What a loopback test server sends back: a status line, extra header lines (each ending in
/// CRLF) and a JSON body.
pub struct Reply {
    pub status: &'static str,
    pub headers: &'static str,
    pub body: String,
}

impl Reply {
    pub fn ok(body: String) -> Reply {
        Reply { status: "200 OK", headers: "", body }
    }
}

/// A chat-completions reply whose answer is `content`.
pub fn chat_reply(content: &str) -> Reply {
    Reply::ok(
        serde_json::json!({"id": "x", "object": "chat.completion", "model": "m",
            "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": content}}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5}})
        .to_string(),
    )
}

/// A loopback HTTP server on `l`: each request's body is handed to `answer` on a thread of its
/// own, and what it returns is sent (None: nothing, as a server that hangs).
pub fn serve(l: std::net::TcpListener, answer: impl Fn(&str) -> Option<Reply> + Send + Sync + 'static) {
    use std::io::Write;
    let answer = std::sync::Arc::new(answer);
    std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(mut s) = s else { continue };
            let answer = answer.clone();
            std::thread::spawn(move || {
                let Some(body) = request_body(&s) else { return };
                if let Some(Reply { status, headers, body }) = answer(&body) {
                    let _ = write!(
                        s,
                        "HTTP/1.1 {status}\r\nContent-Type: application/json\r\n{headers}Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
                        body.len()
                    );
                }
            });
        }
    });
}
