//! `doc2ci compare` end to end on real llm4ci outputs (issue 46): a warehouse against itself,
//! against another study that shares half its pairs, against its own release folder and its
//! object-store mirror; the flipped samples against a DuckDB join of the warehouse; the gate's
//! exit code; the page in headless Chromium.

use crate::common;
use common::*;

use std::path::{Path, PathBuf};

const MODELS: [&str; 2] = ["gpt-4o", "codellama-7b"];

/// A study of llm4ci pairs `range` with two models' real outputs, validated and scored.
fn study(dir: &Path, range: std::ops::Range<usize>) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    slice_rows(&shared().join("GitHubActions_Docs.csv.gz"), &dir.join("docs.csv"), range.clone());
    let mut s = format!(
        "[study]\nwarehouse = \"wh\"\nthreads = 2\nremote = \"file://{}/mirror\"\n\n[[services]]\nname = \"github-actions\"\ndisplay = \"GitHub Actions\"\n\n\
         [[sources]]\nname = \"docs\"\nkind = \"import\"\nformat = \"llm4ci\"\npath = \"docs.csv\"\nservice = \"github-actions\"\n",
        dir.display()
    );
    for m in MODELS {
        slice_rows(&output_file(m), &dir.join(format!("{m}.csv")), range.clone());
        s.push_str(&format!(
            "\n[[models]]\nname = \"{m}\"\nbackend = \"import\"\npath = \"{m}.csv\"\nfamily = \"x\"\n"
        ));
    }
    s.push_str("\n[stages.lint]\nenabled = false\n[stages.stats]\nenabled = false\n[stages.report]\nenabled = false\n");
    let p = dir.join("pipeline.toml");
    std::fs::write(&p, s).unwrap();
    p
}

fn rows(cfg: &str, a: &str, b: &str) -> Vec<serde_json::Value> {
    let out = run_ok(&["compare", a, b, "-c", cfg, "--format", "jsonl", "--resamples", "400"]);
    out.lines().filter(|l| l.starts_with('{')).map(|l| serde_json::from_str(l).unwrap()).collect()
}

fn of<'a>(rows: &'a [serde_json::Value], kind: &str) -> Vec<&'a serde_json::Value> {
    rows.iter().filter(|r| r["kind"] == kind).collect()
}

/// The test rows' numbers, without the labels (which name where each side came from).
fn numbers(rows: &[serde_json::Value]) -> Vec<serde_json::Value> {
    of(rows, "test")
        .into_iter()
        .map(|r| {
            let mut r = r.clone();
            r.as_object_mut().unwrap().retain(|k, _| !["a", "b", "method"].contains(&k.as_str()));
            r
        })
        .collect()
}

#[test]
fn compare_runs_warehouses_releases_and_mirrors_sample_by_sample() {
    let d = tempfile::tempdir().unwrap();
    let cfg = study(&d.path().join("one"), 0..60);
    let c = cfg.to_str().unwrap();
    run_ok(&["run", "-c", c]);
    let wh = d.path().join("one/wh");

    // A model against itself: nothing differs, nothing flips, p = 1.
    let same = rows(c, "gpt-4o", "gpt-4o");
    assert!(of(&same, "test").len() >= 8, "every metric: {same:?}");
    assert_eq!(same.len(), of(&same, "test").len(), "no flip, swing or unmatched sample");
    for r in of(&same, "test") {
        assert_eq!(
            (r["diff"].as_f64(), r["p"].as_f64(), r["verdict"].as_str()),
            (Some(0.0), Some(1.0), Some("no difference")),
            "{r}"
        );
        assert_eq!(r["n"], 60);
    }

    // Two models: the flipped samples are exactly the pairs a DuckDB join of the warehouse finds.
    let two = rows(c, "gpt-4o", "codellama-7b");
    let t = |table: &str| format!("read_parquet('{{wh}}/{table}/*/*/*.parquet', hive_partitioning = true)");
    let joined = duck(
        &wh,
        &format!(
            "SELECT a.pair_id, a.schema_ok FROM {v} a JOIN {v} b USING (service, pair_id, sample, round) \
             WHERE a.model = 'gpt-4o' AND b.model = 'codellama-7b' AND a.round = 0 AND a.schema_ok <> b.schema_ok ORDER BY 1",
            v = t("validations")
        ),
    );
    let mut flipped: Vec<(String, bool)> = of(&two, "flip")
        .iter()
        .filter(|r| r["metric"] == "schema_ok")
        .map(|r| (r["pair_id"].as_str().unwrap().to_string(), r["value_a"] == 1.0))
        .collect();
    flipped.sort();
    let expected: Vec<(String, bool)> =
        joined.iter().map(|r| (r[0].as_str().unwrap().to_string(), r[1].as_bool().unwrap())).collect();
    assert!(!expected.is_empty(), "the two models differ in schema validity on some pairs");
    assert_eq!(flipped, expected);
    let schema = of(&two, "test").into_iter().find(|r| r["metric"] == "schema_ok").unwrap().clone();
    let lost = expected.iter().filter(|(_, a_valid)| *a_valid).count() as u64;
    assert_eq!(
        (schema["a_only"].as_u64(), schema["b_only"].as_u64()),
        (Some(lost), Some(expected.len() as u64 - lost))
    );
    // The table is queryable as any other.
    let sql = run_ok(&["sql", "-c", c, "SELECT count(*) AS n FROM comparisons WHERE kind = 'flip' AND metric = 'schema_ok' AND comparison = 'gpt-4o--vs--codellama-7b'", "--format", "csv"]);
    assert!(sql.contains(&format!("\n{}\n", expected.len())), "{sql}");

    // The gate: whichever side is worse on schema validity fails when it is B, and names the samples.
    let (worse, better) =
        if lost > expected.len() as u64 - lost { ("codellama-7b", "gpt-4o") } else { ("gpt-4o", "codellama-7b") };
    // (codellama-7b's answers are schema-valid on 55 of these 60 pairs, gpt-4o's on 3.)
    assert_ne!(schema["verdict"], "no difference", "{schema}");
    let err =
        run_err(&["compare", better, worse, "-c", c, "--fail-if-worse", "schema_ok,cosine", "--resamples", "400"]);
    assert!(err.contains("significantly worse") && err.contains("schema_ok on github-actions"), "{err}");
    assert!(err.contains("github-actions/"), "the samples that got worse are listed: {err}");
    run_ok(&["compare", worse, better, "-c", c, "--fail-if-worse", "schema_ok", "--resamples", "400"]);
    assert!(run_err(&["compare", "gpt-4o", "gpt-4o", "-c", c, "--fail-if-worse", "colour"])
        .contains("unknown metric `colour`"));
    assert!(run_err(&["compare", "gpt-4o", "nobody", "-c", c]).contains("no answers of model `nobody`"));

    // Another study sharing half the pairs (30..90): the other halves are named, never dropped.
    let other = study(&d.path().join("two"), 30..90);
    run_ok(&["run", "-c", other.to_str().unwrap()]);
    let at = format!("gpt-4o@{}", other.display());
    let half = rows(c, "gpt-4o", &at);
    assert_eq!((of(&half, "only_a").len(), of(&half, "only_b").len()), (30, 30));
    assert!(of(&half, "only_a")[0]["method"].as_str().unwrap().contains("not asked"));
    for r in of(&half, "test") {
        assert_eq!(r["n"], 30, "{r}");
        // The same answers on the shared half; crystal_bleu ignores the n-grams each study's
        // references share, so across studies it may differ, and its rows say so.
        let corpus = r["method"].as_str().unwrap().contains("corpus-relative");
        assert_eq!(corpus, r["metric"] == "crystal_bleu", "{r}");
        assert!(corpus || r["diff"] == 0.0, "{r}");
    }

    // Its release folder and its mirror hold the same run: equal.
    let rel = d.path().join("release");
    run_ok(&["export", "benchmark", "-c", c, "--with-results", "--out", rel.to_str().unwrap()]);
    run_ok(&["push", "-c", c]);
    let mirror = format!("file://{}/one/mirror", d.path().display());
    for place in [rel.display().to_string(), mirror] {
        let there = rows(c, &format!("gpt-4o@{place}"), "gpt-4o");
        assert_eq!(there.len(), of(&there, "test").len(), "{place}: nothing unmatched or flipped");
        assert!(of(&there, "test").iter().all(|r| r["diff"] == 0.0 && r["n"] == 60), "{place}");
        let across = rows(c, &format!("gpt-4o@{place}"), &format!("codellama-7b@{place}"));
        assert_eq!(numbers(&across), numbers(&two), "{place}: the same comparison as in the warehouse");
    }

    // The page: the tests, and a flipped sample opened to both answers beside the reference.
    let page = wh.join("comparisons/comparison=gpt-4o--vs--codellama-7b/compare.html");
    let first = &expected[0].0;
    let dom = crate::study::render(&page, &format!("kind=flip&metric=schema_ok&pair=github-actions/{first}/0"));
    assert!(dom.contains("data-metric=\"schema_ok\""), "the tests table");
    assert!(
        dom.contains("id=\"pair-title\"") && dom.contains("data-side=\"A\"") && dom.contains("data-side=\"B\""),
        "{dom}"
    );
    assert!(dom.contains("class=\"del\"") || dom.contains("class=\"add\""), "a diff against the reference");
    assert_eq!(count_rows(&dom), expected.len(), "one listed row per flipped sample");
}

fn count_rows(dom: &str) -> usize {
    dom.matches("<tr data-pair=\"").count()
}
