//! DevOps-Gym's five measures and the high-risk verdict equal `peers/contamination.py` (rapidfuzz
//! and sacrebleu, see its header) on real references of the llm4ci data: every reference against
//! its own true continuation (a memoriser), the same shifted by one token, each of the six models'
//! answers past their own first tokens (a model writing a similar file), and its twin's
//! continuation; at DevOps-Gym's 50 + 50 tokens and at a short 10 + 20, which screens far more of
//! the short references.

use std::process::{Command, Stdio};

use doc2ci_contamination::{measure, probe, twin::twin, Probed, Shape};
use doc2ci_testkit::{llm4ci_column, root, LLM4CI_MODELS};
use serde_json::{json, Value};

const TOLERANCE: f64 = 1e-9;

struct Case {
    what: String,
    reference: String,
    continuation: String,
    shape: Shape,
}

fn after_tokens(text: &str, k: usize) -> String {
    let mut rest = text;
    for _ in 0..k {
        let t = rest.trim_start();
        match t.find(char::is_whitespace) {
            Some(i) => rest = &t[i..],
            None => return String::new(),
        }
    }
    rest.to_string()
}

fn cases() -> Vec<Case> {
    let mut refs = llm4ci_column("GitHubActions_Docs.csv.gz", "Code");
    refs.sort_by_key(|(i, _)| *i);
    let outputs: Vec<std::collections::HashMap<u64, String>> = LLM4CI_MODELS
        .iter()
        .map(|m| llm4ci_column(&format!("GitHubActions_{m}_output.csv.gz"), "LLM_YML_Output").into_iter().collect())
        .collect();
    let mut out = Vec::new();
    for shape in [Shape::default(), Shape { prefix: 10, suffix: 20 }] {
        for (id, reference) in &refs {
            let mut add = |what: String, continuation: String| {
                out.push(Case {
                    what: format!("{id} {}+{} {what}", shape.prefix, shape.suffix),
                    reference: reference.clone(),
                    continuation,
                    shape,
                })
            };
            let own = after_tokens(reference, shape.prefix);
            add("true".into(), own.clone());
            add("shifted".into(), after_tokens(&own, 1));
            add(
                "twin".into(),
                after_tokens(&twin(&doc2ci_sem::github_actions::SERVICE, reference, shape).text, shape.prefix),
            );
            for (m, o) in LLM4CI_MODELS.iter().zip(&outputs) {
                add((*m).into(), after_tokens(o.get(id).map_or("", String::as_str), shape.prefix));
            }
        }
    }
    out
}

#[test]
fn the_measures_equal_the_python_peer_on_real_references() {
    let cases = cases();
    let input: Vec<Value> = cases
        .iter()
        .map(|c| json!({"reference": c.reference, "continuation": c.continuation, "prefix": c.shape.prefix, "suffix": c.shape.suffix}))
        .collect();
    let mut child = Command::new("python3")
        .current_dir(root())
        .args(["-m", "peers.contamination"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("python3 runs");
    let body = serde_json::to_vec(&input).unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || std::io::Write::write_all(&mut stdin, &body));
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap().unwrap();
    assert!(
        out.status.success(),
        "peers/contamination.py failed (rapidfuzz, sacrebleu installed?):\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let peer: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(peer.len(), cases.len());

    let (mut measured, mut flagged, mut too_short) = (0, 0, 0);
    let mut bad = Vec::new();
    for (c, p) in cases.iter().zip(&peer) {
        match probe(&c.reference, c.shape) {
            Probed::TooShort { .. } => {
                too_short += 1;
                if p["status"] != "too_short" {
                    bad.push(format!("{}: too short here, the peer measured it", c.what));
                }
            }
            Probed::Probe(pr) => {
                measured += 1;
                let m = measure(&pr.suffix, &c.continuation);
                flagged += usize::from(m.high_risk());
                if p["status"] != "measured" || p["high_risk"] != m.high_risk() {
                    bad.push(format!("{}: high_risk {} here, peer {}", c.what, m.high_risk(), p));
                }
                for name in ["s", "t", "p", "l", "b"] {
                    let theirs = p[name].as_f64().unwrap_or(f64::NAN);
                    if (m.get(name) - theirs).abs() > TOLERANCE {
                        bad.push(format!("{} {name}: {} here, {theirs} in the peer", c.what, m.get(name)));
                    }
                }
            }
        }
    }
    eprintln!("{} cases: {measured} measured ({flagged} high-risk), {too_short} too short", cases.len());
    assert!(bad.is_empty(), "{} disagreements, first: {:#?}", bad.len(), &bad[..bad.len().min(10)]);
    // The comparison covered every verdict: flagged, clean and too short, in numbers.
    assert!(measured > 2000 && too_short > 500, "measured {measured}, too short {too_short}");
    assert!(flagged > measured / 5 && flagged < measured * 4 / 5, "flagged {flagged} of {measured}");
}
