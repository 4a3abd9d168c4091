//! A comparison's page (issue 46): the tests of B against A, then the flipped view: every sample
//! whose binary outcome differs and each graded metric's largest swings, each opened to A's and
//! B's answers side by side with the reference, both diffs and both validators' messages.
//!
//! Pure, as the rest of the report: the rows of `doc2ci_stats::compare` and both sides' answers
//! in, two files out (`compare.html`, and `compare-data.js` that it loads: a script tag, so the
//! page opens from disk).

use std::collections::{BTreeMap, HashMap};

use doc2ci_rows::{Generation, Lint, MetricInfo, Pair, Score, Validation};
use doc2ci_stats::compare::{CompareRow, Key};
use serde_json::{json, Value};

use crate::browser::{answer, cap, page};

/// The page's file name, beside the comparison's rows.
pub const PAGE: &str = "compare.html";
const DATA: &str = "compare-data.js";

/// Samples shown at most (flips first, then swings): the page stays light on a large study;
/// the table holds every one.
const MAX_SAMPLES: usize = 2000;

/// One side's answers, keyed as the comparison joined them.
pub struct SideView<'a> {
    pub pairs: &'a HashMap<(String, String), Pair>,
    pub generations: &'a HashMap<Key, Generation>,
    pub validations: &'a HashMap<Key, Validation>,
    pub lints: &'a HashMap<Key, Vec<Lint>>,
    pub scores: &'a HashMap<Key, Score>,
}

impl SideView<'_> {
    fn answer(&self, k: &Key, metrics: &[&MetricInfo]) -> Value {
        let Some(g) = self.generations.get(k) else { return Value::Null };
        let ls: Vec<&Lint> = self.lints.get(k).map(|v| v.iter().collect()).unwrap_or_default();
        answer(g, self.validations.get(k), self.scores.get(k), &ls, metrics, None)
    }
}

pub fn files(
    title: &str,
    rows: &[CompareRow],
    a: &SideView,
    b: &SideView,
    metrics: &[MetricInfo],
) -> Vec<(String, String)> {
    let metrics: Vec<&MetricInfo> = metrics.iter().collect();
    // Each sample once, with every flip and swing it has; samples with a flip first.
    let mut by_key: BTreeMap<Key, Vec<&CompareRow>> = BTreeMap::new();
    for r in rows.iter().filter(|r| r.kind == "flip" || r.kind == "swing") {
        let k: Key = (r.service.clone(), r.pair_id.clone().unwrap_or_default(), r.sample.unwrap_or(0));
        by_key.entry(k).or_default().push(r);
    }
    let mut order: Vec<(&Key, &Vec<&CompareRow>)> = by_key.iter().collect();
    order.sort_by_key(|(_, rs)| !rs.iter().any(|r| r.kind == "flip"));
    let shown: Vec<Value> = order
        .iter()
        .take(MAX_SAMPLES)
        .map(|(k, rs)| {
            let pair = a.pairs.get(&(k.0.clone(), k.1.clone())).or_else(|| b.pairs.get(&(k.0.clone(), k.1.clone())));
            json!({
                "service": k.0, "pair_id": k.1, "sample": k.2,
                "title": pair.map(|p| p.title.as_str()), "url": pair.map(|p| p.url.as_str()),
                "description": pair.map(|p| cap(&p.description)), "reference": pair.map(|p| cap(&p.reference)),
                "changes": rs.iter().map(|r| json!({
                    "kind": r.kind, "metric": r.metric, "a": r.value_a, "b": r.value_b, "verdict": r.verdict,
                })).collect::<Vec<_>>(),
                "a": a.answer(k, &metrics), "b": b.answer(k, &metrics),
            })
        })
        .collect();
    let count = |kind: &str| rows.iter().filter(|r| r.kind == kind).count();
    let data = json!({
        "title": title,
        "a": rows.first().map(|r| r.a.as_str()), "b": rows.first().map(|r| r.b.as_str()),
        "tests": rows.iter().filter(|r| r.kind == "test").collect::<Vec<_>>(),
        "unmatched": {"only_a": count("only_a"), "only_b": count("only_b"), "reference_differs": count("reference_differs")},
        "samples": shown,
        "samples_total": by_key.len(),
    });
    vec![
        (PAGE.to_string(), page(include_str!("compare.html"), title)),
        (DATA.to_string(), format!("doc2ciCompare({data});\n")),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(kind: &str, pair: &str, metric: &str) -> CompareRow {
        let mut r: CompareRow = serde_json::from_value(json!({
            "a": "A", "b": "B", "kind": kind, "service": "s", "metric": metric, "pair_id": pair, "sample": 0,
            "n": 1, "value_a": 1.0, "value_b": 0.0, "diff": -1.0, "ci_low": null, "ci_high": null,
            "statistic": null, "p": null, "p_holm": null, "cliffs_delta": null, "a_only": null, "b_only": null,
            "method": "", "verdict": "worse",
        }))
        .unwrap();
        if kind == "test" {
            r.pair_id = None;
        }
        r
    }

    #[test]
    fn each_changed_sample_is_shown_once_with_both_answers_flips_first() {
        let rows = vec![
            row("test", "", "schema_ok"),
            row("swing", "p1", "cosine"),
            row("flip", "p2", "schema_ok"),
            row("flip", "p1", "exact"),
        ];
        let g = |pair: &str, out: &str| Generation {
            pair_id: pair.into(),
            service: "s".into(),
            model: "m".into(),
            output: Some(out.into()),
            ..Generation::default()
        };
        let k = |p: &str| ("s".to_string(), p.to_string(), 0u32);
        let (ga, gb): (HashMap<Key, Generation>, HashMap<Key, Generation>) = (
            [(k("p1"), g("p1", "a1")), (k("p2"), g("p2", "a2"))].into(),
            [(k("p1"), g("p1", "b1")), (k("p2"), g("p2", "<b2>"))].into(),
        );
        let (pairs, vals, lints, scores) = (HashMap::new(), HashMap::new(), HashMap::new(), HashMap::new());
        let side =
            |gens| SideView { pairs: &pairs, generations: gens, validations: &vals, lints: &lints, scores: &scores };
        let files = files("B <vs> A", &rows, &side(&ga), &side(&gb), &[]);
        let html = &files[0].1;
        assert!(html.contains("B &lt;vs&gt; A") && html.contains("function outputView") && !html.contains("{{"));
        let data = files[1].1.strip_prefix("doc2ciCompare(").unwrap().strip_suffix(");\n").unwrap();
        let v: Value = serde_json::from_str(data).unwrap();
        let s = v["samples"].as_array().unwrap();
        assert_eq!(s.len(), 2, "p1 once, with its flip and its swing");
        assert_eq!((s[0]["pair_id"].as_str(), s[1]["pair_id"].as_str()), (Some("p1"), Some("p2")));
        assert_eq!(s[0]["changes"].as_array().unwrap().len(), 2);
        assert_eq!((s[1]["a"]["output"].as_str(), s[1]["b"]["output"].as_str()), (Some("a2"), Some("<b2>")));
        assert_eq!(v["tests"].as_array().unwrap().len(), 1);
    }
}
