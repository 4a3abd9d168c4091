//! Issue 45: the contamination screen against a memorising server. A loopback OpenAI-compatible
//! server that has "seen" a known half of real llm4ci references answers the continuation
//! instruction with their true rest, and invents the same idiomatic YAML for everything else
//! (the other half, every twin, the study's own prompts). The screen flags exactly that half,
//! no twin, and runs again only for its own keys.

use crate::common::*;

use std::collections::{BTreeSet, HashMap};
use std::net::TcpListener;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use doc2ci_testkit::llm4ci_column;

/// What the server writes when it does not know the file: plausible, and no file's continuation.
const INVENTED: &str = "    timeout-minutes: 17\n    env:\n      PREVIEW_BUCKET: preview-artifacts\n      \
                        RETENTION_DAYS: 3\n    concurrency:\n      group: preview-${{ github.ref }}\n      \
                        cancel-in-progress: true\n";

/// Real references long enough for 50 + 50 tokens, with distinct 50-token openings.
fn references(n: usize) -> Vec<String> {
    references_cut(n, 50, 120)
}

/// Real references of at least `min` tokens, with distinct `opening`-token openings.
fn references_cut(n: usize, opening: usize, min: usize) -> Vec<String> {
    let mut refs = llm4ci_column("GitHubActions_Docs.csv.gz", "Code");
    refs.sort_by_key(|(i, _)| *i);
    let mut seen = BTreeSet::new();
    refs.into_iter()
        .map(|(_, r)| r)
        .filter(|r| r.split_whitespace().count() >= min)
        .filter(|r| seen.insert(r.split_whitespace().take(opening).collect::<Vec<_>>().join(" ")))
        .take(n)
        .collect()
}

/// The text after the first `k` whitespace tokens of `r`, as written.
fn rest_after(r: &str, k: usize) -> &str {
    let mut at = 0;
    for _ in 0..k {
        let t = &r[at..];
        let start = t.len() - t.trim_start().len();
        let end = t[start..].find(char::is_whitespace).map_or(t.len(), |i| start + i);
        at += end;
    }
    &r[at..]
}

/// The server: `memory` maps a prefix it has seen to the file's rest. Counts its requests.
fn memorising_server(l: TcpListener, memory: HashMap<String, String>) -> Arc<AtomicUsize> {
    let asked = Arc::new(AtomicUsize::new(0));
    let count = asked.clone();
    serve(l, move |body| {
        count.fetch_add(1, Ordering::SeqCst);
        let req: serde_json::Value = serde_json::from_str(body).unwrap_or_default();
        let prompt =
            req["messages"].as_array().and_then(|m| m.last()).and_then(|m| m["content"].as_str()).unwrap_or("");
        let known = prompt.split_once("First piece:\n").and_then(|(_, prefix)| memory.get(prefix));
        Some(chat_reply(known.map_or(INVENTED, String::as_str)))
    });
    asked
}

const ROWS: &str = "read_parquet('{wh}/contamination/**/*.parquet', hive_partitioning=true)";

#[test]
fn the_screen_flags_exactly_the_memorised_half_and_no_twin() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let refs = references(12);
    assert_eq!(refs.len(), 12);
    // The server has seen the even-numbered references, from their 50-token opening on.
    let memory: HashMap<String, String> = refs
        .iter()
        .step_by(2)
        .map(|r| {
            let rest = rest_after(r, 50);
            (r[..r.len() - rest.len()].to_string(), rest.to_string())
        })
        .collect();
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/v1", l.local_addr().unwrap());
    let asked = memorising_server(l, memory);
    let pairs: String = refs
        .iter()
        .enumerate()
        .map(|(i, r)| {
            serde_json::json!({"id": format!("{i:02}"), "url": format!("https://docs.example.com/{i}"),
                "title": format!("Page {i}"), "description": format!("Workflow number {i}."), "reference": r})
            .to_string()
                + "\n"
        })
        .collect();
    std::fs::write(d.join("pairs.jsonl"), pairs).unwrap();
    let study = |suffix: usize| {
        format!(
            "[study]\nwarehouse = \"wh\"\n\n[[services]]\nname = \"github-actions\"\ndisplay = \"GitHub Actions\"\n\n\
             [[sources]]\nkind = \"import\"\nformat = \"jsonl\"\npath = \"pairs.jsonl\"\nservice = \"github-actions\"\n\n\
             [[models]]\nname = \"memo\"\nbackend = \"openai\"\nbase_url = \"{url}\"\nmodel = \"m\"\n\n\
             [stages.lint]\nenabled = false\n[stages.score]\nenabled = false\n\n\
             [stages.contamination]\nenabled = true\nsuffix_tokens = {suffix}\n"
        )
    };
    let cfg = d.join("pipeline.toml");
    std::fs::write(&cfg, study(50)).unwrap();
    let cfg = cfg.display().to_string();
    let wh = d.join("wh");
    run_ok(&["run", "--config", &cfg]);

    let rows = duck(
        &wh,
        &format!(
            "SELECT p.source_id, c.variant, c.status, c.t, c.flags, c.twin_valid FROM {ROWS} c \
             JOIN read_parquet('{{wh}}/pairs/**/*.parquet', hive_partitioning=true) p USING (pair_id) ORDER BY p.source_id, c.variant"
        ),
    );
    assert_eq!(rows.len(), 24, "a real and a twin row per pair: {rows:?}");
    let flagged: Vec<String> = rows
        .iter()
        .filter(|r| r[1] == "real" && r[2] == "high_risk")
        .map(|r| r[0].as_str().unwrap().to_string())
        .collect();
    let memorised: Vec<String> = (0..12).step_by(2).map(|i| format!("{i:02}")).collect();
    assert_eq!(flagged, memorised, "exactly the memorised half: {rows:?}");
    for r in rows.iter().filter(|r| r[1] == "real" && r[2] == "high_risk") {
        assert_eq!(
            (r[3].as_f64(), r[4].as_str()),
            (Some(100.0), Some("s,t,p,l,b")),
            "the true rest matches fully: {r:?}"
        );
    }
    let real_clean = rows.iter().filter(|r| r[1] == "real" && r[2] == "clean").count();
    assert_eq!(real_clean, 6, "{rows:?}");
    let twins: Vec<&Vec<serde_json::Value>> = rows.iter().filter(|r| r[1] == "twin").collect();
    assert!(twins.iter().all(|r| r[2] != "high_risk"), "no twin is recalled: {twins:?}");
    let screened_twins = twins.iter().filter(|r| r[2] == "clean").count();
    assert!(screened_twins >= 10, "most twins are valid and screened: {twins:?}");
    assert!(twins.iter().filter(|r| r[2] == "clean").all(|r| r[5] == true), "{twins:?}");

    let summary = run_ok(&[
        "sql",
        "--config",
        &cfg,
        "--format",
        "csv",
        "SELECT model, references_screened, references_high_risk, high_risk_pct, twin_high_risk_pct, too_short FROM contamination_summary",
    ]);
    assert!(summary.contains("memo,12,6,50.0,0.0,0"), "{summary}");

    // Real references are recalled more than their twins: 6 pairs one way, none the other.
    let sign =
        duck(&wh, "SELECT b, c, p, n FROM read_parquet('{wh}/stats/**/*.parquet') WHERE test = 'contamination_sign'");
    assert_eq!(sign.len(), 1, "{sign:?}");
    // (Only pairs whose twin was screened count: each memorised one is real-only.)
    let (b, c, p) = (sign[0][0].as_u64().unwrap(), sign[0][1].as_u64(), sign[0][2].as_f64());
    assert!(b >= 5 && c == Some(0) && (p.unwrap() - 0.5f64.powi(b as i32)).abs() < 1e-12, "{sign:?}");

    // The report: Table I on the screen-clean half, and the sample browser (in Chromium) lists
    // the recalled half's answers and shows a recalled pair's prefix, true suffix and continuation.
    let clean = std::fs::read_to_string(wh.join("report/tables/table1_clean.csv")).unwrap();
    assert!(clean.lines().any(|l| l.starts_with("memo,screen-clean,6,")), "{clean}");
    let page = wh.join("report/samples.html");
    let dom = crate::study::render(&page, "screen=recalled");
    assert_eq!(crate::study::matches_shown(&dom), 6, "the recalled answers");
    let dom = crate::study::render(&page, "screen=clean");
    assert_eq!(crate::study::matches_shown(&dom), 6, "the screen-clean answers");
    let recalled =
        duck(&wh, &format!("SELECT pair_id FROM {ROWS} WHERE variant = 'real' AND status = 'high_risk' LIMIT 1"));
    let dom = crate::study::render(&page, &format!("pair=github-actions/{}", recalled[0][0].as_str().unwrap()));
    for part in ["class=\"prefix\"", "class=\"suffix\"", "class=\"continuation\"", "real high risk (s,t,p,l,b)"] {
        assert!(dom.contains(part), "the opened pair shows {part}");
    }

    // Nothing changed: nothing asked.
    let before = asked.load(Ordering::SeqCst);
    let again = run_ok(&["run", "--config", &cfg]);
    assert_eq!(asked.load(Ordering::SeqCst), before, "{again}");
    // Its own key changed: only the screen runs again, the study's answers are kept.
    let gens = file_times(&wh.join("generations"));
    std::fs::write(d.join("pipeline.toml"), study(40)).unwrap();
    let out = run_ok(&["run", "--config", &cfg]);
    assert_eq!(file_times(&wh.join("generations")), gens, "{out}");
    let n = duck(
        &wh,
        &format!("SELECT COUNT(*) FROM {ROWS} WHERE suffix_tokens = 40 AND variant = 'real' AND status = 'high_risk'"),
    );
    assert_eq!(n[0][0].as_u64(), Some(6), "{out}");
}

/// What an idiomatic model that knows no file writes next: the steps most workflows have.
const IDIOMATIC: &str = "\n    steps:\n      - uses: actions/checkout@v4\n      - name: Set up Node.js\n        uses: actions/setup-node@v4\n        \
                         with:\n          node-version: 20\n      - run: npm ci\n      - run: npm test\n";

/// A server with the legacy `/completions` endpoint (`completions = true`, `echo_logprobs =
/// true`): it continues a prompt as is, from `memory` (a prefix it has seen → the file's rest) or
/// with [`IDIOMATIC`] steps, and echoes a prompt's token log-probabilities: near 0 for a text in `seen`,
/// else a value of each token alone (an idiomatic model that knows words, not files).
fn completion_server(l: TcpListener, memory: HashMap<String, String>, seen: BTreeSet<String>) {
    serve(l, move |body| {
        let req: serde_json::Value = serde_json::from_str(body).unwrap_or_default();
        let Some(prompt) = req["prompt"].as_str() else { return Some(chat_reply(INVENTED)) };
        if req["echo"] == true {
            let (mut tokens, mut offsets, mut lps) = (vec![], vec![], vec![serde_json::Value::Null]);
            let mut at = 0;
            for t in prompt.split_whitespace() {
                at += prompt[at..].find(t).unwrap();
                offsets.push(prompt[..at].chars().count());
                tokens.push(t.to_string());
                at += t.len();
            }
            for t in tokens.iter().skip(1) {
                let h = blake3::hash(t.as_bytes()).as_bytes()[0] as f64;
                lps.push(serde_json::json!(if seen.contains(prompt) { -0.05 } else { -2.0 - h / 40.0 }));
            }
            lps.push(serde_json::json!(-1.0));
            tokens.push(" next".into());
            offsets.push(prompt.chars().count());
            return Some(Reply::ok(
                serde_json::json!({"object": "text_completion", "choices": [{"index": 0, "text": format!("{prompt} next"),
                    "finish_reason": "length", "logprobs": {"tokens": tokens, "token_logprobs": lps, "text_offset": offsets}}],
                    "usage": {"prompt_tokens": tokens.len() - 1, "completion_tokens": 1}})
                .to_string(),
            ));
        }
        let text = memory.get(prompt).map_or(IDIOMATIC, String::as_str);
        Some(Reply::ok(
            serde_json::json!({"object": "text_completion", "choices": [{"index": 0, "text": text, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 60, "completion_tokens": 40}})
            .to_string(),
        ))
    });
}

/// A study of `refs` against an OpenAI-compatible server at `url` that serves `/completions`,
/// screened with `cut` (`prefix_tokens = …` lines; empty: DevOps-Gym's).
fn raw_study(d: &std::path::Path, refs: &[String], url: &str, cut: &str) -> String {
    let pairs: String = refs
        .iter()
        .enumerate()
        .map(|(i, r)| {
            serde_json::json!({"id": format!("{i:02}"), "url": format!("https://docs.example.com/{i}"),
                "title": format!("Page {i}"), "description": format!("Workflow number {i}."), "reference": r})
            .to_string()
                + "\n"
        })
        .collect();
    std::fs::write(d.join("pairs.jsonl"), pairs).unwrap();
    let cfg = d.join("pipeline.toml");
    std::fs::write(
        &cfg,
        format!(
            "[study]\nwarehouse = \"wh\"\n\n[[services]]\nname = \"github-actions\"\ndisplay = \"GitHub Actions\"\n\n\
             [[sources]]\nkind = \"import\"\nformat = \"jsonl\"\npath = \"pairs.jsonl\"\nservice = \"github-actions\"\n\n\
             [[models]]\nname = \"base\"\nbackend = \"openai\"\nbase_url = \"{url}\"\nmodel = \"m\"\ncompletions = true\necho_logprobs = true\n\n\
             [stages.lint]\nenabled = false\n[stages.score]\nenabled = false\n\n\
             [stages.contamination]\nenabled = true\n{cut}"
        ),
    )
    .unwrap();
    cfg.display().to_string()
}

/// (effect, ci_low, ci_high, n) of the stats row `test` of the model `base`.
fn stat(wh: &std::path::Path, test: &str, group_b: &str) -> (f64, f64, f64, u64) {
    let r = duck(
        wh,
        &format!("SELECT effect, ci_low, ci_high, n FROM read_parquet('{{wh}}/stats/**/*.parquet') WHERE test = '{test}' AND group_b = '{group_b}'"),
    );
    assert_eq!(r.len(), 1, "{test}: {r:?}");
    let f = |i: usize| r[0][i].as_f64().unwrap();
    (f(0), f(1), f(2), r[0][3].as_u64().unwrap())
}

/// Raw completion and echoed log-probabilities: a server that has seen every reference (and
/// recalls the rest of half of them verbatim) is flagged on that half, continued raw, and its
/// Min-K% separates every reference from its twin (AUC 1).
#[test]
fn a_memorising_completions_server_is_caught_by_both_signals() {
    let dir = tempfile::tempdir().unwrap();
    let refs = references(12);
    let memory: HashMap<String, String> = refs
        .iter()
        .step_by(2)
        .map(|r| {
            let rest = rest_after(r, 50);
            (r[..r.len() - rest.len()].to_string(), rest.to_string())
        })
        .collect();
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/v1", l.local_addr().unwrap());
    completion_server(l, memory, refs.iter().cloned().collect());
    let cfg = raw_study(dir.path(), &refs, &url, "");
    run_ok(&["run", "--config", &cfg]);
    let wh = dir.path().join("wh");
    let rows =
        duck(&wh, &format!("SELECT variant, status, mode, min_k FROM {ROWS} WHERE variant = 'real' ORDER BY pair_id"));
    assert!(rows.iter().all(|r| r[2] == "raw" && r[3].is_f64()), "raw, and scored: {rows:?}");
    assert_eq!(rows.iter().filter(|r| r[1] == "high_risk").count(), 6, "{rows:?}");
    let (auc, lo, _, n) = stat(&wh, "contamination_auc", "twin");
    assert!(n >= 10 && auc == 1.0 && lo > 0.9, "AUC {auc} [{lo}, …] over {n}");
}

/// A server that knows no file, asked the same way: its continuations are idiomatic YAML it
/// invents, its log-probabilities are the words', so references and twins look alike: the
/// high-risk rates of the two agree within their CIs, the sign test finds nothing, and Min-K%'s
/// AUC has 0.5 inside its CI.
#[test]
fn an_inventing_completions_server_recalls_nothing() {
    let dir = tempfile::tempdir().unwrap();
    // The llm4ci study's cut (10 + 20): 80 references, most of them with a screened twin.
    let refs = references_cut(80, 30, 40);
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/v1", l.local_addr().unwrap());
    completion_server(l, HashMap::new(), BTreeSet::new());
    let cfg = raw_study(dir.path(), &refs, &url, "prefix_tokens = 10\nsuffix_tokens = 20\n");
    run_ok(&["run", "--config", &cfg]);
    let wh = dir.path().join("wh");
    let (real, real_lo, real_hi, n_real) = stat(&wh, "contamination_rate", "real");
    let (twin, twin_lo, twin_hi, n_twin) = stat(&wh, "contamination_rate", "twin");
    assert!(n_real == 80 && n_twin >= 50, "{n_real} {n_twin}");
    // Idiomatic steps match some true suffixes by chance, on references and twins alike.
    assert!(real > 0.0 && twin > 0.0, "real {real} twin {twin}");
    assert!(
        real_lo <= twin_hi && twin_lo <= real_hi,
        "real {real} [{real_lo}, {real_hi}] twin {twin} [{twin_lo}, {twin_hi}]"
    );
    let sign =
        duck(&wh, "SELECT p, b, c FROM read_parquet('{wh}/stats/**/*.parquet') WHERE test = 'contamination_sign'");
    assert!(sign[0][0].as_f64().unwrap() > 0.05, "{sign:?}");
    let (auc, lo, hi, n) = stat(&wh, "contamination_auc", "twin");
    eprintln!("inventing server: real {real} [{real_lo}, {real_hi}] of {n_real}, twin {twin} [{twin_lo}, {twin_hi}] of {n_twin}, sign {:?}, AUC {auc} [{lo}, {hi}] over {n}", sign[0]);
    assert!(lo <= 0.5 && 0.5 <= hi, "AUC {auc} [{lo}, {hi}] over {n}");
}
