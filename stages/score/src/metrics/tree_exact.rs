//! tree_exact: the output's YAML documents equal the reference's as trees: layout, quoting,
//! comments and the order of mapping keys do not matter, every scalar's resolved value and type
//! does. It reads the study's "exact" more loosely than canonical Levenshtein (`exact` compares
//! stripped lines), and unlike kv_exact it keeps no CloudEval failure rule (a non-mapping
//! document or a non-string key compares like any other tree).

use doc2ci_rows::{MetricInfo, MetricKind, MetricValue};
use doc2ci_yaml::Value;

use super::{Metric, Needs, Sides};

pub const METRIC: Metric = Metric {
    info: MetricInfo { name: "tree_exact", higher_is_better: true, kind: MetricKind::Bool, in_study: true },
    doc: "YAML documents of output and reference equal as trees (mapping key order ignored).",
    needs: Needs::Yaml { otherwise: MetricValue::Bool(false), wildcards: false },
    compute,
    corpus: false,
};

fn compute(s: &Sides) -> MetricValue {
    let (Some(r), Some(o)) = (s.reference_docs(false), &s.output.docs) else { return MetricValue::Bool(false) };
    MetricValue::Bool(!r.is_empty() && r.len() == o.len() && r.iter().zip(o).all(|(a, b)| same(a, b)))
}

/// Structural equality with mappings as unordered (key, value) sets; keys are unique in a loaded
/// mapping, so equal sizes and every entry of `a` found in `b` means equal.
fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Map(x), Value::Map(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.iter().any(|(k2, v2)| same(k, k2) && same(v, v2)))
        }
        (Value::Seq(x), Value::Seq(y)) => x.len() == y.len() && x.iter().zip(y).all(|(a, b)| same(a, b)),
        _ => a == b,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{CrystalContext, Prepared};

    fn tree_exact(reference: &str, output: &str) -> bool {
        let ctx = CrystalContext::from_references([reference]);
        let (r, o) = (Prepared::new(reference, &ctx), Prepared::new(output, &ctx));
        METRIC.score(&Sides { reference: &r, output: &o, embeddings: None }) == Some(MetricValue::Bool(true))
    }

    #[test]
    fn key_order_layout_and_comments_do_not_matter_values_and_types_do() {
        let r = "on: push\njobs:\n  b:\n    runs-on: ubuntu-latest\n  a: {steps: [1, 2]}\n";
        assert!(tree_exact(
            r,
            "# hi\njobs:\n  a:\n    steps:\n      - 1\n      - 2\n  b: {runs-on: 'ubuntu-latest'}\non: push\n"
        ));
        assert!(!tree_exact(r, "on: push\njobs:\n  b:\n    runs-on: ubuntu-latest\n  a: {steps: [2, 1]}\n"));
        assert!(!tree_exact("a: 1\n", "a: '1'\n"));
        assert!(!tree_exact("a: 1\n", "a: 1\nb: 2\n"));
        assert!(!tree_exact("a: [1\n", "a: [1\n"));
    }
}
