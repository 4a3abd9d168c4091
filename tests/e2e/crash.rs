//! kill -9 anywhere (issue 12): `tests/crash/harness.py` runs a real study through every stage,
//! kills it at random moments (aimed at each stage in turn), resumes, and compares every table
//! with an uninterrupted run, counting orphans, leftovers and requests asked again.

use std::path::Path;
use std::process::Command;

#[test]
fn kill_9_in_every_stage_loses_nothing_and_leaves_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("crash-report.json");
    let harness = Path::new(&std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"))
        .join("tests/crash/harness.py");
    let out = Command::new("python3")
        .env("DOC2CI_REQUEST_CACHE", "off")
        .arg(&harness)
        .args(["--doc2ci", env!("CARGO_BIN_EXE_doc2ci"), "--kills", "24", "--pairs", "20", "--seed", "7", "--out"])
        .arg(&report)
        .output()
        .expect("python3 runs the crash harness");
    let text = std::fs::read_to_string(&report).unwrap_or_default();
    assert!(
        out.status.success(),
        "crash harness failed:\n{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
            .chars()
            .rev()
            .take(4000)
            .collect::<String>()
            .chars()
            .rev()
            .collect::<String>()
    );
    let r: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert!(r["kills"].as_u64().unwrap() >= 20, "{text}");
    assert_eq!(r["failures"].as_array().unwrap().len(), 0, "{text}");
    let by = r["kills_by_stage"].as_object().unwrap();
    for stage in ["crawl (http)", "crawl (webdriver)", "generate (openai)", "generate (embedded)", "score (embedding)"]
    {
        assert!(by.get(stage).and_then(|v| v.as_u64()).unwrap_or(0) >= 1, "no kill landed in {stage}: {text}");
    }
    let tables = r["tables_compared"].as_object().unwrap();
    for t in ["pages", "code_blocks", "pairs_raw", "pairs", "generations", "validations", "scores", "repairs", "stats"]
    {
        assert!(tables.get(t).and_then(|v| v.as_u64()).unwrap_or(0) > 0, "table {t} not compared: {text}");
    }
    println!("{text}");
}
