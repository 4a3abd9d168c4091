//! k-fold splits for fine-tuning. Pairs that share a description (same service, title and
//! prose, different references) are one training target, as the study collapsed them: a model
//! cannot learn two answers to one question, and a description must never sit in both the
//! training and the test side of a fold.

use std::collections::HashMap;

use doc2ci_rows::{collapse_ws, normalize_reference, Pair};
use serde::Serialize;

use crate::{zero_shot, Msg};

/// The pairs of one description; `pairs[0]` (first in source order) gives the training target.
#[derive(Debug, Clone)]
pub struct Group<'a> {
    pub fold: usize,
    pub service: String,
    pub pairs: Vec<&'a Pair>,
}

/// Groups per description, then within each service a fixed hash order dealt round-robin to
/// `k` folds: every service is spread evenly over the folds (stratified) and the split is
/// the same on every machine.
pub fn assign_folds(pairs: &[Pair], k: usize) -> Vec<Group<'_>> {
    assert!(k >= 2, "at least two folds");
    let mut order: Vec<(String, String)> = Vec::new();
    let mut groups: HashMap<(String, String), Vec<&Pair>> = HashMap::new();
    let mut sorted: Vec<&Pair> = pairs.iter().collect();
    sorted.sort_by(|a, b| {
        (a.service.as_str(), a.position, a.pair_id.as_str()).cmp(&(b.service.as_str(), b.position, b.pair_id.as_str()))
    });
    for p in sorted {
        let key = (p.service.clone(), format!("{}\u{0}{}", collapse_ws(&p.title), collapse_ws(&p.description)));
        let g = groups.entry(key.clone()).or_default();
        if g.is_empty() {
            order.push(key);
        }
        g.push(p);
    }
    let mut by_service: HashMap<String, Vec<(String, (String, String))>> = HashMap::new();
    for key in order {
        let h = blake3::hash(format!("{}\u{0}{}", key.0, key.1).as_bytes()).to_hex().to_string();
        by_service.entry(key.0.clone()).or_default().push((h, key));
    }
    let mut services: Vec<String> = by_service.keys().cloned().collect();
    services.sort();
    let mut out = Vec::new();
    for s in services {
        let mut keys = by_service.remove(&s).unwrap_or_default();
        keys.sort();
        for (i, (_, key)) in keys.into_iter().enumerate() {
            let pairs = groups.remove(&key).unwrap_or_default();
            out.push(Group { fold: i % k, service: s.clone(), pairs });
        }
    }
    out
}

/// One line of a chat JSONL file: `messages` is what trainers read; the rest traces the line
/// back to its pair (trainers ignore unknown keys).
#[derive(Debug, Clone, Serialize)]
pub struct ChatLine {
    pub messages: Vec<Msg>,
    pub pair_id: String,
    pub service: String,
    pub source: String,
    pub id: String,
    pub fold: usize,
}

/// Training line of a group: the zero-shot prompt answered by the reference.
pub fn train_line(g: &Group, display: &str) -> ChatLine {
    let p = g.pairs[0];
    let mut messages = zero_shot(display, p);
    messages.push(Msg::new("assistant", normalize_reference(&p.reference)));
    ChatLine {
        messages,
        pair_id: p.pair_id.clone(),
        service: p.service.clone(),
        source: p.source.clone(),
        id: p.source_id.clone(),
        fold: g.fold,
    }
}

/// Test lines of a group: one per pair (they share the prompt), so every pair gets an output
/// to import back.
pub fn test_lines(g: &Group, display: &str) -> Vec<ChatLine> {
    g.pairs
        .iter()
        .map(|p| ChatLine {
            messages: zero_shot(display, p),
            pair_id: p.pair_id.clone(),
            service: p.service.clone(),
            source: p.source.clone(),
            id: p.source_id.clone(),
            fold: g.fold,
        })
        .collect()
}
