//! rouge_l: longest common subsequence of whitespace tokens, as pytorch-ignite computes it.

use doc2ci_rows::{MetricInfo, MetricKind, MetricValue};

use super::{Metric, Needs, Sides};

pub const METRIC: Metric = Metric {
    info: MetricInfo { name: "rouge_l", higher_is_better: true, kind: MetricKind::Float, in_study: true },
    doc: "ROUGE-L F1 over the whitespace tokens of lj(reference) and lj(output).",
    needs: Needs::Words { otherwise: MetricValue::Float(0.0) },
    compute,
    corpus: false,
};

fn compute(s: &Sides) -> MetricValue {
    MetricValue::Float(crate::rouge::rouge_l(&s.reference.words.vocab, &s.output.words.vocab))
}
