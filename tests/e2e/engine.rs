//! The engine end to end on the real llm4ci data: import, dedupe, incremental re-runs,
//! `kill -9` resume, and bad input, with every table read back by the real DuckDB.

use crate::common;
use common::*;

use std::time::{Duration, Instant};

const RAW: u64 = 1318;
const KEPT: u64 = 725;

#[test]
fn import_dedupe_and_read_back_with_duckdb() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = write_config(dir.path(), MODELS, "");
    let c = cfg.to_str().unwrap();
    let out = run_ok(&["run", "--config", c]);
    assert!(out.contains("1318 raw → 725 kept, 593 copies dropped, 709 distinct title+description"), "{out}");

    let db = duckdb(&dir.path().join("wh"));
    assert_eq!(db["pairs_raw"]["rows"], RAW);
    assert_eq!(db["pairs_raw"]["distinct_keys"], RAW);
    assert_eq!(db["pairs"]["rows"], KEPT);
    assert_eq!(db["pairs"]["distinct_keys"], KEPT, "pair_id is unique");
    assert_eq!(db["pairs"]["copies"], RAW, "every raw pair is counted by exactly one kept pair");
    assert_eq!(db["pairs"]["distinct_descriptions"], 709);
    assert_eq!(db["generations"]["rows"], KEPT * 6);
    assert_eq!(db["generations"]["distinct_keys"], KEPT * 6);
    for m in MODELS {
        assert_eq!(db["generations"]["by"][m], KEPT, "{m}");
    }
    assert_eq!(db["models"]["rows"], 6);
    for col in
        ["pair_id", "service", "url", "title", "description", "reference", "n_copies", "urls", "source", "source_id"]
    {
        assert!(db["pairs"]["columns"].as_array().unwrap().iter().any(|c| c == col), "pairs lacks {col}");
    }
    for col in ["pair_id", "service", "model", "sample", "round", "output", "raw_output", "latency_ms", "error"] {
        assert!(db["generations"]["columns"].as_array().unwrap().iter().any(|c| c == col), "generations lacks {col}");
    }

    // Our own SQL sees the same rows, and outputs trace back to their source IDs.
    let q = run_ok(&[
        "sql",
        "--config",
        c,
        "--format",
        "csv",
        "SELECT model, COUNT(*) AS n, COUNT(latency_ms) AS timed FROM generations GROUP BY model ORDER BY model",
    ]);
    assert!(q.contains("gpt-4.1,725,0"), "gpt-4.1 has no Time column: {q}");
    assert!(q.contains("gpt-4o,725,725"), "{q}");
    let q = run_ok(&["sql", "--config", c, "--format", "json", "SELECT p.source_id, g.output IS NOT NULL AS has FROM pairs p JOIN generations g USING (pair_id) WHERE g.model = 'gpt-4o' AND p.source_id = '1'"]);
    let v: serde_json::Value = serde_json::from_str(&q[..q.rfind(']').unwrap() + 1]).unwrap();
    assert_eq!(v[0]["source_id"], "1");
    assert_eq!(v[0]["has"], true);

    // Export round-trips every row.
    let jsonl = dir.path().join("pairs.jsonl");
    run_ok(&["export", "pairs", "--config", c, "--format", "jsonl", "--out", jsonl.to_str().unwrap()]);
    let text = std::fs::read_to_string(&jsonl).unwrap();
    assert_eq!(text.lines().count() as u64, KEPT);
    let first: serde_json::Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    assert!(first["urls"].is_array() && first["n_copies"].as_u64().unwrap() >= 1);
    let csv = run_ok(&["export", "generations", "--config", c, "--format", "csv"]);
    let mut rdr = csv::Reader::from_reader(csv.as_bytes());
    assert_eq!(rdr.records().count() as u64, KEPT * 6);

    let status = run_ok(&["status", "--config", c]);
    assert!(status.contains("generations") && status.contains("4350"), "{status}");
}

#[test]
fn incremental_runs_touch_only_what_changed() {
    let dir = tempfile::tempdir().unwrap();
    let six = write_config(dir.path(), MODELS, "");
    let c = six.to_str().unwrap();
    run_ok(&["run", "--config", c]);
    let wh = dir.path().join("wh");
    let before = file_times(&wh);

    // No-op: nothing runs, nothing is rewritten.
    let out = run_ok(&["run", "--config", c]);
    assert!(out.contains("nothing to do"), "{out}");
    assert!(run_ok(&["plan", "--config", c]).contains("nothing to do"));
    assert_eq!(before, file_times(&wh));

    // A seventh model: only its partition (and the models table) run.
    let seventh = dir.path().join("renamed-model.csv.gz");
    std::fs::copy(output_file("gpt-4o"), &seventh).unwrap();
    let extra = format!(
        "\n[[models]]\nname = \"gpt-4o-again\"\nbackend = \"import\"\npath = \"{}\"\nsize_b = 200\n",
        seventh.display()
    );
    write_config(dir.path(), MODELS, &extra);
    let plan = run_ok(&["plan", "--config", c]);
    let runs: Vec<&str> = plan.lines().filter(|l| l.starts_with("run ")).collect();
    assert_eq!(runs.len(), 2, "{plan}");
    assert!(
        plan.contains("generations/service=github-actions/model=gpt-4o-again")
            && plan.contains("new model `gpt-4o-again`"),
        "{plan}"
    );
    assert!(plan.contains("run    models models") && plan.contains("changed parameter"), "{plan}");
    let out = run_ok(&["run", "--config", c]);
    assert!(out.contains("ran 2 partitions, reused"), "{out}");
    let after = file_times(&wh);
    for (p, t) in &before {
        if !p.to_string_lossy().contains("/models/") {
            assert!(after.contains(&(p.clone(), *t)), "{} was rewritten", p.display());
        }
    }
    assert_eq!(duckdb(&wh)["generations"]["rows"], KEPT * 7);

    // Changing a dedupe parameter re-runs dedupe; its dependents run only if its output changed.
    // The real data's copies are byte-identical, so "exact" keeps the same pairs: early cutoff.
    write_config(dir.path(), MODELS, "\n[stages.dedupe]\nmode = \"exact\"\n");
    let plan = run_ok(&["plan", "--config", c]);
    assert!(
        plan.contains("run    dedupe pairs/service=github-actions") && plan.contains("changed parameter"),
        "{plan}"
    );
    assert_eq!(plan.lines().filter(|l| l.starts_with("maybe ")).count(), 6, "{plan}");
    assert!(plan.contains("remove generations/service=github-actions/model=gpt-4o-again"), "{plan}");
    let out = run_ok(&["run", "--config", c]);
    assert!(out.contains("removed generations/service=github-actions/model=gpt-4o-again"), "{out}");
    assert!(out.contains("ran 2 partitions, reused 7"), "dedupe and models ran, the six models were reused: {out}");
    let db = duckdb(&wh);
    assert_eq!(db["pairs"]["rows"], KEPT);
    assert_eq!(db["generations"]["by"].as_object().unwrap().len(), 6, "the removed model left the table folder");

    // "none" keeps every copy: dedupe's output changes, so every model's import re-runs.
    write_config(dir.path(), MODELS, "\n[stages.dedupe]\nmode = \"none\"\n");
    let out = run_ok(&["run", "--config", c]);
    assert!(out.contains("ran 7 partitions"), "{out}");
    let db = duckdb(&wh);
    assert_eq!(db["pairs"]["rows"], RAW);
    assert_eq!(db["pairs"]["distinct_keys"], RAW);
    assert_eq!(db["generations"]["rows"], RAW * 6);
}

#[test]
fn kill_9_mid_import_then_resume_exactly_once() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = write_config(dir.path(), &MODELS[..2], "\n[stages.import]\nbatch_size = 100\n");
    let c = cfg.to_str().unwrap();
    // Killed once some batches are checkpointed.
    let ck = dir.path().join("wh/_doc2ci/checkpoints");
    run_killed_when(c, || walk_count(&ck) >= 4);
    assert!(walk_count(&ck) >= 4, "the run was killed before checkpointing anything");

    let out = run_ok(&["run", "--config", c]);
    assert!(out.contains("resuming after"), "the re-run should resume from checkpoints: {out}");
    let db = duckdb(&dir.path().join("wh"));
    assert_eq!(db["pairs_raw"]["rows"], RAW);
    assert_eq!(db["pairs_raw"]["distinct_keys"], RAW);
    assert_eq!(db["pairs"]["rows"], KEPT);
    assert_eq!(db["generations"]["rows"], KEPT * 2);
    assert_eq!(db["generations"]["distinct_keys"], KEPT * 2);
    assert_eq!(walk_count(&ck), 0, "checkpoints are cleared once a partition is final");
}

fn walk_count(d: &std::path::Path) -> usize {
    std::fs::read_dir(d)
        .map(|rd| rd.flatten().map(|e| if e.path().is_dir() { walk_count(&e.path()) } else { 1 }).sum())
        .unwrap_or(0)
}

#[test]
fn bad_input_gets_a_clear_error_and_keeps_finished_work() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();

    // Broken TOML: file and line.
    let p = d.join("broken.toml");
    std::fs::write(&p, "[study]\nwarehouse = \"wh\"\n[[models]\nname = 1\n").unwrap();
    let e = run_err(&["plan", "--config", p.to_str().unwrap()]);
    assert!(e.contains("broken.toml") && e.contains("line 3"), "{e}");

    // Unknown key, wrong type.
    std::fs::write(&p, "[study]\nwarehouse = \"wh\"\nthreds = 2\n").unwrap();
    let e = run_err(&["plan", "--config", p.to_str().unwrap()]);
    assert!(e.contains("line 3") && e.contains("threds"), "{e}");
    std::fs::write(&p, "[study]\nwarehouse = \"wh\"\nthreads = \"two\"\n").unwrap();
    let e = run_err(&["plan", "--config", p.to_str().unwrap()]);
    assert!(e.contains("line 3") && e.contains("threads"), "{e}");

    // Missing file and duplicate model: file, line and key.
    let cfg =
        write_config(d, &["gpt-4o"], "\n[[models]]\nname = \"gpt-4o\"\nbackend = \"import\"\npath = \"nowhere.csv\"\n");
    let e = run_err(&["run", "--config", cfg.to_str().unwrap()]);
    assert!(
        e.contains("pipeline.toml:") && e.contains("models.name") && e.contains("duplicate model name `gpt-4o`"),
        "{e}"
    );
    let cfg = write_config(d, &[], "\n[[models]]\nname = \"m\"\nbackend = \"import\"\npath = \"nowhere.csv\"\n");
    let e = run_err(&["run", "--config", cfg.to_str().unwrap()]);
    assert!(e.contains("models.path") && e.contains("nowhere.csv") && e.contains("does not exist"), "{e}");
    let cfg = write_config(d, &[], "\n[[models]]\nname = \"m\"\nbackend = \"telepathy\"\n");
    let e = run_err(&["run", "--config", cfg.to_str().unwrap()]);
    assert!(e.contains("unknown backend `telepathy`"), "{e}");

    // A malformed CSV row: the good model finishes, the bad one names file and line.
    let bad = d.join("bad_output.csv");
    std::fs::write(&bad, "ID,LLM_YML_Output,Time\n1,\"on: push\",1.0\n2,\"unterminated,1.0\n3,x,notanumber\n").unwrap();
    let extra = format!("\n[[models]]\nname = \"broken\"\nbackend = \"import\"\npath = \"{}\"\n", bad.display());
    let cfg = write_config(d, &["gpt-4o"], &extra);
    let c = cfg.to_str().unwrap();
    let e = run_err(&["run", "--config", c]);
    assert!(e.contains("bad_output.csv:"), "{e}");
    assert!(e.contains("1 partition(s) did not finish"), "{e}");
    let db = duckdb(&d.join("wh"));
    assert_eq!(db["generations"]["by"]["gpt-4o"], KEPT, "finished work is kept");
    // The good partitions are not redone on the next attempt.
    let e = run_err(&["run", "--config", c]);
    assert!(!e.contains("run import generations/service=github-actions/model=gpt-4o "), "{e}");

    // skip_bad_rows: skipped and counted.
    let bad2 = d.join("bad2.csv");
    std::fs::write(&bad2, "ID,LLM_YML_Output,Time\n1,\"on: push\",1.0\n99999,x,1\n3,x,notanumber\n5,y,2\n").unwrap();
    let extra = format!(
        "\n[[models]]\nname = \"lenient\"\nbackend = \"import\"\npath = \"{}\"\nskip_bad_rows = true\n",
        bad2.display()
    );
    let cfg = write_config(d, &["gpt-4o"], &extra);
    let out = run_ok(&["run", "--config", cfg.to_str().unwrap()]);
    assert!(
        out.contains("skipped 2 bad rows")
            && out.contains("bad2.csv:3: ID 99999 matches no pair")
            && out.contains("bad2.csv:4:"),
        "{out}"
    );

    // A missing required column is the file's error, named with the file, even with skip_bad_rows.
    let nocol = d.join("nocol.csv");
    std::fs::write(&nocol, "ID,Time\n1,1.0\n2,1.0\n").unwrap();
    let extra = format!(
        "\n[[models]]\nname = \"nocol\"\nbackend = \"import\"\npath = \"{}\"\nskip_bad_rows = true\n",
        nocol.display()
    );
    let cfg = write_config(d, &["gpt-4o"], &extra);
    let e = run_err(&["run", "--config", cfg.to_str().unwrap()]);
    assert!(
        e.contains("nocol.csv") && e.contains("missing column `LLM_YML_Output`") && e.contains("file-level"),
        "{e}"
    );
}

#[test]
fn a_second_concurrent_run_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = write_config(dir.path(), &MODELS[..1], "\n[stages.import]\nbatch_size = 50\n");
    let c = cfg.to_str().unwrap();
    let mut first = doc2ci(&["run", "--config", c])
        .env("DOC2CI_TEST_BATCH_DELAY_MS", "200")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let lock = dir.path().join("wh/_doc2ci/lock");
    let t0 = Instant::now();
    while !std::fs::read_to_string(&lock).is_ok_and(|s| s.contains("pid")) && t0.elapsed() < Duration::from_secs(30) {
        std::thread::sleep(Duration::from_millis(20));
    }
    let e = run_err(&["run", "--config", c]);
    assert!(e.contains("in use by another doc2ci run") && e.contains(&format!("pid {}", first.id())), "{e}");
    first.kill().unwrap();
    first.wait().unwrap();
    // The lock dies with its process.
    run_ok(&["run", "--config", c]);
}

#[test]
fn generic_jsonl_and_parquet_sources_with_a_column_map() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let cfg = write_config(d, &[], "");
    let c = cfg.to_str().unwrap();
    run_ok(&["run", "--config", c]);
    let jsonl = d.join("pairs.jsonl.gz");
    let text = run_ok(&["export", "pairs", "--config", c, "--format", "jsonl"]);
    let jsonl_text: String = text.lines().filter(|l| l.starts_with('{')).map(|l| format!("{l}\n")).collect();
    let mut gz = flate2::write::GzEncoder::new(std::fs::File::create(&jsonl).unwrap(), flate2::Compression::default());
    std::io::Write::write_all(&mut gz, jsonl_text.as_bytes()).unwrap();
    gz.finish().unwrap();
    let parquet = d.join("pairs.parquet");
    std::fs::copy(d.join("wh/pairs/service=github-actions/part-0.parquet"), &parquet).unwrap();

    let second = d.join("second");
    std::fs::create_dir(&second).unwrap();
    let study = format!(
        "[study]\nwarehouse = \"wh\"\n[[services]]\nname = \"github-actions\"\ndisplay = \"GitHub Actions\"\n\
         [[sources]]\nname = \"from-jsonl\"\nkind = \"import\"\nformat = \"jsonl\"\npath = \"{}\"\nservice = \"github-actions\"\ncolumns = {{ id = \"source_id\" }}\n\
         [[sources]]\nname = \"from-parquet\"\nkind = \"import\"\nformat = \"parquet\"\npath = \"{}\"\nservice = \"github-actions\"\ncolumns = {{ id = \"source_id\" }}\n\
         [stages.validate]\nenabled = false\n[stages.score]\nenabled = false\n[stages.lint]\nenabled = false\n",
        jsonl.display(),
        parquet.display()
    );
    let p2 = second.join("pipeline.toml");
    std::fs::write(&p2, study).unwrap();
    let out = run_ok(&["run", "--config", p2.to_str().unwrap()]);
    // Both sources hold the same 725 pairs: the parquet copies all collapse onto the jsonl ones.
    assert!(out.contains("1450 raw → 725 kept, 725 copies dropped"), "{out}");
    let db = duckdb(&second.join("wh"));
    assert_eq!(db["pairs_raw"]["rows"], 1450);
    assert_eq!(db["pairs"]["rows"], 725);
    assert_eq!(db["pairs"]["copies"], 1450);
}

/// Issue 11: the benchmark as a release. Export the deduplicated real pairs, import the folder in
/// a fresh study: the same pair_ids; the datasheet and checksums are there, a changed file is refused.
#[test]
fn benchmark_release_round_trip_keeps_pair_ids() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let cfg = write_config(d, &[], "");
    let c = cfg.to_str().unwrap();
    run_ok(&["run", "--config", c]);
    let rel = d.join("release");
    let out = run_ok(&["export", "benchmark", "--config", c, "--out", rel.to_str().unwrap()]);
    assert!(out.contains(&format!("{KEPT} pairs")), "{out}");
    for f in ["pairs.parquet", "pairs.jsonl", "datasheet.json", "datasheet.md", "SHA256SUMS"] {
        assert!(rel.join(f).exists(), "{f} missing");
    }
    let sheet: serde_json::Value = serde_json::from_slice(&std::fs::read(rel.join("datasheet.json")).unwrap()).unwrap();
    assert_eq!(sheet["services"][0]["pairs"], KEPT);
    assert_eq!(sheet["services"][0]["raw_pairs"], 1318);
    assert!(sheet["sources"][0]["sha256"].as_str().is_some_and(|h| h.len() == 64), "{sheet}");

    let second = d.join("second");
    std::fs::create_dir_all(&second).unwrap();
    let cfg2 = second.join("pipeline.toml");
    std::fs::write(
        &cfg2,
        format!(
            "[study]\nwarehouse = \"wh\"\n[[services]]\nname = \"github-actions\"\ndisplay = \"GitHub Actions\"\n\
             [[sources]]\nname = \"release\"\nkind = \"import\"\nformat = \"benchmark\"\npath = \"{}\"\nservice = \"github-actions\"\n\
             [stages.validate]\nenabled = false\n[stages.score]\nenabled = false\n[stages.lint]\nenabled = false\n",
            rel.display()
        ),
    )
    .unwrap();
    run_ok(&["run", "--config", cfg2.to_str().unwrap()]);
    let ids = |wh: &std::path::Path| -> Vec<serde_json::Value> {
        duck(wh, "SELECT pair_id FROM read_parquet('{wh}/pairs/**/*.parquet') ORDER BY pair_id").concat()
    };
    let (a, b) = (ids(&d.join("wh")), ids(&second.join("wh")));
    assert_eq!(a.len() as u64, KEPT);
    assert_eq!(a, b, "the release reproduces the same pair_ids");

    // A release that changed after it was written is refused, naming the file.
    let mut text = std::fs::read_to_string(rel.join("pairs.jsonl")).unwrap();
    text.push_str("{}\n");
    std::fs::write(rel.join("pairs.jsonl"), text).unwrap();
    let e = run_err(&["run", "--config", cfg2.to_str().unwrap()]);
    assert!(e.contains("checksum mismatch") && e.contains("pairs.jsonl"), "{e}");
}

/// Issue 12: cache versions cannot go stale. A warehouse written by an older doc2ci (whose state
/// holds the hand-written `version: 1` of that time) re-runs exactly the stages whose code changed,
/// and `plan` says why.
#[test]
fn an_older_stage_code_version_reruns_that_stage_only() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = write_config(dir.path(), &MODELS[..1], "");
    let c = cfg.to_str().unwrap();
    run_ok(&["run", "--config", c]);
    let state_path = dir.path().join("wh/_doc2ci/state.json");
    let mut state: serde_json::Value = serde_json::from_slice(&std::fs::read(&state_path).unwrap()).unwrap();
    let parts = state["partitions"].as_object_mut().unwrap();
    let dedupe = parts.keys().find(|k| k.starts_with("pairs/")).unwrap().clone();
    parts.get_mut(&dedupe).unwrap()["version"] = serde_json::json!(1);
    std::fs::write(&state_path, serde_json::to_vec_pretty(&state).unwrap()).unwrap();
    let plan = run_ok(&["plan", "--config", c]);
    let runs: Vec<&str> = plan.lines().filter(|l| l.starts_with("run ")).collect();
    assert_eq!(runs.len(), 1, "{plan}");
    assert!(runs[0].contains(&dedupe) && runs[0].contains("stage code changed"), "{plan}");
    // The dedupe re-runs and produces the same rows: its dependents are not redone.
    let out = run_ok(&["run", "--config", c]);
    assert!(out.contains(&format!("run dedupe {dedupe}")) && !out.contains("run import"), "{out}");
    assert!(run_ok(&["plan", "--config", c]).contains("nothing to do"));
}
