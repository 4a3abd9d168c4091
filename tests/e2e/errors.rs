//! Issue 44: an error is not an answer. A loopback OpenAI-compatible server fails chosen requests
//! (HTTP 500 on every retry, a timeout, a 429 storm, an `error` object in a 200 reply) or is not
//! there at all (connection refused): the failed requests have no validation, lint or score row,
//! are in no n, rate or test, are counted per model in `model_summary`, the report and the run's
//! closing words; the next run asks exactly them again; too many fail the run.

use crate::common::*;

use std::collections::HashMap;
use std::io::Write;
use std::net::TcpListener;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How the server fails a request whose prompt holds the title.
const FAILS: &[&str] = &["FAIL500", "TIMEOUT", "RATE429", "ERROROBJECT"];
const ANSWERS: &[&str] = &["FINE1", "FINE2", "FINE3"];

/// A server on `l` that fails each [`FAILS`] title its own way until `healed`, and answers a
/// valid workflow otherwise; it counts the requests it receives per title.
fn flaky_server(l: TcpListener, healed: Arc<AtomicBool>) -> Arc<Mutex<HashMap<String, usize>>> {
    let asked: Arc<Mutex<HashMap<String, usize>>> = Arc::default();
    let count = asked.clone();
    serve(l, move |body| {
        let title = FAILS.iter().chain(ANSWERS).find(|t| body.contains(*t)).copied().unwrap_or("?");
        *count.lock().unwrap().entry(title.to_string()).or_default() += 1;
        let failing = !healed.load(Ordering::SeqCst);
        match title {
            "FAIL500" if failing => {
                Some(Reply { status: "500 Internal Server Error", headers: "", body: "{\"error\": \"boom\"}".into() })
            }
            "TIMEOUT" if failing => {
                std::thread::sleep(Duration::from_secs(4));
                None
            }
            "RATE429" if failing => {
                Some(Reply { status: "429 Too Many Requests", headers: "Retry-After: 0\r\n", body: "{}".into() })
            }
            "ERROROBJECT" if failing => Some(Reply::ok(
                "{\"error\": {\"message\": \"The server had an error while processing your request\", \"type\": \"server_error\"}}"
                    .into(),
            )),
            _ => Some(chat_reply("on: push\njobs:\n  build:\n    runs-on: ubuntu-latest\n    steps:\n      - run: echo hi\n")),
        }
    });
    asked
}

/// The pairs (one per title) and a study asking the server at `url`, validate and score on.
fn flaky_study(d: &Path, titles: &[&str], url: &str, extra: &str) -> String {
    let pairs: String = titles
        .iter()
        .enumerate()
        .map(|(i, t)| {
            serde_json::json!({"id": i.to_string(), "url": format!("https://docs.example.com/{i}"), "title": t,
                "description": format!("Run a build on push ({t})."),
                "reference": "on: push\njobs:\n  build:\n    runs-on: ubuntu-latest\n    steps:\n      - run: echo hi\n"})
            .to_string()
                + "\n"
        })
        .collect();
    std::fs::write(d.join("pairs.jsonl"), pairs).unwrap();
    let cfg = format!(
        "[study]\nwarehouse = \"wh\"\n{extra}\n[[services]]\nname = \"github-actions\"\ndisplay = \"GitHub Actions\"\n\n\
         [[sources]]\nkind = \"import\"\nformat = \"jsonl\"\npath = \"pairs.jsonl\"\nservice = \"github-actions\"\n\n\
         [[models]]\nname = \"flaky\"\nbackend = \"openai\"\nbase_url = \"{url}\"\nmodel = \"m\"\nretries = 2\ntimeout_ms = 1000\n\n\
         [stages.lint]\nenabled = false\n"
    );
    let path = d.join("pipeline.toml");
    std::fs::write(&path, cfg).unwrap();
    path.display().to_string()
}

const GENS: &str = "read_parquet('{wh}/generations/**/*.parquet', hive_partitioning=true)";

fn count(wh: &Path, table: &str) -> u64 {
    duck(wh, &format!("SELECT COUNT(*) FROM read_parquet('{{wh}}/{table}/**/*.parquet', hive_partitioning=true)"))[0][0]
        .as_u64()
        .unwrap()
}

#[test]
fn errored_requests_are_not_answers_are_counted_and_are_asked_again() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/v1", l.local_addr().unwrap());
    let healed = Arc::new(AtomicBool::new(false));
    let asked = flaky_server(l, healed.clone());
    let titles: Vec<&str> = ANSWERS.iter().chain(FAILS).copied().collect();
    let cfg = flaky_study(d, &titles, &url, "");
    let wh = d.join("wh");

    // First run: 4 of 7 requests fail, above the default max_error_rate: the run says so and
    // exits non-zero, keeping everything it did.
    let out = doc2ci(&["run", "--config", &cfg]).output().unwrap();
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(!out.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.contains("4 answers missing") && stdout.contains("flaky: 4 of 7 requests"), "{stdout}");
    assert!(stderr.contains("max_error_rate = 0.02") && stderr.contains("flaky: 4 of 7 requests (57.1%"), "{stderr}");
    assert!(stderr.contains("e.g. model `flaky` (openai http://127.0.0.1"), "the verdict names the endpoint: {stderr}");
    let errors = duck(&wh, &format!("SELECT p.title, g.error FROM {GENS} g JOIN read_parquet('{{wh}}/pairs/**/*.parquet', hive_partitioning=true) p USING (pair_id) WHERE g.error IS NOT NULL ORDER BY p.title"));
    let failed: Vec<&str> = errors.iter().map(|r| r[0].as_str().unwrap()).collect();
    assert_eq!(failed, ["ERROROBJECT", "FAIL500", "RATE429", "TIMEOUT"]);
    for r in &errors {
        assert!(r[1].as_str().unwrap().contains("flaky"), "the error names the model: {r:?}");
    }
    // No validation or score row for an error; n counts answers only; errors beside it.
    assert_eq!((count(&wh, "generations"), count(&wh, "validations"), count(&wh, "scores")), (7, 3, 3));
    let summary =
        run_ok(&["sql", "--config", &cfg, "--format", "csv", "SELECT model, n, errors, schema_pct FROM model_summary"]);
    assert!(summary.contains("flaky,3,4,100.0"), "{summary}");
    let stats = duck(&wh, "SELECT n FROM read_parquet('{wh}/stats/*.parquet') WHERE test = 'mean' AND metric = 'schema_ok' AND group_a = 'flaky' AND service = 'all'");
    assert_eq!(stats, [[serde_json::json!(3)]], "rates are over answers");
    let report = std::fs::read_to_string(wh.join("report/index.html")).unwrap();
    let said = report.find("4 requests errored").expect("the report says how many errored");
    assert!(said < report.find("<table").unwrap(), "before any table");
    // `plan` says why the partition runs again.
    let plan = run_ok(&["plan", "--config", &cfg]);
    assert!(plan.contains("4 errored answers to ask again"), "{plan}");

    // The server recovers: the next run asks exactly the four, once each, and nothing else.
    let before = asked.lock().unwrap().clone();
    assert!(before["FAIL500"] >= 3 && before["RATE429"] >= 3, "retried first: {before:?}");
    healed.store(true, Ordering::SeqCst);
    let out = run_ok(&["run", "--config", &cfg]);
    assert!(!out.contains("answers missing"), "{out}");
    let after = asked.lock().unwrap().clone();
    for t in &titles {
        let again = after[*t] - before[*t];
        assert_eq!(again, usize::from(FAILS.contains(t)), "{t}: asked {again} more times");
    }
    assert_eq!((count(&wh, "validations"), count(&wh, "scores")), (7, 7));
    let summary = run_ok(&["sql", "--config", &cfg, "--format", "csv", "SELECT model, n, errors FROM model_summary"]);
    assert!(summary.contains("flaky,7,0"), "{summary}");
    assert!(run_ok(&["run", "--config", &cfg]).contains("nothing to do"));
    assert_eq!(*asked.lock().unwrap(), after);
}

/// A server that is down for the whole run: every request is refused. Below a raised
/// `max_error_rate` the run exits 0 and says what is missing; the model has no n and no mean
/// (not a mean cosine of 0.07 over nothing). When the server is up, the next run asks them all.
#[test]
fn a_server_down_for_the_whole_run_gives_no_answers_not_bad_ones() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let url = format!("http://127.0.0.1:{port}/v1");
    let cfg = flaky_study(d, ANSWERS, &url, "max_error_rate = 1.0\n");
    let wh = d.join("wh");
    let out = run_ok(&["run", "--config", &cfg]);
    assert!(out.contains("3 answers missing") && out.contains("flaky: 3 of 3 requests (100.0%"), "{out}");
    assert_eq!((count(&wh, "generations"), count(&wh, "validations")), (3, 0));
    let summary = run_ok(&[
        "sql",
        "--config",
        &cfg,
        "--format",
        "csv",
        "SELECT model, n, errors, mean_cosine FROM model_summary",
    ]);
    assert!(summary.lines().any(|l| l == "flaky,0,3,"), "{summary}");
    let means = duck(&wh, "SELECT COUNT(*) FROM read_parquet('{wh}/stats/*.parquet') WHERE group_a = 'flaky'");
    assert_eq!(means, [[serde_json::json!(0)]]);
    // Up again, on the same port.
    let l = TcpListener::bind(("127.0.0.1", port)).unwrap();
    let asked = flaky_server(l, Arc::new(AtomicBool::new(true)));
    run_ok(&["run", "--config", &cfg]);
    assert_eq!(asked.lock().unwrap().values().sum::<usize>(), 3);
    let summary = run_ok(&["sql", "--config", &cfg, "--format", "csv", "SELECT model, n, errors FROM model_summary"]);
    assert!(summary.contains("flaky,3,0"), "{summary}");
}

/// Imports: a 100 MiB output record and one that is not UTF-8 are the model's failed answers,
/// counted in n; the other rows import; a record whose id cannot be attached is the only bad row.
#[test]
fn oversized_and_undecodable_imported_outputs_are_the_models_failures() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let reference = "on: push\njobs:\n  build:\n    runs-on: ubuntu-latest\n    steps:\n      - run: make\n";
    let pairs: Vec<serde_json::Value> = (0..4)
        .map(|i| serde_json::json!({"id": i.to_string(), "title": format!("T{i}"), "description": format!("D{i}"), "reference": reference}))
        .collect();
    let cfg =
        jsonl_study(d, ("github-actions", "GitHub Actions"), "m", (&pairs, &[]), "[stages.lint]\nenabled = false\n");
    let mut outputs = Vec::new();
    writeln!(outputs, "{}", serde_json::json!({"id": "0", "output": reference})).unwrap();
    // 100 MiB: a model that repeated a line.
    write!(outputs, "{{\"id\": \"1\", \"output\": \"").unwrap();
    for _ in 0..(100 << 20) / 16 {
        outputs.extend_from_slice(b"      - run: x\\n");
    }
    writeln!(outputs, "\"}}").unwrap();
    outputs.extend_from_slice(b"{\"id\": \"2\", \"output\": \"on: push\\njobs: \xff\xfe\"}\n");
    writeln!(outputs, "{}", serde_json::json!({"id": "3", "output": reference})).unwrap();
    std::fs::write(d.join("outputs.jsonl"), &outputs).unwrap();
    let c = cfg.to_str().unwrap();
    run_ok(&["run", "--config", c]);
    let wh = d.join("wh");
    let rows = duck(&wh, &format!("SELECT p.title, g.degenerate_kind, length(g.output), g.error FROM {GENS} g JOIN read_parquet('{{wh}}/pairs/**/*.parquet', hive_partitioning=true) p USING (pair_id) ORDER BY p.title"));
    assert_eq!(rows.len(), 4, "{rows:?}");
    assert_eq!(rows[1][1], "oversized");
    assert_eq!(rows[1][2], 65536, "cut to the bound the score stage reads");
    assert_eq!(rows[2][1], "undecodable");
    assert!(rows.iter().all(|r| r[3].is_null()), "{rows:?}");
    let summary =
        run_ok(&["sql", "--config", c, "--format", "csv", "SELECT model, n, errors, schema_pct FROM model_summary"]);
    assert!(summary.contains("m,4,0,50.0"), "both failures are in n and count against the model: {summary}");
    // A record whose id matches no pair is a bad row: the import fails naming it, or with
    // skip_bad_rows skips it and says how many.
    outputs.extend_from_slice(b"{\"id\": \"99\", \"output\": \"x: 1\"}\n");
    std::fs::write(d.join("outputs.jsonl"), &outputs).unwrap();
    let e = run_err(&["run", "--config", c]);
    assert!(e.contains("outputs.jsonl:5") && e.contains("ID 99 matches no pair"), "{e}");
    let text = std::fs::read_to_string(&cfg)
        .unwrap()
        .replace("source = \"docs\"\n", "source = \"docs\"\nskip_bad_rows = true\n");
    std::fs::write(&cfg, text).unwrap();
    let out = run_ok(&["run", "--config", c]);
    assert!(out.contains("skipped 1 bad rows"), "{out}");
}
