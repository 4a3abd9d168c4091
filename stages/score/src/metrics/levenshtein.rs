//! levenshtein: character edits between the canonical forms, as rapidfuzz computes them.

use doc2ci_rows::{MetricInfo, MetricKind, MetricValue};

use super::{Metric, Needs, Sides};

pub const METRIC: Metric = Metric {
    info: MetricInfo { name: "levenshtein", higher_is_better: true, kind: MetricKind::Float, in_study: true },
    doc: "1 − Levenshtein(canon(output), canon(reference)) / max length, in code points.",
    needs: Needs::Text,
    compute,
    corpus: false,
};

fn compute(s: &Sides) -> MetricValue {
    MetricValue::Float(crate::levenshtein::similarity(&s.output.canon_chars, &s.reference.canon_chars))
}
