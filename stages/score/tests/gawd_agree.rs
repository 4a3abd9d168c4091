//! Differential test of `sem_exact` against gawd, the GitHub Actions workflow differ (live, through
//! `python3 tests/peers/gawd_peer.py`), on every pair of complete workflows among each llm4ci pair's
//! reference and six model outputs: wherever gawd reports no change, `sem_exact` holds; wherever
//! `sem_exact` holds and gawd reports changes, a documented rule made the spellings equal (the
//! counts per rule are printed).

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::process::{Command, Stdio};

use doc2ci_sem::{canonical, canonical_without, sem_exact, service, Canon, Shape};
use doc2ci_yaml::{load_all, Limits, Value};

/// (text a, text b, why): pairs gawd calls unchanged that differ in canonical form, with the cause.
/// Each must still occur, so an entry goes once its cause does.
const KNOWN: &[(&str, &str)] = &[];

/// The canonical form of a text that is one complete workflow.
fn workflow(text: &str) -> Option<Canon> {
    let docs = load_all(text, &Limits::default()).ok()?;
    let gha = service("github-actions").unwrap();
    match docs.as_slice() {
        [v @ Value::Map(_)] if doc2ci_sem::shape(gha, v) == Shape::File => Some(canonical(gha, &docs)),
        _ => None,
    }
}

/// The GitHub Actions corpus cases whose two sides are (or complete into) workflows.
fn corpus_workflows() -> Vec<(String, String)> {
    use doc2ci_lint::wrap::{complete, Completion};
    let path = std::path::Path::new(&std::env::var("CARGO_MANIFEST_DIR").unwrap())
        .join("../../libs/sem/tests/corpus/github-actions.yaml");
    let body = std::fs::read_to_string(&path).unwrap();
    let cases = doc2ci_yaml::load(&body, &Limits::default()).unwrap();
    let whole = |t: &str| match complete("github-actions".parse::<doc2ci_validate::Service>().unwrap(), t) {
        Completion::Wrapped(w) => w.text,
        _ => t.to_string(),
    };
    let mut out = Vec::new();
    for case in cases.as_seq().unwrap() {
        let side = |k: &str| whole(case.as_map().unwrap().get(k).and_then(Value::as_str).unwrap());
        let (a, b) = (side("a"), side("b"));
        if workflow(&a).is_some() && workflow(&b).is_some() {
            out.push(if a <= b { (a, b) } else { (b, a) });
        }
    }
    assert!(out.len() >= 15, "{} corpus cases complete into workflows", out.len());
    out
}

#[test]
fn sem_exact_agrees_with_gawd_on_complete_workflows() {
    let mut by_id: BTreeMap<u64, Vec<String>> = BTreeMap::new();
    for (id, code) in common::column("GitHubActions_Docs.csv.gz", "Code") {
        by_id.entry(id).or_default().push(doc2ci_score::clean(&code));
    }
    for m in common::MODELS {
        for (id, out) in common::column(&format!("GitHubActions_{m}_output.csv.gz"), "LLM_YML_Output") {
            by_id.entry(id).or_default().push(doc2ci_score::clean(&out));
        }
    }
    // Every distinct pair of distinct complete workflows of one pair ID.
    let mut pairs: BTreeSet<(String, String)> = BTreeSet::new();
    let mut forms: BTreeMap<String, Canon> = BTreeMap::new();
    for texts in by_id.values() {
        let complete: BTreeSet<&String> = texts.iter().filter(|t| workflow(t).is_some()).collect();
        for a in &complete {
            for b in &complete {
                if a < b {
                    pairs.insert(((*a).clone(), (*b).clone()));
                }
            }
            forms.entry((*a).clone()).or_insert_with(|| workflow(a).unwrap());
        }
    }
    assert!(pairs.len() > 2000, "{} pairs of complete workflows", pairs.len());
    let real = pairs.len();
    // And the documented-equivalence corpus, each side completed into a workflow by the lint stage
    // (both sides of a case have the same shape, so the same wrapper): pairs the differ should
    // either see as equal or report with changes a documented rule explains.
    for (a, b) in corpus_workflows() {
        forms.entry(a.clone()).or_insert_with(|| workflow(&a).unwrap());
        forms.entry(b.clone()).or_insert_with(|| workflow(&b).unwrap());
        pairs.insert((a, b));
    }
    let pairs: Vec<(String, String)> = pairs.into_iter().collect();

    let root = std::path::Path::new(&std::env::var("CARGO_MANIFEST_DIR").unwrap()).join("../..");
    let mut child = Command::new("python3")
        .current_dir(root)
        .args(["-m", "peers.gawd"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("python3 runs (scripts/deps.sh test installs gawd)");
    let mut stdin = child.stdin.take().unwrap();
    let input: String = pairs
        .iter()
        .enumerate()
        .map(|(i, (a, b))| serde_json::json!({"id": i, "a": a, "b": b}).to_string() + "\n")
        .collect();
    let writer = std::thread::spawn(move || stdin.write_all(input.as_bytes()));
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap().unwrap();
    assert!(out.status.success(), "gawd_peer.py failed");
    // None where gawd raises (it assumes `jobs` is a mapping of mappings).
    let gawd: Vec<Option<Vec<String>>> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            v["changes"].as_array().map(|c| c.iter().map(|c| c.as_str().unwrap().to_string()).collect())
        })
        .collect();
    assert_eq!(gawd.len(), pairs.len(), "gawd answered every pair");

    let (mut both, mut neither, mut rules) = (0, 0, BTreeMap::<&str, usize>::new());
    let (mut sem_only, mut gawd_failed) = (0, 0);
    let mut disagreements = Vec::new();
    for ((a, b), changes) in pairs.iter().zip(&gawd) {
        let Some(changes) = changes else {
            gawd_failed += 1;
            continue;
        };
        let (fa, fb) = (&forms[a], &forms[b]);
        match (changes.is_empty(), sem_exact(fa, fb)) {
            (true, true) => both += 1,
            (false, false) => neither += 1,
            (true, false) => disagreements.push((a.as_str(), b.as_str())),
            (false, true) => {
                sem_only += 1;
                // The rules the equality needs: without any one of them, the forms differ.
                let gha = service("github-actions").unwrap();
                let without = |t: &str, r| canonical_without(gha, &load_all(t, &Limits::default()).unwrap(), r);
                let used: BTreeSet<&str> = fa
                    .applied
                    .keys()
                    .chain(fb.applied.keys())
                    .copied()
                    .filter(|r| !sem_exact(&without(a, r), &without(b, r)))
                    .collect();
                assert!(
                    !used.is_empty(),
                    "sem_exact holds, gawd reports {changes:?}, and no documented rule was used:\n{a}\n---\n{b}"
                );
                for r in used {
                    *rules.entry(r).or_default() += 1;
                }
            }
        }
    }
    eprintln!(
        "gawd vs sem_exact on {} pairs of complete workflows ({real} real, the rest from the corpus): both equal {both}, both different {neither}, \
         sem_exact only {sem_only} (rules: {rules:?}), gawd only {}; gawd raised on {gawd_failed}",
        pairs.len(),
        disagreements.len()
    );
    assert!(gawd_failed * 20 < pairs.len(), "gawd raised on {gawd_failed} of {} pairs", pairs.len());
    let unexplained: Vec<_> =
        disagreements.iter().filter(|(a, b)| !KNOWN.iter().any(|k| k.0 == *a && k.1 == *b)).collect();
    assert!(
        unexplained.is_empty(),
        "gawd reports no change where sem_exact does not hold ({}):\n{}",
        unexplained.len(),
        unexplained.iter().take(5).map(|(a, b)| format!("{a}\n---\n{b}\n=====")).collect::<Vec<_>>().join("\n")
    );
    for k in KNOWN {
        assert!(disagreements.iter().any(|(a, b)| *a == k.0 && *b == k.1), "KNOWN entry no longer occurs");
    }
}
