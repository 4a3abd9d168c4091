//! chrf: character n-gram F-score as sacrebleu computes it.

use doc2ci_rows::{MetricInfo, MetricKind, MetricValue};

use super::{Metric, Needs, Sides};

pub const METRIC: Metric = Metric {
    info: MetricInfo { name: "chrf", higher_is_better: true, kind: MetricKind::Float, in_study: true },
    doc: "chrF / 100 over lj (lowercased, whitespace included, eps smoothing).",
    needs: Needs::Words { otherwise: MetricValue::Float(0.0) },
    compute,
    corpus: false,
};

fn compute(s: &Sides) -> MetricValue {
    MetricValue::Float(crate::chrf::chrf(&s.reference.chrf, &s.output.chrf))
}
