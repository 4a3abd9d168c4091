//! Issue 16: `backend = "openai-batch"` end to end against `peers/batch_server.py`, a
//! stand-in for OpenAI's Files and Batches endpoints on loopback (it is not OpenAI; it serves the
//! documented objects, status sequence and file lines, checks the bearer key, and fails some lines
//! on purpose). Then the same requests as files: `export requests`, answered by that server as a
//! `vllm run-batch` job would, read back with `format = "openai-batch"`.

use crate::common::*;
use crate::generate::{small_docs, study, GENS};

use std::io::BufRead;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const KEY: &str = "sk-batch-STANDIN-0123456789";

struct BatchServer {
    child: Child,
    url: String,
}

impl BatchServer {
    fn start(seconds: f64, fail_every: u32) -> BatchServer {
        let mut child = Command::new("python3")
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .args(["-m", "peers.batch_server"])
            .args(["--key", KEY, "--seconds", &seconds.to_string(), "--fail-every", &fail_every.to_string()])
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("python3");
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
        let port = line.trim().strip_prefix("listening on ").expect("the server says its port").to_string();
        BatchServer { child, url: format!("http://127.0.0.1:{port}") }
    }

    fn stats(&self) -> serde_json::Value {
        let out = Command::new("python3")
            .args([
                "-c",
                &format!("import urllib.request;print(urllib.request.urlopen('{}/stats').read().decode())", self.url),
            ])
            .output()
            .unwrap();
        serde_json::from_slice(&out.stdout).unwrap_or_else(|_| panic!("{}", String::from_utf8_lossy(&out.stderr)))
    }
}

impl Drop for BatchServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn model(url: &str) -> String {
    format!(
        "[[models]]\nname = \"batched\"\nbackend = \"openai-batch\"\nbase_url = \"{url}/v1\"\nmodel = \"gpt-x\"\n\
         api_key_env = \"BATCH_KEY\"\nprice_per_1k_input = 0.5\nprice_per_1k_output = 1.0\n"
    )
}

const OFF: &str =
    "[stages.validate]\nenabled = false\n[stages.score]\nenabled = false\n[stages.lint]\nenabled = false\n";

/// Killed while its batch is in flight, the run resumes by polling the same batch: one batch
/// created in all, every request asked once, partial failures kept as error rows.
#[test]
fn a_batch_in_flight_survives_kill_9_and_is_never_submitted_twice() {
    let srv = BatchServer::start(4.0, 3);
    let dir = tempfile::tempdir().unwrap();
    let docs = small_docs(dir.path(), 8, None);
    let cfg = accept_errors(study(dir.path(), &docs, &model(&srv.url), OFF));
    let c = cfg.to_str().unwrap();
    let mut child = doc2ci(&["run", "--config", c])
        .env("BATCH_KEY", KEY)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let t0 = Instant::now();
    while srv.stats()["batches_created"] != 1 && t0.elapsed() < Duration::from_secs(120) {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(srv.stats()["batches_created"], 1, "the run created its batch");
    child.kill().unwrap(); // SIGKILL, the batch still in progress (4 s)
    child.wait().unwrap();
    let wh = dir.path().join("wh");
    assert!(
        !wh.join("generations").exists() || duck(&wh, &format!("SELECT COUNT(*) FROM {GENS}"))[0][0] == 0,
        "nothing was published before the batch ended"
    );
    let out = doc2ci(&["run", "--config", c]).env("BATCH_KEY", KEY).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("submitted before the kill"), "the resumed run polls the old batch: {err}");
    let s = srv.stats();
    assert_eq!(s["batches_created"], 1, "submitted twice: {s}");
    assert_eq!(s["lines_submitted"], 8);
    let rows = duck(
        &wh,
        &format!("SELECT pair_id, sample, round, output, error, cost, attempts FROM {GENS} ORDER BY pair_id"),
    );
    assert_eq!(rows.len(), 8);
    let (ok, failed): (Vec<_>, Vec<_>) = rows.iter().partition(|r| r[4].is_null());
    assert!(!ok.is_empty() && !failed.is_empty(), "the stand-in fails some lines on purpose: {rows:?}");
    for r in &ok {
        let id = format!("{}/{}/{}", r[0].as_str().unwrap(), r[1], r[2]);
        assert!(r[3].as_str().unwrap().contains(&format!("echo {id}")), "answer of {id}: {r:?}");
        assert!(r[5].as_f64().unwrap() > 0.0, "cost from the batch prices: {r:?}");
    }
    for r in &failed {
        let e = r[4].as_str().unwrap();
        assert!(e.contains("HTTP 400") || e.contains("server_error"), "{e}");
        assert!(!e.contains(KEY));
    }
    // A failed line is not an answer: the next run asks exactly those again, in one new batch
    // (the stand-in fails them again), and never an answered one.
    run_ok_env(c);
    let s = srv.stats();
    assert_eq!(
        (s["batches_created"].as_u64(), s["lines_submitted"].as_u64()),
        (Some(2), Some(8 + failed.len() as u64))
    );
    assert_eq!(duck(&wh, &format!("SELECT COUNT(*) FROM {GENS} WHERE error IS NOT NULL"))[0][0], failed.len());
}

/// The stand-in fails a third of the lines on purpose: a study that accepts that many errored
/// requests (each run still says how many are missing).
fn accept_errors(cfg: std::path::PathBuf) -> std::path::PathBuf {
    let text = std::fs::read_to_string(&cfg).unwrap().replace("threads = 2\n", "threads = 2\nmax_error_rate = 1.0\n");
    std::fs::write(&cfg, text).unwrap();
    cfg
}

fn run_ok_env(c: &str) {
    let out = doc2ci(&["run", "--config", c]).env("BATCH_KEY", KEY).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}

/// `export requests` writes the files a `vllm run-batch` job reads; its output file, read back
/// with `format = "openai-batch"`, gives the same rows as the batch backend.
#[test]
fn exported_requests_answered_offline_come_back_as_the_same_rows() {
    let srv = BatchServer::start(0.5, 3);
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let docs = small_docs(d, 6, None);
    let cfg = accept_errors(study(d, &docs, &model(&srv.url), OFF));
    let c = cfg.to_str().unwrap();
    // Pairs only (the run says generation is left out; the export needs no answers).
    doc2ci(&["run", "--config", c, "--only", "import", "--only", "dedupe"]).output().unwrap();
    let out = d.join("requests");
    let said = run_ok(&["export", "requests", "--config", c, "--out", out.to_str().unwrap()]);
    assert!(said.contains("github-actions/batched: 6"), "{said}");
    let file = out.join("github-actions/batched.jsonl");
    let lines: Vec<serde_json::Value> =
        std::fs::read_to_string(&file).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(lines.len(), 6);
    for l in &lines {
        assert_eq!(l["method"], "POST");
        assert_eq!(l["url"], "/v1/chat/completions");
        assert_eq!(l["body"]["model"], "gpt-x");
        assert!(l["body"]["messages"].as_array().unwrap().len() >= 2);
    }
    // The offline job: the stand-in answers the file (upload, batch, download), as vLLM would.
    let results = d.join("results.jsonl");
    let py = format!(
        r#"
import json, time, urllib.request, uuid
base, key = "{url}/v1", "{KEY}"
def call(method, path, data=None, ctype="application/json"):
    r = urllib.request.Request(base + path, data=data, method=method, headers={{"Authorization": "Bearer " + key, "Content-Type": ctype}})
    return urllib.request.urlopen(r).read()
b = uuid.uuid4().hex
body = (f"--{{b}}\r\nContent-Disposition: form-data; name=\"purpose\"\r\n\r\nbatch\r\n--{{b}}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"r.jsonl\"\r\n\r\n").encode() + open("{file}", "rb").read() + f"\r\n--{{b}}--\r\n".encode()
fid = json.loads(call("POST", "/files", body, "multipart/form-data; boundary=" + b))["id"]
batch = json.loads(call("POST", "/batches", json.dumps({{"input_file_id": fid, "endpoint": "/v1/chat/completions", "completion_window": "24h"}}).encode()))
while batch["status"] != "completed":
    time.sleep(0.2); batch = json.loads(call("GET", "/batches/" + batch["id"]))
with open("{results}", "wb") as f:
    for k in ("output_file_id", "error_file_id"):
        if batch[k]: f.write(call("GET", "/files/" + batch[k] + "/content"))
"#,
        url = srv.url,
        file = file.display(),
        results = results.display()
    );
    let o = Command::new("python3").args(["-c", &py]).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // The files' rows and the backend's rows, in two warehouses.
    let imported = d.join("imported");
    std::fs::create_dir_all(&imported).unwrap();
    let icfg = accept_errors(study(
        &imported,
        &docs,
        &format!(
            "[[models]]\nname = \"batched\"\nbackend = \"import\"\nformat = \"openai-batch\"\npath = \"{}\"\n",
            results.display()
        ),
        OFF,
    ));
    run_ok(&["run", "--config", icfg.to_str().unwrap()]);
    run_ok_env(c);
    let q = format!("SELECT pair_id, sample, round, output, error IS NULL FROM {GENS} ORDER BY pair_id");
    let a = duck(&imported.join("wh"), &q);
    let b = duck(&d.join("wh"), &q);
    assert_eq!(a.len(), 6);
    assert_eq!(a, b, "the offline answers and the backend's are the same rows");
    // A line naming no pair is an error naming the file and line.
    std::fs::write(&results, format!("{}\n", r#"{"custom_id":"nope/0/0","response":{"status_code":200,"body":{"choices":[{"message":{"content":"x"}}]}},"error":null}"#)).unwrap();
    let err = run_err(&["run", "--config", icfg.to_str().unwrap()]);
    assert!(err.contains("results.jsonl:1") && err.contains("is not a pair"), "{err}");
}
