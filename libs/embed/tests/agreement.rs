//! Agreement with sentence-transformers (the peer SPEC §5 names), on real texts of the predecessor study and
//! edge cases. The peer's values were made by tests/data/make_reference.py and committed, since torch is too
//! heavy for every CI run. Needs the model assets (`doc2ci setup`) and the real data (../shared/data/llm4ci).

mod common;

use doc2ci_embed::{Backend, Embedder, Options, MAX_TOKENS};
use doc2ci_score::{cosine, euclidean};
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::path::Path;

const TOL: f64 = 1e-4;

struct Reference {
    texts: Vec<String>,
    tokens: Vec<usize>,
    emb: Vec<Vec<f32>>,
    pairs: Vec<(usize, usize, f64, f64)>,
}

fn reference() -> Reference {
    let dir =
        Path::new(&std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR")).join("tests/data");
    let doc: Value = serde_json::from_slice(&std::fs::read(dir.join("reference.json")).unwrap()).unwrap();
    let dim = doc["dim"].as_u64().unwrap() as usize;
    let mut files: HashMap<String, HashMap<String, HashMap<String, String>>> = HashMap::new();
    let mut texts = Vec::new();
    let mut tokens = Vec::new();
    for (k, t) in doc["texts"].as_array().unwrap().iter().enumerate() {
        tokens.push(t["tokens"].as_u64().unwrap() as usize);
        if let Some(s) = t["text"].as_str() {
            texts.push(s.to_string());
            continue;
        }
        let file = t["file"].as_str().unwrap();
        let rows = files.entry(file.to_string()).or_insert_with(|| {
            common::read_csv_gz(&common::data_dir().join(file)).into_iter().map(|r| (r["ID"].clone(), r)).collect()
        });
        let raw = &rows[t["id"].as_str().unwrap()][t["column"].as_str().unwrap()];
        let text = common::clean(raw);
        let sha: String = Sha256::digest(text.as_bytes()).iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(
            sha,
            t["sha256"].as_str().unwrap(),
            "text {k} ({file} ID {}) cleans differently from the peer",
            t["id"]
        );
        texts.push(text);
    }
    let raw = std::fs::read(dir.join("reference.f32")).unwrap();
    assert_eq!(raw.len(), texts.len() * dim * 4, "reference.f32 does not match reference.json");
    let flat: Vec<f32> = raw.chunks_exact(4).map(|b| f32::from_le_bytes(b.try_into().unwrap())).collect();
    let emb = flat.chunks(dim).map(|c| c.to_vec()).collect();
    let pairs = doc["pairs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["reference"].as_u64().unwrap() as usize,
                p["output"].as_u64().unwrap() as usize,
                p["cosine"].as_f64().unwrap(),
                p["euclidean"].as_f64().unwrap(),
            )
        })
        .collect();
    Reference { texts, tokens, emb, pairs }
}

fn load(backend: Backend) -> Embedder {
    let (m, t, c) = common::model_files();
    Embedder::load_with(&m, &t, &c, Options { backend, ..Options::default() }).unwrap()
}

fn check_against_peer(backend: Backend) {
    let r = reference();
    assert!(r.texts.len() >= 200, "need at least 200 texts, have {}", r.texts.len());
    assert!(r.tokens.iter().filter(|&&n| n > MAX_TOKENS).count() >= 5, "too few texts exercise truncation");
    let e = load(backend);
    let refs: Vec<&str> = r.texts.iter().map(String::as_str).collect();

    let ids = e.token_ids(&refs).unwrap();
    for (k, (ids, &n)) in ids.iter().zip(&r.tokens).enumerate() {
        assert_eq!(ids.len(), n.min(MAX_TOKENS), "text {k}: token count differs from the peer's tokenizer");
    }

    let ours = e.embed(&refs).unwrap();
    assert_eq!(ours.len(), r.emb.len());
    let mut worst = (0f64, 0usize);
    for (k, (a, b)) in ours.iter().zip(&r.emb).enumerate() {
        let d = (1.0 - cosine(a, b)).abs();
        if d > worst.0 {
            worst = (d, k);
        }
        let norm: f64 = a.iter().map(|&x| (x as f64).powi(2)).sum::<f64>().sqrt();
        assert!((norm - 1.0).abs() < 1e-5, "text {k}: embedding norm {norm}");
    }
    let (mut worst_cos, mut worst_euc) = (0f64, 0f64);
    for &(a, b, cos, euc) in &r.pairs {
        worst_cos = worst_cos.max((cosine(&ours[a], &ours[b]) - cos).abs());
        worst_euc = worst_euc.max((euclidean(&ours[a], &ours[b]) - euc).abs());
    }
    eprintln!(
        "{backend:?}: {} texts, max |1-cos| {:.3e} (text {}); {} pairs: max |Δcosine| {worst_cos:.3e}, max |Δeuclidean| {worst_euc:.3e}",
        r.texts.len(),
        worst.0,
        worst.1,
        r.pairs.len()
    );
    assert!(worst.0 < TOL, "text {} differs from the peer: |1-cos| = {}", worst.1, worst.0);
    assert!(worst_cos < TOL && worst_euc < TOL, "pair metrics differ: cosine {worst_cos}, euclidean {worst_euc}");
}

#[test]
fn fused_backend_matches_sentence_transformers() {
    check_against_peer(Backend::Fused);
}

#[test]
fn candle_backend_matches_sentence_transformers() {
    check_against_peer(Backend::Candle);
}

#[test]
fn results_do_not_depend_on_batching_or_order() {
    let r = reference();
    let e = load(Backend::Fused);
    let all: Vec<&str> = r.texts.iter().map(String::as_str).collect();
    let whole = e.embed(&all).unwrap();
    // Reversed subset, alone and in pairs: the packing and the length sort change, the vectors must not.
    let pick: Vec<usize> = (0..all.len()).rev().step_by(7).collect();
    let subset: Vec<&str> = pick.iter().map(|&i| all[i]).collect();
    let part = e.embed(&subset).unwrap();
    for (j, &i) in pick.iter().enumerate() {
        assert!((1.0 - cosine(&part[j], &whole[i])).abs() < 1e-6, "text {i} changed with batching");
    }
    let one = e.embed(&[all[pick[0]]]).unwrap();
    assert!((1.0 - cosine(&one[0], &whole[pick[0]])).abs() < 1e-6);
    assert!(e.embed(&[]).unwrap().is_empty());
    // Identical texts give the same vector wherever they sit in a batch.
    let dup = e.embed(&[all[3], all[10], all[3]]).unwrap();
    assert!(dup[0].iter().zip(&dup[2]).all(|(a, b)| (a - b).abs() < 1e-6));
}

#[test]
fn different_texts_get_different_embeddings() {
    let e = load(Backend::Fused);
    let v = e.embed(&["on: push\njobs: {}", "stages:\n  - build\nbuild:\n  script: make", ""]).unwrap();
    assert_eq!(v[0].len(), e.dim());
    assert!(cosine(&v[0], &v[1]) < 0.99);
    assert!(cosine(&v[0], &v[2]) < 0.99);
}

#[test]
fn clean_matches_the_spec() {
    let x = "# header\nname: CI  # trailing\n\n  run: echo \"#not\"\n   \nkey: '#kept'\r\nlast: x\t  ";
    assert_eq!(common::clean(x), "name: CI\n  run: echo \"#not\"\nkey: '#kept'\nlast: x");
    assert_eq!(common::clean("#only\n# comments"), "");
    // A quote before the '#' shields only that '#'; a later one still starts a comment.
    assert_eq!(common::clean("a: \"#x\" # c"), "a: \"#x\"");
}
