//! `backend = "llama-cpp"` end to end (issue 33): llama.cpp's own server, started by doc2ci for a
//! GGUF (the SmolLM2 asset under a path of the test's own, and Gemma 3 270M as Q4_K_M: another
//! architecture and a K-quant, which scripts/deps.sh fetches), generates real answers, dies with
//! doc2ci even under kill -9, and the next run resumes; files it cannot run are refused with a
//! message that names them and says what to do.

use crate::common::*;
use crate::generate::{small_docs, study, walk_files, GENERATE_ONLY, GENS};

use std::path::PathBuf;
use std::time::{Duration, Instant};

fn smollm2_gguf() -> PathBuf {
    std::env::var_os("DOC2CI_ASSETS")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(std::env::var("HOME").unwrap()).join(".cache/doc2ci/assets"))
        .join("models/smollm2-135m-instruct/SmolLM2-135M-Instruct.Q4_1.gguf")
}

/// Live processes whose command line names `needle` (the test's own model path).
fn servers_of(needle: &str) -> Vec<i32> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else { continue };
        let (Ok(cmd), Ok(stat)) =
            (std::fs::read(e.path().join("cmdline")), std::fs::read_to_string(e.path().join("stat")))
        else {
            continue;
        };
        if String::from_utf8_lossy(&cmd).contains(needle) && !stat.contains(") Z ") {
            out.push(pid);
        }
    }
    out
}

fn none_left(needle: &str) -> bool {
    let t0 = Instant::now();
    while !servers_of(needle).is_empty() && t0.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(100));
    }
    servers_of(needle).is_empty()
}

#[test]
fn llama_cpp_backend_generates_dies_with_doc2ci_and_resumes() {
    let dir = tempfile::tempdir().unwrap();
    let docs = small_docs(dir.path(), 6, None);
    std::fs::create_dir_all(dir.path().join("weights")).unwrap();
    let weights = dir.path().join("weights/smol.gguf");
    std::os::unix::fs::symlink(smollm2_gguf(), &weights).unwrap();
    let needle = weights.display().to_string();
    let cfg = study(
        dir.path(),
        &docs,
        "[[models]]\nname = \"lc\"\nbackend = \"llama-cpp\"\nmodel = \"weights/smol.gguf\"\nmax_tokens = 24\n\
         parallel = 2\nthreads = 1\nctx_size = 2048\n",
        GENERATE_ONLY,
    );
    let c = cfg.to_str().unwrap();
    let ck = dir.path().join("wh/_doc2ci/checkpoints");
    let batches = || walk_files(&ck).into_iter().filter(|p| p.to_string_lossy().contains("generations")).count();
    // Whether llama.cpp's server ran while doc2ci generated, seen at the moment of the kill.
    let served = std::cell::Cell::new(false);
    run_killed_with(c, ("DOC2CI_TEST_BATCH_DELAY_MS", "700"), || {
        let due = batches() >= 2;
        served.set(due && !servers_of(&needle).is_empty());
        due
    });
    assert!(served.get(), "llama.cpp's server runs while doc2ci generates");
    assert!(none_left(&needle), "a server outlived doc2ci's kill -9: {:?}", servers_of(&needle));

    let out = run_ok(&["run", "--config", c]);
    assert!(out.contains("resuming after"), "{out}");
    let wh = dir.path().join("wh");
    let rows = duck(
        &wh,
        &format!("SELECT COUNT(*), COUNT(DISTINCT pair_id), COUNT(error), MIN(completion_tokens), MIN(length(raw_output)) FROM {GENS}"),
    );
    assert_eq!(rows[0][0], 6, "{rows:?}");
    assert_eq!(rows[0][1], 6);
    assert_eq!(rows[0][2], 0, "no request failed");
    assert!(rows[0][3].as_i64().unwrap() > 0 && rows[0][4].as_i64().unwrap() > 0, "{rows:?}");
    assert!(none_left(&needle), "the server ended with the run");
    assert!(run_ok(&["run", "--config", c]).contains("nothing to do"));
}

#[test]
fn llama_cpp_backend_refuses_what_it_cannot_run_and_names_it() {
    let dir = tempfile::tempdir().unwrap();
    let docs = small_docs(dir.path(), 2, None);
    std::fs::write(dir.path().join("notes.gguf"), "not a model\n").unwrap();
    let models = "[[models]]\nname = \"lc\"\nbackend = \"llama-cpp\"\nmodel = \"notes.gguf\"\nmax_tokens = 8\n";
    let cfg = study(dir.path(), &docs, models, "[stages.lint]\nenabled = false\n");
    let err = run_err(&["run", "--config", cfg.to_str().unwrap()]);
    assert!(err.contains("notes.gguf is not a GGUF file"), "{err}");

    // No file at all: the config says what the backend needs, at its line.
    let cfg = study(dir.path(), &docs, "[[models]]\nname = \"lc\"\nbackend = \"llama-cpp\"\n", "");
    let err = run_err(&["plan", "--config", cfg.to_str().unwrap()]);
    assert!(err.contains("needs `model = \"path/to/file.gguf\"`"), "{err}");
    // A key only a local server has, on another backend.
    let cfg = study(
        dir.path(),
        &docs,
        "[[models]]\nname = \"oa\"\nbackend = \"openai\"\nbase_url = \"http://127.0.0.1:9/v1\"\nparallel = 2\n",
        "",
    );
    let err = run_err(&["plan", "--config", cfg.to_str().unwrap()]);
    assert!(err.contains("`parallel` is a setting of llama-cpp"), "{err}");
}

fn gemma3_gguf() -> PathBuf {
    let p = std::env::var_os("DOC2CI_TEST_MODELS")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(std::env::var("HOME").unwrap()).join(".cache/doc2ci/test-models"))
        .join("gemma-3-270m-q4_k_m.gguf");
    assert!(p.exists(), "{} missing: scripts/deps.sh test fetches it", p.display());
    p
}

/// Gemma 3 as Q4_K_M: an architecture and a tensor type the embedded kernel does not run. Its GGUF
/// (the base model) carries no chat template, which is refused until one is named; with llama.cpp's
/// built-in `gemma` template every pair is answered, and the embedded backend points here.
#[test]
fn llama_cpp_backend_runs_a_k_quant_of_another_architecture() {
    let dir = tempfile::tempdir().unwrap();
    let docs = small_docs(dir.path(), 3, None);
    let gguf = gemma3_gguf();
    let model = |extra: &str| {
        format!(
            "[[models]]\nname = \"gemma3\"\nbackend = \"llama-cpp\"\nmodel = \"{}\"\nmax_tokens = 24\nparallel = 3\n{extra}\n",
            gguf.display()
        )
    };
    let off = "[stages.validate]\nenabled = false\n[stages.score]\nenabled = false\n[stages.lint]\nenabled = false\n";
    let cfg = study(dir.path(), &docs, &model(""), off);
    let err = run_err(&["run", "--config", cfg.to_str().unwrap()]);
    assert!(err.contains("gemma-3-270m-q4_k_m.gguf has no chat template") && err.contains("`chat_template`"), "{err}");

    let cfg = study(dir.path(), &docs, &model("chat_template = \"gemma\""), off);
    run_ok(&["run", "--config", cfg.to_str().unwrap()]);
    let wh = dir.path().join("wh");
    let rows = duck(
        &wh,
        &format!("SELECT COUNT(*), COUNT(error), MIN(completion_tokens), MIN(length(raw_output)) FROM {GENS}"),
    );
    assert_eq!(rows[0][0], 3, "{rows:?}");
    assert_eq!(rows[0][1], 0, "no request failed: {rows:?}");
    assert!(rows[0][2].as_i64().unwrap() > 0 && rows[0][3].as_i64().unwrap() > 0, "{rows:?}");
    // The template shapes every prompt: another one is another model as far as the keys know.
    let cfg = study(dir.path(), &docs, &model("chat_template = \"chatml\""), off);
    let plan = run_ok(&["plan", "--config", cfg.to_str().unwrap()]);
    assert!(plan.contains("generations/service=github-actions/model=gemma3"), "{plan}");

    // The embedded kernel refuses the file before loading it, and says which backend runs it.
    let cfg = study(
        dir.path(),
        &docs,
        &format!(
            "[[models]]\nname = \"emb\"\nbackend = \"embedded\"\nmodel = \"{}\"\nmax_tokens = 8\n",
            gguf.display()
        ),
        off,
    );
    let err = run_err(&["run", "--config", cfg.to_str().unwrap()]);
    assert!(err.contains("backend = \"llama-cpp\" runs any GGUF"), "{err}");
}
