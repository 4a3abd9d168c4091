//! Dedupe (SPEC §1): documentation reaches one section through several URLs, so the crawler
//! collects exact copies; scoring each copy would weight those sections several times.
//!
//! Owns: which copy of a pair is kept, and the leak screen (`Pair.leak`). Never reads files or
//! asks a model; the generate stage decides what a flagged pair means.

use std::collections::HashMap;

use doc2ci_rows::{Pair, RawPair};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Same service, title, description and reference after the SPEC's whitespace normalisation.
    #[default]
    Normalized,
    /// Byte-identical title, description and reference only.
    Exact,
    /// Keep every copy (each becomes its own pair, with a distinct id).
    None,
}

/// `raw` must be in source order; the first occurrence stands for its copies.
pub fn dedupe(raw: &[RawPair], mode: Mode) -> Vec<Pair> {
    let mut out: Vec<Pair> = Vec::new();
    let mut index: HashMap<String, usize> = HashMap::new();
    let mut occurrences: HashMap<String, u32> = HashMap::new();
    for r in raw {
        let key = match mode {
            Mode::Normalized => r.pair_id.clone(),
            Mode::Exact => exact_key(r),
            Mode::None => format!("{}#{}", r.source, r.position),
        };
        if let Some(&i) = index.get(&key) {
            let p = &mut out[i];
            let d = doc2ci_rows::earliest(&p.dated(), &r.dated());
            p.set_dated(d);
            p.n_copies += 1;
            p.urls.push(r.url.clone());
            p.source_ids.push(r.source_id.clone());
            continue;
        }
        // Exact/none modes may keep two pairs that normalise alike: their ids must still differ.
        let n = occurrences.entry(r.pair_id.clone()).or_insert(0);
        *n += 1;
        let pair_id = if *n == 1 { r.pair_id.clone() } else { format!("{}-{}", r.pair_id, n) };
        index.insert(key, out.len());
        out.push(Pair {
            pair_id,
            service: r.service.clone(),
            url: r.url.clone(),
            title: r.title.clone(),
            description: r.description.clone(),
            reference: r.reference.clone(),
            n_copies: 1,
            urls: vec![r.url.clone()],
            source: r.source.clone(),
            source_id: r.source_id.clone(),
            source_ids: vec![r.source_id.clone()],
            position: r.position,
            leak: leak(&r.description, &r.reference).map(str::to_string),
            published: r.published.clone(),
            published_source: r.published_source.clone(),
            not_before: r.not_before.clone(),
        });
    }
    out
}

/// Lines shorter than this (`jobs:`, `- run: make`) are common words of prose, not a give-away.
const SUBSTANTIVE_LINE: usize = 12;
const LEAK_LINES: usize = 400;

fn prefix(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// Does the description contain its own reference? `reference`: the whole reference (whitespace
/// collapsed) appears in it; `lines`: more than half of the reference's substantive lines (at least
/// two) appear in it. Either way a model asked for the configuration would be handed the answer,
/// which inflates every similarity score (issue 11: about 7% of pairs crawled from real documentation
/// before the extractor kept code out of prose).
pub fn leak(description: &str, reference: &str) -> Option<&'static str> {
    // Bounded work whatever the texts: the screen reads at most their first MiB, and the line test
    // at most the first LEAK_LINES substantive lines (real references have a few dozen).
    let (description, reference) = (prefix(description, 1 << 20), prefix(reference, 1 << 20));
    let d = doc2ci_rows::collapse_ws(description);
    let r = doc2ci_rows::collapse_ws(reference);
    if r.is_empty() {
        return None;
    }
    if d.contains(&r) {
        return Some("reference");
    }
    let lines: Vec<String> = reference
        .lines()
        .map(|l| doc2ci_rows::collapse_ws(l.trim().trim_start_matches("- ")))
        .filter(|l| l.chars().count() >= SUBSTANTIVE_LINE)
        .take(LEAK_LINES)
        .collect();
    let found = lines.iter().filter(|l| d.contains(l.as_str())).count();
    (lines.len() >= 2 && found * 2 > lines.len()).then_some("lines")
}

fn exact_key(r: &RawPair) -> String {
    [r.service.as_str(), &r.title, &r.description, &r.reference].join("\u{0}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(id: &str, title: &str, desc: &str, reference: &str, url: &str, pos: u64) -> RawPair {
        RawPair {
            pair_id: doc2ci_rows::pair_id("gha", title, desc, reference),
            service: "gha".into(),
            url: url.into(),
            title: title.into(),
            description: desc.into(),
            reference: reference.into(),
            source: "docs".into(),
            source_id: id.into(),
            position: pos,
            published: None,
            published_source: None,
            not_before: None,
        }
    }

    #[test]
    fn keeps_first_copy_and_records_the_others() {
        let rows = vec![
            raw("1", "T", "D  x", "on: push", "a", 0),
            raw("2", "T", "D x", "on: push  \n", "b", 1),
            raw("3", "T", "D x", "on: pull_request", "c", 2),
            raw("4", " T", "D\nx", "\non: push", "d", 3),
        ];
        let p = dedupe(&rows, Mode::Normalized);
        assert_eq!(p.len(), 2, "same title+description, different reference: kept apart");
        assert_eq!(p[0].source_id, "1");
        assert_eq!(p[0].n_copies, 3);
        assert_eq!(p[0].urls, vec!["a", "b", "d"]);
        assert_eq!(p[0].source_ids, vec!["1", "2", "4"]);
        assert_eq!(p[1].n_copies, 1);
    }

    #[test]
    fn descriptions_that_contain_their_reference_are_flagged() {
        assert_eq!(
            leak("Add this: language: ruby rvm: 3.2 to the file.", "language: ruby\nrvm: 3.2\n"),
            Some("reference")
        );
        let reference = "jobs:\n  build:\n    runs-on: ubuntu-latest\n    steps:\n      - uses: actions/checkout@v4\n      - run: npm test --coverage";
        let most = "Use runs-on: ubuntu-latest and uses: actions/checkout@v4 then run: npm test --coverage.";
        assert_eq!(leak(most, reference), Some("lines"));
        // One substantive line of three is prose quoting a key, not the answer.
        assert_eq!(leak("Set runs-on: ubuntu-latest for Linux.", reference), None);
        // Short lines alone never count: `jobs:` is a word of the prose.
        assert_eq!(leak("The jobs: key holds build:", "jobs:\n  build: {}"), None);
        assert_eq!(leak("Anything.", ""), None);
        let rows =
            vec![raw("1", "T", "Write on: push here.", "on: push", "a", 0), raw("2", "T", "D", "on: push", "b", 1)];
        let p = dedupe(&rows, Mode::Normalized);
        assert_eq!(p[0].leak.as_deref(), Some("reference"));
        assert_eq!(p[1].leak, None);
    }

    #[test]
    fn exact_and_none_modes_keep_more_with_distinct_ids() {
        let rows = vec![
            raw("1", "T", "D", "a: 1", "a", 0),
            raw("2", "T", "D", "a: 1 ", "b", 1),
            raw("3", "T", "D", "a: 1", "c", 2),
        ];
        let e = dedupe(&rows, Mode::Exact);
        assert_eq!(e.len(), 2);
        assert_ne!(e[0].pair_id, e[1].pair_id);
        assert_eq!(e[0].n_copies, 2);
        let n = dedupe(&rows, Mode::None);
        assert_eq!(n.len(), 3);
        let mut ids: Vec<_> = n.iter().map(|p| p.pair_id.clone()).collect();
        ids.dedup();
        assert_eq!(ids.len(), 3);
    }
}
