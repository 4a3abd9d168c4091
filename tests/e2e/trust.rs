//! Issue 30, the four reproductions: each ran silently wrong on the code before it, end to end with
//! the real binary, and must not again.
//! - a profile setting the crawl key left out re-ran nothing;
//! - the request cache handed one server's answers to another server's model of the same name;
//! - the object-storage mirror deleted what it never wrote;
//! - a validator verdict passed GitLab CI "answers" that are prose or only comments.

use crate::common::*;
use crate::crawl::{config, docsite};
use crate::generate::{answering_server, small_docs, study, GENS};

use doc2ci_testkit::files;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

const OFF: &str =
    "[stages.validate]\nenabled = false\n[stages.score]\nenabled = false\n[stages.lint]\nenabled = false\n";

#[test]
fn a_profile_setting_outside_the_old_key_reruns_the_crawl() {
    let dir = tempfile::tempdir().unwrap();
    let site = format!("serve = \"{}\"", docsite().display());
    let cfg = config(dir.path(), &["github-actions"], &site, "http", "rate_limit = 0\n");
    let c = cfg.to_str().unwrap();
    run_ok(&["run", "--config", c]);
    let wh = dir.path().join("wh");
    let pairs = |wh: &Path| duck(wh, "SELECT COUNT(*) FROM read_parquet('{wh}/pairs_raw/**/*.parquet')")[0][0].clone();
    assert!(pairs(&wh).as_u64().unwrap() > 0);
    // The whole section excluded: before, `plan` said "nothing to do" and the old pairs flowed on.
    let text = std::fs::read_to_string(&cfg).unwrap();
    let excluded = text.replacen(
        "[profiles.github-actions]\n",
        "[profiles.github-actions]\nexclude_paths = [\"/github-actions/\"]\n",
        1,
    );
    assert_ne!(text, excluded, "the profile table is in the config");
    std::fs::write(&cfg, excluded).unwrap();
    let plan = run_ok(&["plan", "--config", c]);
    assert!(plan.contains("crawl") && plan.contains("changed parameter"), "{plan}");
    assert!(!plan.contains("nothing to do"), "{plan}");
    run_ok(&["run", "--config", c]);
    assert_eq!(pairs(&wh), 0, "the excluded section's pairs are gone");
    // And back: the same setting as the first run is a changed parameter again, not a stale reuse.
    std::fs::write(&cfg, text).unwrap();
    run_ok(&["run", "--config", c]);
    assert!(pairs(&wh).as_u64().unwrap() > 0);
    let again = run_ok(&["run", "--config", c]);
    assert!(again.contains("nothing to do"), "{again}");
}

#[test]
fn two_servers_with_one_model_name_never_share_answers() {
    let root = tempfile::tempdir().unwrap();
    let cache = root.path().join("requests");
    let never_fail = Arc::new(AtomicBool::new(false));
    // Two local servers, both serving a model they call `default` (as llama.cpp and vLLM users do).
    let (a, asked_a) =
        answering_server(never_fail.clone(), Some((10, 5)), "on: push\njobs:\n  from: {runs-on: server-a}\n");
    let (b, asked_b) =
        answering_server(never_fail.clone(), Some((10, 5)), "on: push\njobs:\n  from: {runs-on: server-b}\n");
    let docs = small_docs(root.path(), 3, None);
    let models = format!(
        "[[models]]\nname = \"on-a\"\nbackend = \"openai\"\nbase_url = \"{a}\"\nmodel = \"default\"\nretries = 0\n\n\
         [[models]]\nname = \"on-b\"\nbackend = \"openai\"\nbase_url = \"{b}\"\nmodel = \"default\"\nretries = 0\n\n\
         [stages.generate]\nbatch_size = 1\n"
    );
    let cfg = study(root.path(), &docs, &models, OFF);
    // One partition at a time: the second model could only be served from the first's answers.
    std::fs::write(&cfg, std::fs::read_to_string(&cfg).unwrap().replace("threads = 2", "threads = 1")).unwrap();
    let out = doc2ci(&["run", "--config", cfg.to_str().unwrap()]).env("DOC2CI_REQUEST_CACHE", &cache).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!((asked_a.load(Ordering::SeqCst), asked_b.load(Ordering::SeqCst)), (3, 3), "each server was asked");
    let rows =
        duck(&root.path().join("wh"), &format!("SELECT model, output, attempts FROM {GENS} ORDER BY model, pair_id"));
    assert_eq!(rows.len(), 6);
    for r in &rows {
        let want = if r[0] == "on-a" { "server-a" } else { "server-b" };
        assert!(r[1].as_str().unwrap().contains(want), "{r:?}");
        assert_eq!(r[2], 1, "asked, not served from another server's cache: {r:?}");
    }
}

#[test]
fn the_mirror_never_deletes_what_it_did_not_write() {
    let dir = tempfile::tempdir().unwrap();
    let mirror = dir.path().join("bucket/study");
    std::fs::create_dir_all(mirror.join("other-study/pairs")).unwrap();
    std::fs::write(mirror.join("other-study/pairs/part-0.parquet"), "another study's rows").unwrap();
    std::fs::write(mirror.join("NOTES.md"), "a colleague's notes").unwrap();
    let cfg = write_config(dir.path(), &["gpt-4o", "gpt-4.1"], "");
    let text = std::fs::read_to_string(&cfg).unwrap();
    let text = text.replace("threads = 2\n", &format!("threads = 2\nremote = \"file://{}\"\n", mirror.display()));
    std::fs::write(&cfg, &text).unwrap();
    let c = cfg.to_str().unwrap();
    // Before, one run deleted both. Now the run finishes its work and refuses to mix into them.
    let err = run_err(&["run", "--config", c]);
    assert!(err.contains("did not write") && err.contains("NOTES.md") && err.contains("--adopt"), "{err}");
    assert!(mirror.join("NOTES.md").exists() && mirror.join("other-study/pairs/part-0.parquet").exists());
    let wh = dir.path().join("wh");
    assert!(wh.join("pairs").exists(), "the study's work is kept locally");
    // Adopted explicitly: the warehouse goes up beside them, and they stay.
    run_ok(&["push", "--config", c, "--adopt"]);
    let up = files(&mirror);
    assert!(up.contains("NOTES.md") && up.contains("other-study/pairs/part-0.parquet"), "{up:?}");
    assert!(up.iter().any(|f| f.contains("model=gpt-4.1/")), "{up:?}");
    // A model dropped: its objects go, the foreign ones stay.
    let drop = format!(
        "\n[[models]]\nname = \"gpt-4.1\"\nbackend = \"import\"\npath = \"{}\"\nfamily = \"x\"\n",
        output_file("gpt-4.1").display()
    );
    assert!(text.contains(&drop));
    std::fs::write(&cfg, text.replace(&drop, "")).unwrap();
    run_ok(&["run", "--config", c]);
    let after = files(&mirror);
    assert!(!after.iter().any(|f| f.contains("model=gpt-4.1/")), "{after:?}");
    assert!(after.contains("NOTES.md") && after.contains("other-study/pairs/part-0.parquet"), "{after:?}");
    // A fresh warehouse pointed at the populated mirror is refused, and deletes nothing.
    let fresh = tempfile::tempdir().unwrap();
    let cfg2 = fresh.path().join("pipeline.toml");
    std::fs::write(&cfg2, text.replace(&drop, "")).unwrap();
    let err = run_err(&["run", "--config", cfg2.to_str().unwrap()]);
    assert!(err.contains("mirror of another warehouse"), "{err}");
    assert_eq!(files(&mirror), after);
}

#[test]
fn gitlab_prose_and_comment_answers_are_never_lint_clean() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // Three GitLab CI pairs, and a model whose answers are what SmolLM2 gave in the default study:
    // prose, comments only, nothing, and one real job.
    let pairs: Vec<serde_json::Value> = (0..4)
        .map(|i| {
            serde_json::json!({"id": format!("p{i}"), "title": format!("Job {i}"), "description": "Run the tests.",
                "reference": format!("test{i}:\n  script:\n    - make test\n")})
        })
        .collect();
    let answers = [
        "Here is a GitLab CI configuration that runs the tests as described.",
        "# GitLab CI\n# runs the tests\n",
        "",
        "test:\n  script:\n    - make test\n",
    ];
    let outs: Vec<serde_json::Value> =
        answers.iter().enumerate().map(|(i, a)| serde_json::json!({"id": format!("p{i}"), "output": a})).collect();
    let cfg = jsonl_study(d, ("gitlab-ci", "GitLab CI"), "smol", (&pairs, &outs), "");
    run_ok(&["run", "--config", cfg.to_str().unwrap()]);
    let rows = duck(
        &d.join("wh"),
        "SELECT g.output, l.ok, l.as_is_ok, l.completed_ok, l.note \
         FROM read_parquet('{wh}/lints/**/*.parquet', hive_partitioning=true) l \
         JOIN read_parquet('{wh}/generations/**/*.parquet', hive_partitioning=true) g USING (pair_id, model, sample, round) \
         WHERE l.model = 'smol' AND l.tool = 'gitlab-ci-local' ORDER BY g.output",
    );
    assert_eq!(rows.len(), 4, "{rows:?}");
    for r in &rows {
        let text = r[0].as_str().unwrap_or_default();
        if text.starts_with("test:") {
            assert_eq!(r[1], true, "a real job still passes: {r:?}");
            continue;
        }
        assert_eq!((&r[1], &r[2]), (&false.into(), &false.into()), "{r:?}");
        assert_ne!(r[3], true, "{r:?}");
        let note = r[4].as_str().unwrap_or_default();
        assert!(note.starts_with("not a configuration") || (text.is_empty() && note.starts_with("no output")), "{r:?}");
    }
    // The validity ladder agrees: one answer in four parses, and one is lint-clean (it said 100%).
    let q = "SELECT parse_pct, lint_pct FROM model_summary WHERE model = 'smol'";
    let summary = run_ok(&["sql", "--config", cfg.to_str().unwrap(), "--format", "csv", q]);
    assert!(summary.contains("25.0,25.0"), "{summary}");
}

/// The checkpointed batches under `d` (a kill may also leave an atomic write's temporary, which gc
/// rightly removes).
fn count_files(d: &Path) -> usize {
    files(d)
        .iter()
        .filter(|f| f.rsplit('/').next().is_some_and(|n| n.starts_with("batch-") && n.ends_with(".parquet")))
        .count()
}

/// Issue 30: `gc` removes the checkpoint of a killed run whose key has moved on (a setting changed
/// since): no later run would resume it.
#[test]
fn gc_drops_checkpoints_of_superseded_keys() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = write_config(dir.path(), &MODELS[..1], "\n[stages.import]\nbatch_size = 100\n");
    let c = cfg.to_str().unwrap();
    let ck = dir.path().join("wh/_doc2ci/checkpoints/pairs_raw~service=github-actions~source=docs");
    run_killed_when(c, || count_files(&ck) >= 3);
    let batches = count_files(&ck);
    assert!(batches >= 3, "killed before any checkpoint");
    // Unchanged, the checkpoint is what the next run resumes: gc keeps it.
    run_ok(&["gc", "--config", c]);
    assert_eq!(count_files(&ck), batches, "gc removed a checkpoint the next run would resume");
    // The source's setting changes its key: that checkpoint can never be resumed.
    let text = std::fs::read_to_string(&cfg).unwrap();
    std::fs::write(
        &cfg,
        text.replacen("service = \"github-actions\"\n", "service = \"github-actions\"\nskip_bad_rows = true\n", 1),
    )
    .unwrap();
    run_ok(&["gc", "--config", c]);
    assert_eq!(count_files(&ck), 0, "a superseded checkpoint was kept");
}
