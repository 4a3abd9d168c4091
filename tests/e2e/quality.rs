//! validate + lint + score end to end on the six real models: every output gets a validity row,
//! a row per lint tool and a score row, the study's summary reads back, the stored findings equal
//! the same pinned tools run by hand (peers/lint.py), and a new model embeds only its
//! new texts.

use crate::common;
use common::*;

#[test]
fn validate_and_score_the_real_outputs_then_add_a_model() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = write_quality_config(dir.path(), MODELS, "");
    let c = cfg.to_str().unwrap();
    let out = run_ok(&["run", "--config", c]);
    assert!(out.contains("725 references: "), "{out}");
    let wh = dir.path().join("wh");
    let db = duckdb(&wh);
    assert_eq!(db["validations"]["rows"], 725 * 6);
    assert_eq!(db["validations"]["distinct_keys"], 725 * 6);
    assert_eq!(db["scores"]["rows"], 725 * 6);
    assert_eq!(db["scores"]["distinct_keys"], 725 * 6);
    // Two tools (actionlint, zizmor) per output and per reference.
    assert_eq!(db["lints"]["rows"], 725 * 7 * 2);

    // The stored findings equal the tools run by hand, one file at a time, on ≥ 300 real rows.
    let out = std::process::Command::new("python3")
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args(["-m", "peers.lint"])
        .arg(&wh)
        .args(["--limit", "600", "--min", "300"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "lint findings differ from the tools run by hand:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let lint = run_ok(&["sql", "--config", c, "--format", "json", "SELECT * FROM lint_summary"]);
    let v: serde_json::Value = serde_json::from_str(&lint[..lint.rfind(']').unwrap() + 1]).unwrap();
    for r in v.as_array().unwrap() {
        // Every tool is installed by setup: every output is judged (zizmor skips what it cannot load).
        assert!(r["tool_version"].is_string(), "{r}");
        let judged = r["judged"].as_f64().unwrap();
        assert!(judged >= if r["tool"] == "actionlint" { 725.0 } else { 400.0 }, "{r}");
    }

    let summary = run_ok(&["sql", "--config", c, "--format", "json", "SELECT * FROM model_summary"]);
    let v: serde_json::Value = serde_json::from_str(&summary[..summary.rfind(']').unwrap() + 1]).unwrap();
    let rows = v.as_array().unwrap();
    assert_eq!(rows.len(), 6);
    for r in rows {
        let cos = r["mean_cosine"].as_f64().unwrap();
        assert!((0.3..0.95).contains(&cos), "{r}");
        assert!(r["parse_pct"].as_f64().unwrap() > 50.0, "{r}");
        assert!(r["schema_pct"].as_f64().unwrap() <= r["parse_pct"].as_f64().unwrap());
        // Completing fragments never makes the validator stricter than on the text as written.
        assert!(r["lint_pct"].as_f64().unwrap() >= r["lint_as_is_pct"].as_f64().unwrap(), "{r}");
    }
    let gpt4o = rows.iter().find(|r| r["model"] == "gpt-4o").unwrap();
    // The predecessor study reported ≈0.69 mean cosine and ≈3% exact matches for GPT-4o.
    assert!((gpt4o["mean_cosine"].as_f64().unwrap() - 0.69).abs() < 0.06, "{gpt4o}");
    assert!(gpt4o["exact_pct"].as_f64().unwrap() < 8.0, "{gpt4o}");

    // A seventh model whose outputs are all known texts: nothing new to embed.
    let seventh = dir.path().join("same-as-gpt-4o.csv.gz");
    std::fs::copy(output_file("gpt-4o"), &seventh).unwrap();
    write_quality_config(
        dir.path(),
        MODELS,
        &format!("\n[[models]]\nname = \"again\"\nbackend = \"import\"\npath = \"{}\"\n", seventh.display()),
    );
    let plan = run_ok(&["plan", "--config", c]);
    let runs = plan.lines().filter(|l| l.starts_with("run ")).count();
    assert_eq!(runs, 5, "models table, import, validate, lint and score of the new model only:\n{plan}");
    let out = run_ok(&["run", "--config", c]);
    assert!(
        out.contains("scores/service=github-actions/model=again: 725 rows") && out.contains("(0 new texts embedded)"),
        "{out}"
    );
    let db = duckdb(&wh);
    assert_eq!(db["scores"]["rows"], 725 * 7);
}
