//! Differential test of every lexical and structural metric against its Python peer, on real rows of
//! the llm4ci data (606 sampled pairs plus non-ASCII and longest outputs) and edge cases
//! (`tests/peers/cases.py` defines both).
//!
//! Live peers, run here through `python3 tests/peers/metrics_peer.py`: sacrebleu (bleu, chrf),
//! crystalbleu (crystal_bleu), zss (tree_edit), rapidfuzz (levenshtein), ruamel.yaml (clean/lj/canon
//! and the trees), deepdiff with CloudEval-YAML's code (kv_exact, kv_wildcard). Install them with
//! `pip install sacrebleu crystalbleu nltk zss rapidfuzz ruamel.yaml deepdiff`.
//!
//! Committed peer: pytorch-ignite (rouge_l) needs torch, so its values are in
//! `tests/data/rouge_l_ignite.json`, written by `tests/peers/rouge_ignite_peer.py`; each row carries a
//! fingerprint of the two `lj` texts, so a change of the cases or of `lj` fails here until the file is
//! regenerated.
//!
//! Data: `$DOC2CI_LLM4CI_DATA`, else `../shared/data/llm4ci` beside the workspace. `DOC2CI_PEER_ALL=1`
//! scores all 7,908 real outputs instead of the sample (minutes; rouge_l then only where committed);
//! `DOC2CI_PEER_JSON=file` reuses a saved `metrics_peer.py` output instead of running it.

mod common;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use doc2ci_score::{score_prepared, CrystalContext, Prepared, Scores};
use serde_json::Value;
use sha2::{Digest, Sha256};

const TOLERANCE: f64 = 1e-9;

/// (row, metric, why): disagreements with a known cause outside this crate. Each must still
/// disagree, so the entry has to go once the cause is fixed.
const KNOWN: &[(&str, &str, &str)] = &[];

fn manifest_dir() -> PathBuf {
    PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"))
}

/// The Docs file's references in ID order, read independently of the peer.
fn docs_references() -> Vec<String> {
    let mut rows = common::column("GitHubActions_Docs.csv.gz", "Code");
    rows.sort_by_key(|(i, _)| *i);
    rows.into_iter().map(|(_, c)| c).collect()
}

fn run_peer(dir: &Path) -> Value {
    if let Some(saved) = std::env::var_os("DOC2CI_PEER_JSON") {
        let text = std::fs::read_to_string(&saved).expect("saved peer output");
        return serde_json::from_str(&text).expect("saved peer output is JSON");
    }
    let mut cmd = Command::new("python3");
    cmd.current_dir(manifest_dir().join("../..")).args(["-m", "peers.metrics", "--data"]).arg(dir);
    if std::env::var_os("DOC2CI_PEER_ALL").is_some() {
        cmd.arg("--all");
    }
    let out = cmd.output().expect("python3 runs (the peers need python3 with sacrebleu, crystalbleu, zss, ...)");
    assert!(
        out.status.success(),
        "metrics_peer.py failed (are the peers installed?):\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("peer prints JSON")
}

fn committed_rouge() -> HashMap<String, (String, f64)> {
    let path = manifest_dir().join("tests/data/rouge_l_ignite.json");
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&path).expect("committed ROUGE-L values")).unwrap();
    v["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["key"].as_str().unwrap().to_string(),
                (r["lj"].as_str().unwrap().to_string(), r["rouge_l"].as_f64().unwrap()),
            )
        })
        .collect()
}

fn fingerprint(lj_ref: &str, lj_out: &str) -> String {
    let mut h = Sha256::new();
    h.update(lj_ref.as_bytes());
    h.update([0u8]);
    h.update(lj_out.as_bytes());
    h.finalize().iter().take(8).map(|b| format!("{b:02x}")).collect()
}

#[derive(Default)]
struct Agreement {
    rows: usize,
    max_diff: f64,
    failures: Vec<String>,
}

impl Agreement {
    fn check(&mut self, metric: &str, key: &str, ours: f64, peer: f64) {
        let diff = (ours - peer).abs();
        if let Some((_, _, why)) = KNOWN.iter().find(|(k, m, _)| *k == key && *m == metric) {
            if diff <= TOLERANCE {
                self.failures.push(format!("{key}: agrees now, drop it from KNOWN ({why})"));
            }
            return;
        }
        self.rows += 1;
        if diff > self.max_diff || diff.is_nan() {
            self.max_diff = diff;
        }
        if diff.is_nan() || diff > TOLERANCE {
            self.failures.push(format!("{key}: ours {ours:?} peer {peer:?}"));
        }
    }
}

#[test]
fn every_metric_agrees_with_its_peer_on_real_data() {
    let dir = common::data_dir();
    let refs = docs_references();
    assert_eq!(refs.len(), 1318, "the Docs file has 1,318 references");
    let ctx = CrystalContext::from_references(&refs);
    let peer = run_peer(&dir);

    // The ignored n-grams: same n-grams, same counts, same order.
    let ours: Vec<(Vec<String>, u64)> = ctx.ignored().to_vec();
    let theirs: Vec<(Vec<String>, u64)> = peer["ignored"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            let g = e[0].as_array().unwrap().iter().map(|t| t.as_str().unwrap().to_string()).collect();
            (g, e[1].as_u64().unwrap())
        })
        .collect();
    assert_eq!(ours.len(), 500);
    assert_eq!(ours, theirs, "CrystalBLEU's ignored n-grams differ");

    let rouge = committed_rouge();
    let metrics =
        ["bleu", "crystal_bleu", "rouge_l", "chrf", "tree_edit", "levenshtein", "exact", "kv_exact", "kv_wildcard"];
    let mut agree: HashMap<&str, Agreement> = metrics.iter().map(|m| (*m, Agreement::default())).collect();
    let mut text_failures = Vec::new();
    let mut real = 0;
    let rows = peer["rows"].as_array().unwrap();
    for row in rows {
        let key = row["key"].as_str().unwrap();
        if !key.starts_with("edge:") {
            real += 1;
        }
        let (r, o) = (row["reference"].as_str().unwrap(), row["output"].as_str().unwrap());
        let (pr, po) = (Prepared::new(r, &ctx), Prepared::new(o, &ctx));
        for (what, ours, theirs) in [
            ("clean_ref", pr.clean(), &row["clean_ref"]),
            ("clean_out", po.clean(), &row["clean_out"]),
            ("lj_ref", pr.lj(), &row["lj_ref"]),
            ("lj_out", po.lj(), &row["lj_out"]),
            ("canon_ref", pr.canon(), &row["canon_ref"]),
            ("canon_out", po.canon(), &row["canon_out"]),
        ] {
            if ours != theirs.as_str().unwrap() {
                text_failures.push(format!("{key} {what}:\n  ours {ours:?}\n  peer {:?}", theirs.as_str().unwrap()));
            }
        }
        let nodes = [pr.tree_nodes() as u64, po.tree_nodes() as u64];
        let peer_nodes: Vec<u64> = row["tree_nodes"].as_array().unwrap().iter().map(|n| n.as_u64().unwrap()).collect();
        if nodes[..] != peer_nodes[..] {
            text_failures.push(format!("{key} tree nodes: ours {nodes:?} peer {peer_nodes:?}"));
        }
        let s: Scores = score_prepared(&pr, &po);
        let ours = metrics.map(|m| s.value(m));
        for (m, v) in metrics.iter().zip(ours) {
            if *m == "rouge_l" {
                match rouge.get(key) {
                    Some((fp, value)) => {
                        assert_eq!(
                            fp,
                            &fingerprint(pr.lj(), po.lj()),
                            "{key}: committed ROUGE-L was computed on other texts; rerun `python3 -m peers.rouge_ignite`"
                        );
                        agree.get_mut(m).unwrap().check(m, key, v, *value);
                    }
                    None => assert!(
                        std::env::var_os("DOC2CI_PEER_ALL").is_some(),
                        "{key}: no committed ROUGE-L value; rerun `python3 -m peers.rouge_ignite`"
                    ),
                }
            } else {
                agree.get_mut(m).unwrap().check(m, key, v, row[*m].as_f64().unwrap());
            }
        }
    }

    println!("{} pairs ({} real, {} edge cases); tolerance {TOLERANCE:e}", rows.len(), real, rows.len() - real);
    for (key, metric, why) in KNOWN {
        println!("known difference, not counted: {key} {metric}: {why}");
    }
    println!("{:<14} {:>6} {:>12} {:>9}", "metric", "rows", "max |diff|", "failures");
    for m in metrics {
        let a = &agree[m];
        println!("{:<14} {:>6} {:>12.3e} {:>9}", m, a.rows, a.max_diff, a.failures.len());
    }
    let mut report = String::new();
    for f in &text_failures {
        report += &format!("{f}\n");
    }
    for m in metrics {
        for f in agree[m].failures.iter().take(20) {
            report += &format!("{m} {f}\n");
        }
    }
    assert!(real >= 500, "at least 500 real pairs, got {real}");
    assert!(agree["rouge_l"].rows >= 500, "ROUGE-L compared on at least 500 pairs");
    assert!(report.is_empty(), "disagreements with the peers:\n{report}");
}
