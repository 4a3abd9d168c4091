//! Generation and repair end to end with real models: the embedded SmolLM2, a hostile HTTP
//! server for the failure paths, and repair of real invalid outputs from the llm4ci data.
//! Rows are read back with the real DuckDB.

use crate::common;
use common::*;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The first `n` records of the real GitHub Actions pairs, as a small llm4ci CSV (`ids`: only these).
pub(crate) fn small_docs(dir: &Path, n: usize, ids: Option<&[&str]>) -> PathBuf {
    let f = std::fs::File::open(shared().join("GitHubActions_Docs.csv.gz")).unwrap();
    let mut rdr = csv::Reader::from_reader(flate2::read::MultiGzDecoder::new(f));
    let path = dir.join("docs.csv");
    let mut w = csv::Writer::from_path(&path).unwrap();
    w.write_record(rdr.headers().unwrap()).unwrap();
    let mut k = 0;
    for r in rdr.records() {
        let r = r.unwrap();
        if ids.is_some_and(|ids| !ids.contains(&&r[0])) {
            continue;
        }
        w.write_record(&r).unwrap();
        k += 1;
        if k == n {
            break;
        }
    }
    w.flush().unwrap();
    path
}

pub(crate) fn study(dir: &Path, docs: &Path, models: &str, extra: &str) -> PathBuf {
    let s = format!(
        "[study]\nwarehouse = \"wh\"\nthreads = 2\n\n[[services]]\nname = \"github-actions\"\ndisplay = \"GitHub Actions\"\n\n\
         [[sources]]\nname = \"docs\"\nkind = \"import\"\nformat = \"llm4ci\"\npath = \"{}\"\nservice = \"github-actions\"\n\n{models}\n{extra}\n",
        docs.display()
    );
    let p = dir.join("pipeline.toml");
    std::fs::write(&p, s).unwrap();
    p
}

/// Generation alone, one request per checkpointed batch: the kill tests' stage settings.
pub(crate) const GENERATE_ONLY: &str = "[stages.generate]\nbatch_size = 1\n[stages.validate]\nenabled = false\n[stages.score]\nenabled = false\n[stages.lint]\nenabled = false\n";

pub(crate) const GENS: &str = "read_parquet('{wh}/generations/**/*.parquet', hive_partitioning=true)";

#[test]
fn embedded_model_generates_real_text_and_stores_it() {
    let dir = tempfile::tempdir().unwrap();
    let docs = small_docs(dir.path(), 4, None);
    let cfg = study(
        dir.path(),
        &docs,
        "[[models]]\nname = \"smollm2\"\nbackend = \"embedded\"\nmax_tokens = 48\nsize_b = 0.135\n\
         [[models]]\nname = \"own-file\"\nbackend = \"embedded\"\nmodel = \"weights/mine.gguf\"\nmax_tokens = 48\n",
        "[stages.score]\nenabled = false\n",
    );
    // Any GGUF a user points at: here the same weights under another name, so the answers must agree.
    let asset = std::env::var_os("DOC2CI_ASSETS")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(std::env::var("HOME").unwrap()).join(".cache/doc2ci/assets"))
        .join("models/smollm2-135m-instruct/SmolLM2-135M-Instruct.Q4_1.gguf");
    std::fs::create_dir_all(dir.path().join("weights")).unwrap();
    std::os::unix::fs::symlink(&asset, dir.path().join("weights/mine.gguf")).unwrap();
    let out = run_ok(&["run", "--config", cfg.to_str().unwrap()]);
    assert!(out.contains("generate generations/service=github-actions/model=smollm2"), "{out}");
    let wh = dir.path().join("wh");
    let mine = duck(&wh, &format!("SELECT pair_id, raw_output FROM {GENS} WHERE model = 'own-file' ORDER BY pair_id"));
    let ours = duck(&wh, &format!("SELECT pair_id, raw_output FROM {GENS} WHERE model = 'smollm2' ORDER BY pair_id"));
    assert_eq!((mine.len(), &mine), (4, &ours), "the user's GGUF answers as the bundled one does");
    let rows = duck(&wh, &format!("SELECT pair_id, output, raw_output, completion_tokens, error, finish_reason, latency_ms, round, sample FROM {GENS} WHERE model = 'smollm2' ORDER BY pair_id"));
    assert_eq!(rows.len(), 4);
    for r in &rows {
        assert!(r[4].is_null(), "error: {r:?}");
        let raw = r[2].as_str().unwrap();
        assert!(raw.trim().len() > 10, "real text comes back: {raw:?}");
        assert!(r[1].is_string());
        let toks = r[3].as_u64().unwrap();
        assert!(toks > 0 && toks <= 48, "tokens {toks} within the cap");
        assert!(r[6].as_f64().unwrap() > 0.0);
        assert_eq!(r[7], 0);
        assert_eq!(r[8], 0);
    }
    // Validations follow the generations; a re-run does nothing.
    let v = duck(&wh, "SELECT COUNT(*) FROM read_parquet('{wh}/validations/**/*.parquet', hive_partitioning=true) WHERE model = 'smollm2'");
    assert_eq!(v[0][0], 4);
    assert!(run_ok(&["run", "--config", cfg.to_str().unwrap()]).contains("nothing to do"));
}

pub(crate) fn walk_files(d: &Path) -> Vec<PathBuf> {
    let mut v = Vec::new();
    for e in std::fs::read_dir(d).into_iter().flatten().flatten() {
        if e.path().is_dir() {
            v.extend(walk_files(&e.path()));
        } else {
            v.push(e.path());
        }
    }
    v
}

/// The first `n` real pairs answered by the embedded SmolLM2 (16 tokens), generation alone.
fn smollm2_generates(dir: &Path, n: usize) -> PathBuf {
    let docs = small_docs(dir, n, None);
    study(dir, &docs, "[[models]]\nname = \"smollm2\"\nbackend = \"embedded\"\nmax_tokens = 16\n", GENERATE_ONLY)
}

#[test]
fn kill_9_mid_generation_then_rerun_generates_each_pair_once() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = smollm2_generates(dir.path(), 6);
    let c = cfg.to_str().unwrap();
    let ck = dir.path().join("wh/_doc2ci/checkpoints");
    let batches = |ck: &Path| {
        walk_files(ck)
            .into_iter()
            .filter(|p| p.to_string_lossy().contains("generations") && p.extension().is_some_and(|e| e == "parquet"))
            .collect::<Vec<_>>()
    };
    run_killed_with(c, ("DOC2CI_TEST_BATCH_DELAY_MS", "1500"), || batches(&ck).len() >= 2);
    let before = batches(&ck);
    assert!(before.len() >= 2 && before.len() < 6, "killed mid-generation: {} batches", before.len());
    // What the killed run had finished, as DuckDB reads the checkpoint files.
    let done = duck(
        Path::new("/"),
        &format!(
            "SELECT pair_id, latency_ms, raw_output FROM read_parquet([{}]) ORDER BY pair_id",
            before.iter().map(|p| format!("'{}'", p.display())).collect::<Vec<_>>().join(",")
        ),
    );

    let out = run_ok(&["run", "--config", c]);
    assert!(out.contains("resuming after"), "{out}");
    let wh = dir.path().join("wh");
    let n = duck(&wh, &format!("SELECT COUNT(*), COUNT(DISTINCT pair_id || '/' || sample) FROM {GENS}"));
    assert_eq!(n[0][0], 6, "every pair once");
    assert_eq!(n[0][1], 6);
    // Finished answers were kept, not asked again (a new request would have its own latency).
    for d in &done {
        let r = duck(
            &wh,
            &format!("SELECT latency_ms, raw_output FROM {GENS} WHERE pair_id = '{}'", d[0].as_str().unwrap()),
        );
        assert_eq!(r[0][0], d[1]);
        assert_eq!(r[0][1], d[2]);
    }
    assert!(batches(&ck).is_empty(), "checkpoints cleared once the partition is final");
}

/// A kill after a partition landed but before the engine recorded it: the next run re-runs the
/// partition (it has no record of it), and must find every answer still in the checkpoint.
#[test]
fn kill_9_between_publish_and_record_asks_nothing_again() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = smollm2_generates(dir.path(), 3);
    let c = cfg.to_str().unwrap();
    let gens = dir.path().join("wh/generations");
    let landed = |d: &Path| walk_files(d).into_iter().filter(|p| p.extension().is_some_and(|e| e == "parquet")).count();
    // Killed inside the pause after the rename.
    run_killed_with(c, ("DOC2CI_TEST_PUBLISHED_DELAY_MS", "1500"), || landed(&gens) > 0);
    assert_eq!(landed(&gens), 1, "the generations partition landed before the kill");
    let first = duck(&dir.path().join("wh"), &format!("SELECT pair_id, latency_ms, raw_output FROM {GENS} ORDER BY 1"));
    assert_eq!(first.len(), 3);

    let out = run_ok(&["run", "--config", c]);
    assert!(out.contains("resuming after 3 of 3 requests"), "every answer kept in the checkpoint: {out}");
    let again = duck(&dir.path().join("wh"), &format!("SELECT pair_id, latency_ms, raw_output FROM {GENS} ORDER BY 1"));
    assert_eq!(again, first, "no answer asked again");
    assert_eq!(walk_files(&dir.path().join("wh/_doc2ci/checkpoints")).len(), 0, "checkpoint cleared once recorded");
}

/// An OpenAI-compatible endpoint that answers by the pair's title: garbage, an empty answer,
/// invalid UTF-8, a body that never ends, or a proper completion.
/// One HTTP request's body, read off a connection (`None`: the client went away).
fn hostile_server() -> (String, std::thread::JoinHandle<()>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/v1", l.local_addr().unwrap());
    let h = std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(mut s) = s else { continue };
            std::thread::spawn(move || {
                let Some(body) = request_body(&s) else { return };
                let ok = |content: &str| {
                    let j = serde_json::json!({"id": "x", "object": "chat.completion", "model": "m",
                        "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": content}}],
                        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}});
                    j.to_string().into_bytes()
                };
                let send = |s: &mut std::net::TcpStream, b: &[u8]| {
                    let _ = write!(s, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n", b.len());
                    let _ = s.write_all(b);
                };
                if body.contains("GARBAGE") {
                    send(&mut s, b"<html>this is not json at all");
                } else if body.contains("EMPTYANSWER") {
                    send(&mut s, &ok(""));
                } else if body.contains("NONUTF8") {
                    let mut b = br#"{"choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":"on: "#.to_vec();
                    b.extend([0xff, 0xfe, 0xc3]);
                    b.extend(br#""}}]}"#);
                    send(&mut s, &b);
                } else if body.contains("ENDLESS") {
                    let _ = write!(s, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100000000\r\n\r\n{{\"choices\":[");
                    for _ in 0..600 {
                        if s.write_all(b" ").is_err() {
                            return;
                        }
                        std::thread::sleep(Duration::from_millis(50));
                    }
                } else {
                    send(&mut s, &ok("```yaml\non: push\njobs:\n  build:\n    runs-on: ubuntu-latest\n    steps:\n      - run: echo hi\n```"));
                }
            });
        }
    });
    (url, h)
}

#[test]
fn garbage_empty_non_utf8_and_endless_responses_are_error_rows_not_crashes() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let mut jsonl = String::new();
    for (i, t) in ["GARBAGE", "EMPTYANSWER", "NONUTF8", "ENDLESS", "FINE"].iter().enumerate() {
        jsonl.push_str(&serde_json::json!({"id": i.to_string(), "url": format!("https://example.com/{i}"), "title": t, "description": format!("case {t}"), "reference": "on: push\n"}).to_string());
        jsonl.push('\n');
    }
    std::fs::write(d.join("pairs.jsonl"), jsonl).unwrap();
    let (url, _server) = hostile_server();
    let cfg = format!(
        "[study]\nwarehouse = \"wh\"\nmax_error_rate = 1.0\n\n[[services]]\nname = \"github-actions\"\ndisplay = \"GitHub Actions\"\n\n\
         [[sources]]\nkind = \"import\"\nformat = \"jsonl\"\npath = \"pairs.jsonl\"\nservice = \"github-actions\"\n\n\
         [[models]]\nname = \"hostile\"\nbackend = \"openai\"\nbase_url = \"{url}\"\nmodel = \"m\"\nretries = 0\ntimeout_ms = 1500\nprice_per_1k_input = 1.0\nprice_per_1k_output = 2.0\n\n\
         [stages.score]\nenabled = false\n"
    );
    std::fs::write(d.join("pipeline.toml"), cfg).unwrap();
    let out = run_ok(&["run", "--config", d.join("pipeline.toml").to_str().unwrap()]);
    assert!(out.contains("2 answers, 3 errors"), "{out}");
    assert!(out.contains("3 answers missing") && out.contains("hostile: 3 of 5 requests"), "{out}");
    let wh = d.join("wh");
    let rows = duck(&wh, &format!("SELECT p.title, g.output, g.error, g.degenerate, g.degenerate_kind, g.cost FROM {GENS} g JOIN read_parquet('{{wh}}/pairs/**/*.parquet', hive_partitioning=true) p USING (pair_id) ORDER BY p.title"));
    let by: std::collections::HashMap<String, &Vec<serde_json::Value>> =
        rows.iter().map(|r| (r[0].as_str().unwrap().to_string(), r)).collect();
    assert_eq!(by.len(), 5);
    assert_eq!(
        by["FINE"][1], "on: push\njobs:\n  build:\n    runs-on: ubuntu-latest\n    steps:\n      - run: echo hi\n",
        "fences stripped"
    );
    assert!(by["FINE"][2].is_null());
    assert!((by["FINE"][5].as_f64().unwrap() - 0.02).abs() < 1e-9, "10 in × 1.0/1k + 5 out × 2.0/1k");
    assert_eq!(by["EMPTYANSWER"][3], true);
    assert_eq!(by["EMPTYANSWER"][4], "empty");
    for t in ["GARBAGE", "NONUTF8", "ENDLESS"] {
        assert!(by[t][1].is_null(), "{t}: no output");
        let e = by[t][2].as_str().unwrap_or_else(|| panic!("{t}: an error is recorded"));
        assert!(e.contains("hostile") && e.contains("127.0.0.1"), "{t}: the error names the model and endpoint: {e}");
    }
    // A failed request is not an answer (issue 44): only the two answers are validated, the empty
    // one as the model's failure.
    let v = duck(&wh, "SELECT schema_ok FROM read_parquet('{wh}/validations/**/*.parquet', hive_partitioning=true) ORDER BY schema_ok");
    assert_eq!(v, [[serde_json::json!(false)], [serde_json::json!(true)]]);
}

/// Real outputs of gemma3-12b for the first pairs of the real data: a mix of schema-valid
/// and schema-invalid files (the test checks which is which from the validator itself).
fn real_outputs(dir: &Path, n: usize) -> PathBuf {
    let f = std::fs::File::open(output_file("gemma3-12b")).unwrap();
    let mut rdr = csv::Reader::from_reader(flate2::read::MultiGzDecoder::new(f));
    let path = dir.join("gemma.csv");
    let mut w = csv::Writer::from_path(&path).unwrap();
    w.write_record(rdr.headers().unwrap()).unwrap();
    for r in rdr.records().take(n) {
        w.write_record(&r.unwrap()).unwrap();
    }
    w.flush().unwrap();
    path
}

/// Real pairs in the study of the repair tests: the first six of the real data, whose gemma3-12b
/// outputs are three schema-valid files (all rejected by actionlint) and three invalid ones.
const REPAIR_PAIRS: usize = 6;

/// The first real pairs with gemma3-12b's real outputs, repaired by the embedded model (`repair`:
/// more `[stages.repair]` keys).
fn repair_study(d: &Path, repair: &str) -> PathBuf {
    let docs = small_docs(d, REPAIR_PAIRS, None);
    let outs = real_outputs(d, REPAIR_PAIRS);
    let models = format!(
        "[[models]]\nname = \"gemma3-12b\"\nbackend = \"import\"\npath = \"{}\"\nfamily = \"gemma\"\n\n\
         [[models]]\nname = \"smollm2\"\nbackend = \"embedded\"\nmax_tokens = 64\nservices = []\n",
        outs.display()
    );
    let extra = format!(
        "[stages.score]\nenabled = false\n[stages.repair]\nenabled = true\nmodel = \"smollm2\"\nmodels = [\"gemma3-12b\"]\n{repair}"
    );
    study(d, &docs, &models, &extra)
}

#[test]
fn repair_of_real_invalid_outputs_with_the_embedded_model_is_monotone() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let cfg = repair_study(d, "rounds = 2\n[stages.lint]\nenabled = false\n");
    let out = run_ok(&["run", "--config", cfg.to_str().unwrap()]);
    let wh = d.join("wh");
    let vals = "read_parquet('{wh}/validations/**/*.parquet', hive_partitioning=true)";
    let r0 = duck(
        &wh,
        &format!("SELECT pair_id, schema_ok FROM {vals} WHERE model = 'gemma3-12b' AND round = 0 ORDER BY pair_id"),
    );
    let invalid0: Vec<&str> = r0.iter().filter(|r| r[1] == false).map(|r| r[0].as_str().unwrap()).collect();
    let valid0: Vec<&str> = r0.iter().filter(|r| r[1] == true).map(|r| r[0].as_str().unwrap()).collect();
    assert!(invalid0.len() >= 2 && !valid0.is_empty(), "the sample mixes valid and invalid real outputs: {r0:?}");

    // Zero valid outputs changed: no repair row exists for any output valid at round 0.
    let touched = duck(
        &wh,
        &format!(
            "SELECT COUNT(*) FROM {GENS} WHERE model = 'gemma3-12b' AND round > 0 AND pair_id IN ({})",
            valid0.iter().map(|p| format!("'{p}'")).collect::<Vec<_>>().join(",")
        ),
    );
    assert_eq!(touched[0][0], 0, "a valid output was sent for repair");
    // Round 1 revisits exactly the invalid ones, through the embedded model.
    let r1 = duck(
        &wh,
        &format!(
            "SELECT pair_id, raw_output, error FROM {GENS} WHERE model = 'gemma3-12b' AND round = 1 ORDER BY pair_id"
        ),
    );
    assert_eq!(r1.iter().map(|r| r[0].as_str().unwrap()).collect::<Vec<_>>(), invalid0);
    assert!(
        r1.iter().all(|r| r[2].is_null() && r[1].as_str().is_some_and(|t| !t.is_empty())),
        "real repairs came back: {r1:?}"
    );
    // Round-0 rows are the imported ones, untouched.
    let g0 = duck(&wh, &format!("SELECT COUNT(*) FROM {GENS} WHERE model = 'gemma3-12b' AND round = 0"));
    assert_eq!(g0[0][0], REPAIR_PAIRS);

    // Counts per round, consistent with the validations.
    let rep = duck(&wh, "SELECT round, total, valid_before, attempted, fixed, still_invalid, errors, valid_after, repair_model FROM read_parquet('{wh}/repairs/**/*.parquet', hive_partitioning=true) ORDER BY round");
    assert_eq!(rep.len(), 2, "{rep:?}");
    assert_eq!(rep[0][1], REPAIR_PAIRS);
    assert_eq!(rep[0][2].as_u64().unwrap(), valid0.len() as u64);
    assert_eq!(rep[0][3].as_u64().unwrap(), invalid0.len() as u64);
    for r in &rep {
        assert_eq!(r[3].as_u64().unwrap(), r[4].as_u64().unwrap() + r[5].as_u64().unwrap());
        assert_eq!(r[7].as_u64().unwrap(), r[2].as_u64().unwrap() + r[4].as_u64().unwrap());
        assert_eq!(r[8], "smollm2");
    }
    assert_eq!(rep[1][2], rep[0][7], "round 2 starts where round 1 ended");
    assert_eq!(rep[1][3], rep[0][5], "round 2 revisits exactly what round 1 left invalid");
    let fixed1 =
        duck(&wh, &format!("SELECT COUNT(*) FROM {vals} WHERE model = 'gemma3-12b' AND round = 1 AND schema_ok"));
    assert_eq!(fixed1[0][0], rep[0][4]);
    eprintln!("repair counts per round: {rep:?}\n{out}");

    // Nothing changed → nothing runs; one more round → only that round (and the summary) runs.
    let c = cfg.to_str().unwrap();
    assert!(run_ok(&["run", "--config", c]).contains("nothing to do"));
    std::fs::write(&cfg, std::fs::read_to_string(&cfg).unwrap().replace("rounds = 2", "rounds = 3")).unwrap();
    let plan = run_ok(&["plan", "--config", c]);
    let runs: Vec<&str> = plan.lines().filter(|l| l.starts_with("run ") || l.starts_with("maybe ")).collect();
    assert!(runs.iter().any(|l| l.contains("#round-3")), "{plan}");
    assert!(
        !runs.iter().any(|l| l.contains("#round-1") || l.contains("#round-2") || l.contains("generate ")),
        "{plan}"
    );
}

/// llama.cpp's own server (`peers/llama_server.py`, the `xllamacpp` wheel of scripts/deps.sh)
/// serving the SmolLM2 GGUF on a free loopback port; killed on drop.
struct LlamaServer(std::process::Child);

impl LlamaServer {
    fn start() -> (LlamaServer, String) {
        let assets = std::env::var_os("DOC2CI_ASSETS")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(std::env::var("HOME").unwrap()).join(".cache/doc2ci/assets"));
        let gguf = assets.join("models/smollm2-135m-instruct/SmolLM2-135M-Instruct.Q4_1.gguf");
        assert!(gguf.exists(), "{} missing: run `doc2ci setup`", gguf.display());
        let child = std::process::Command::new("python3")
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .args(["-m", "peers.llama_server"])
            // Port 0: the OS picks it at bind time; the launcher's start line says which.
            .args(["--port", "0", "--threads", "1", "--alias", "smollm2", "--model"])
            .arg(&gguf)
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("python3 -m peers.llama_server (scripts/deps.sh installs xllamacpp)");
        let mut s = LlamaServer(child);
        let port = {
            let mut lines = BufReader::new(s.0.stdout.take().unwrap()).lines();
            let mut port = None;
            for line in lines.by_ref() {
                let Ok(line) = line else { break };
                if let Some(rest) = line.split("listening on http://127.0.0.1:").nth(1) {
                    port = rest.split(|c: char| !c.is_ascii_digit()).next().and_then(|p| p.parse::<u16>().ok());
                    break;
                }
            }
            std::thread::spawn(move || lines.for_each(drop));
            port.expect("the llama.cpp server exited before it listened")
        };
        let t = Instant::now();
        loop {
            if let Ok(mut c) = std::net::TcpStream::connect(("127.0.0.1", port)) {
                let _ = c.write_all(b"GET /v1/models HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
                let mut r = String::new();
                let _ = c.read_to_string(&mut r);
                if r.starts_with("HTTP/1.1 200") {
                    break;
                }
            }
            assert!(t.elapsed() < Duration::from_secs(90), "the llama.cpp server did not come up");
            std::thread::sleep(Duration::from_millis(100));
        }
        (s, format!("http://127.0.0.1:{port}/v1"))
    }
}

impl Drop for LlamaServer {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn openai_backend_against_a_real_llama_cpp_server() {
    let dir = tempfile::tempdir().unwrap();
    let docs = small_docs(dir.path(), 3, None);
    let (_server, url) = LlamaServer::start();
    let cfg = study(
        dir.path(),
        &docs,
        &format!("[[models]]\nname = \"smollm2-server\"\nbackend = \"openai\"\nbase_url = \"{url}\"\nmodel = \"smollm2\"\nmax_tokens = 32\nconcurrency = 2\nretries = 2\n"),
        "[stages.validate]\nenabled = false\n[stages.score]\nenabled = false\n[stages.lint]\nenabled = false\n",
    );
    run_ok(&["run", "--config", cfg.to_str().unwrap()]);
    let rows = duck(
        &dir.path().join("wh"),
        &format!("SELECT raw_output, error, prompt_tokens, completion_tokens, attempts FROM {GENS}"),
    );
    assert_eq!(rows.len(), 3);
    for r in &rows {
        assert!(r[1].is_null(), "{r:?}");
        assert!(r[0].as_str().is_some_and(|t| !t.trim().is_empty()), "{r:?}");
        assert!(r[2].as_u64().unwrap() > 50, "the study's prompt is long: {r:?}");
        assert!(r[3].as_u64().unwrap() <= 32);
        assert!(r[4].as_u64().unwrap() >= 1);
    }
}

/// Issue 12: a whole study with a recognisable fake key, in the environment variable the config
/// names and pasted into the base URL (userinfo and query), leaves it nowhere: not in the
/// warehouse (tables, checkpoints, state, report), not in what the run prints, not in error rows.
#[test]
fn a_fake_key_is_never_written_or_printed() {
    const KEY: &str = "sk-doc2ci-FAKE-7f3a9c";
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let docs = small_docs(d, 6, None);
    let (url, _server) = hostile_server();
    let with_secrets = url.replacen("http://", &format!("http://user:{KEY}@"), 1) + &format!("?api-key={KEY}");
    let models = format!(
        "[[models]]\nname = \"keyed\"\nbackend = \"openai\"\nbase_urls = [\"{with_secrets}\", \"http://127.0.0.1:9/v1?key={KEY}\"]\n\
         model = \"m\"\napi_key_env = \"DOC2CI_E2E_FAKE_KEY\"\nretries = 0\ntimeout_ms = 2000\n"
    );
    let cfg = study(d, &docs, &models, "[stages.repair]\nenabled = true\nrounds = 1\n");
    let out = doc2ci(&["run", "--config", cfg.to_str().unwrap()]).env("DOC2CI_E2E_FAKE_KEY", KEY).output().unwrap();
    let printed = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(!printed.contains(KEY), "the key was printed:\n{printed}");
    // The run really asked (some requests reached the dead endpoint and failed, with the error stored).
    let wh = d.join("wh");
    let rows = duck(&wh, &format!("SELECT COUNT(*), COUNT(error) FROM {GENS}"));
    assert!(rows[0][0].as_u64().unwrap() >= 6, "{rows:?}\n{printed}");
    let mut hits = Vec::new();
    fn walk(p: &Path, key: &[u8], hits: &mut Vec<PathBuf>) {
        for e in std::fs::read_dir(p).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(&p, key, hits);
            } else if std::fs::read(&p).is_ok_and(|b| b.windows(key.len()).any(|w| w == key)) {
                hits.push(p);
            }
        }
    }
    walk(&wh, KEY.as_bytes(), &mut hits);
    assert!(hits.is_empty(), "the key is stored in {hits:?}");
    // Parquet pages may be compressed: read every text column back through DuckDB as well.
    let found = duck(
        &wh,
        &format!(
            "SELECT COUNT(*) FROM {GENS} WHERE contains(coalesce(error, '') || coalesce(raw_output, ''), '{KEY}')"
        ),
    );
    assert_eq!(found[0][0], 0);
}

#[test]
fn repair_with_lint_feedback_revisits_what_the_validator_rejects() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let cfg = repair_study(d, "rounds = 1\nfeedback = [\"schema\", \"lint\"]\n");
    run_ok(&["run", "--config", cfg.to_str().unwrap()]);
    let wh = d.join("wh");
    // Round 0's verdicts: schema validity and the validator (actionlint) of the lint stage.
    let bad = duck(
        &wh,
        "SELECT v.pair_id, v.schema_ok, l.ok FROM read_parquet('{wh}/validations/**/*.parquet', hive_partitioning=true) v \
         JOIN read_parquet('{wh}/lints/**/*.parquet', hive_partitioning=true) l ON v.pair_id = l.pair_id AND l.model = v.model \
         AND l.round = v.round AND l.kind = 'validator' WHERE v.model = 'gemma3-12b' AND v.round = 0 ORDER BY v.pair_id",
    );
    assert_eq!(bad.len(), REPAIR_PAIRS, "{bad:?}");
    let revisit: Vec<&str> =
        bad.iter().filter(|r| r[1] == false || r[2] == false).map(|r| r[0].as_str().unwrap()).collect();
    let lint_only = bad.iter().filter(|r| r[1] == true && r[2] == false).count();
    assert!(lint_only >= 1, "the sample has a schema-valid output that actionlint rejects: {bad:?}");
    let r1 =
        duck(&wh, &format!("SELECT pair_id FROM {GENS} WHERE model = 'gemma3-12b' AND round = 1 ORDER BY pair_id"));
    assert_eq!(r1.iter().map(|r| r[0].as_str().unwrap()).collect::<Vec<_>>(), revisit);
    // `repairs` counts each criterion.
    let rep = duck(
        &wh,
        "SELECT criterion, valid_before, attempted, fixed, valid_after FROM read_parquet('{wh}/repairs/**/*.parquet', hive_partitioning=true) ORDER BY criterion",
    );
    assert_eq!(rep.iter().map(|r| r[0].as_str().unwrap()).collect::<Vec<_>>(), ["schema", "schema+lint"]);
    let both = &rep[1];
    assert_eq!(both[1].as_u64().unwrap() as usize, REPAIR_PAIRS - revisit.len());
    assert_eq!(both[2].as_u64().unwrap() as usize, revisit.len());
    assert_eq!(both[4].as_u64().unwrap(), both[1].as_u64().unwrap() + both[3].as_u64().unwrap());
}

/// An OpenAI-compatible server that counts the requests it gets and answers 500 while `fail` is set.
fn counting_server(
    fail: std::sync::Arc<std::sync::atomic::AtomicBool>,
    usage: (u32, u32),
) -> (String, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    answering_server(fail, Some(usage), "on: push\njobs: {}\n")
}

/// As [`counting_server`], answering `content`, with `usage` in the body or none.
pub(crate) fn answering_server(
    fail: std::sync::Arc<std::sync::atomic::AtomicBool>,
    usage: Option<(u32, u32)>,
    content: &'static str,
) -> (String, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/v1", l.local_addr().unwrap());
    let n = std::sync::Arc::new(AtomicUsize::new(0));
    let count = n.clone();
    std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(mut s) = s else { continue };
            let (n, fail) = (count.clone(), fail.clone());
            std::thread::spawn(move || {
                if request_body(&s).is_none() {
                    return;
                }
                n.fetch_add(1, Ordering::SeqCst);
                let (status, b) = if fail.load(Ordering::SeqCst) {
                    ("500 Internal Server Error", b"{}".to_vec())
                } else {
                    let mut j = serde_json::json!({"id": "x", "object": "chat.completion", "model": "m",
                        "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": content}}]});
                    if let Some(usage) = usage {
                        j["usage"] = serde_json::json!({"prompt_tokens": usage.0, "completion_tokens": usage.1});
                    }
                    ("200 OK", j.to_string().into_bytes())
                };
                let _ = write!(s, "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n", b.len());
                let _ = s.write_all(&b);
            });
        }
    });
    (url, n)
}

/// Issue 16: a second study folder with the same model and prompts asks the server nothing and
/// pays nothing; failures are never kept; `--no-request-cache` asks anew.
#[test]
fn a_second_study_folder_asks_nothing_through_the_request_cache() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let root = tempfile::tempdir().unwrap();
    let cache = root.path().join("requests");
    let fail = std::sync::Arc::new(AtomicBool::new(true));
    let (url, asked) = counting_server(fail.clone(), (10, 5));
    let folder = |name: &str| {
        let d = root.path().join(name);
        std::fs::create_dir_all(&d).unwrap();
        let docs = small_docs(&d, 3, None);
        let models = format!(
            "[[models]]\nname = \"served\"\nbackend = \"openai\"\nbase_url = \"{url}\"\nmodel = \"m\"\nretries = 0\n\
             price_per_1k_input = 1.0\nprice_per_1k_output = 2.0\n"
        );
        study(
            &d,
            &docs,
            &models,
            "[stages.validate]\nenabled = false\n[stages.score]\nenabled = false\n[stages.lint]\nenabled = false\n",
        )
    };
    let run = |cfg: &Path, extra: &[&str]| {
        let mut args = vec!["run", "--config", cfg.to_str().unwrap()];
        args.extend(extra);
        let out = doc2ci(&args).env("DOC2CI_REQUEST_CACHE", &cache).output().unwrap();
        // Every request failing is above max_error_rate: the run says so and exits non-zero.
        let all_failed = String::from_utf8_lossy(&out.stdout).contains("served: 3 of 3 requests");
        assert_eq!(out.status.success(), !all_failed, "{}", String::from_utf8_lossy(&out.stderr));
        let wh = cfg.parent().unwrap().join("wh");
        duck(&wh, &format!("SELECT error IS NULL, attempts, cost FROM {GENS} ORDER BY pair_id"))
    };
    // The server fails: three error rows, and nothing kept.
    let a = run(&folder("a"), &[]);
    assert!(a.iter().all(|r| r[0] == false), "{a:?}");
    assert_eq!(asked.load(Ordering::SeqCst), 3);
    fail.store(false, Ordering::SeqCst);
    let b = run(&folder("b"), &[]);
    assert!(b.iter().all(|r| r[0] == true && r[1] == 1), "failures were asked again: {b:?}");
    assert_eq!(asked.load(Ordering::SeqCst), 6);
    // Another folder, the same model and prompts: nothing asked, nothing paid.
    let c = run(&folder("c"), &[]);
    assert_eq!(asked.load(Ordering::SeqCst), 6, "the second study folder asked the server");
    assert!(c.iter().all(|r| r[0] == true && r[1] == 0 && r[2].as_f64() == Some(0.0)), "{c:?}");
    // `cache stats`: three answers kept; the failing run missed 3, the second missed 3 and the
    // third found all 3.
    let cfg_c = root.path().join("c/pipeline.toml");
    let out = doc2ci(&["cache", "stats", "--config", cfg_c.to_str().unwrap()])
        .env("DOC2CI_REQUEST_CACHE", &cache)
        .output()
        .unwrap();
    let stats = String::from_utf8_lossy(&out.stdout);
    assert!(
        stats.contains("entries: 3\n") && stats.contains("hits: 3 (33.3% of lookups)") && stats.contains("misses: 6"),
        "{stats}"
    );
    let d = run(&folder("d"), &["--no-request-cache"]);
    assert_eq!(asked.load(Ordering::SeqCst), 9);
    assert!(d.iter().all(|r| r[1] == 1), "{d:?}");
}

/// Issue 16: `max_cost` stops a partition before the request that could exceed it, keeps every
/// answer, says what was spent and what is left; a larger budget then asks only the rest.
#[test]
fn a_budget_stops_generation_cleanly_and_a_larger_one_finishes_it() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // Each answer bills 400 prompt + 64 completion tokens: 0.4 + 0.128 at these prices.
    let (url, asked) = counting_server(std::sync::Arc::new(AtomicBool::new(false)), (400, 64));
    let docs = small_docs(d, 4, None);
    let model = |budget: f64| {
        format!(
            "[[models]]\nname = \"paid\"\nbackend = \"openai\"\nbase_url = \"{url}\"\nmodel = \"m\"\nmax_tokens = 64\n\
             concurrency = 1\nretries = 0\nprice_per_1k_input = 1.0\nprice_per_1k_output = 2.0\nmax_cost = {budget}\n"
        )
    };
    let off = "[stages.validate]\nenabled = false\n[stages.score]\nenabled = false\n[stages.lint]\nenabled = false\n";
    // Each request reserves its bound for any text, 1.21 to 1.38 here (prompt bytes + 48, and the cap).
    let cfg = study(d, &docs, &model(2.0), off);
    let c = cfg.to_str().unwrap();
    let out = doc2ci(&["run", "--config", c]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "the budget stops the run");
    assert!(
        err.contains("budget reached") && err.contains("model `paid` spent") && err.contains("of max_cost 2.0000"),
        "{err}"
    );
    assert!(err.contains("of 4 requests of this partition left to ask"), "{err}");
    let first = asked.load(Ordering::SeqCst);
    assert!((1..4).contains(&first), "asked {first} of 4 within 2.0");
    // Spent stays within the budget: each request was admitted on its upper-bound estimate.
    assert!(first as f64 * 0.528 <= 2.0, "{first} answers cost more than the budget");
    // A larger budget asks only what is left.
    std::fs::write(&cfg, std::fs::read_to_string(&cfg).unwrap().replace("max_cost = 2", "max_cost = 100")).unwrap();
    run_ok(&["run", "--config", c]);
    assert_eq!(asked.load(Ordering::SeqCst), 4, "every request asked exactly once across the two runs");
    let rows = duck(&d.join("wh"), &format!("SELECT COUNT(*), SUM(cost) FROM {GENS} WHERE error IS NULL"));
    assert_eq!(rows[0][0], 4);
}

/// Issue 30: a server that reports no usage is charged each request's reservation (an upper bound
/// for any text), so the budget still binds: before, such answers cost 0 and a budget never stopped.
#[test]
fn answers_without_usage_are_charged_their_bound_and_the_budget_holds() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (url, asked) = answering_server(std::sync::Arc::new(AtomicBool::new(false)), None, "on: push\njobs: {}\n");
    let docs = small_docs(d, 4, None);
    let model = format!(
        "[[models]]\nname = \"paid\"\nbackend = \"openai\"\nbase_url = \"{url}\"\nmodel = \"m\"\nmax_tokens = 64\n\
         concurrency = 1\nretries = 0\nprice_per_1k_input = 1.0\nprice_per_1k_output = 2.0\nmax_cost = 1.6\n"
    );
    let off = "[stages.validate]\nenabled = false\n[stages.score]\nenabled = false\n[stages.lint]\nenabled = false\n";
    let cfg = study(d, &docs, &model, off);
    let out = doc2ci(&["run", "--config", cfg.to_str().unwrap()]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("budget reached"), "{err}");
    let n = asked.load(Ordering::SeqCst);
    assert!((1..4).contains(&n), "asked {n} of 4");
    // What the ledger charged: within the budget, and more than nothing.
    let spent: f64 = err.split("model `paid` spent ").nth(1).unwrap().split(' ').next().unwrap().parse().unwrap();
    assert!(spent > 0.0 && spent <= 1.6, "spent {spent}: {err}");
    // Each answer was charged its whole bound: at least the cap's price (64 × 2 / 1000) each.
    assert!(spent >= n as f64 * 0.128, "{spent} < {n} × the output cap's price");
}
