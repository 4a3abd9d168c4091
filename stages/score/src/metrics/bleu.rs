//! bleu: sentence BLEU as sacrebleu computes it (the peer), over `lj`.

use doc2ci_rows::{MetricInfo, MetricKind, MetricValue};

use super::{Metric, Needs, Sides};

pub const METRIC: Metric = Metric {
    info: MetricInfo { name: "bleu", higher_is_better: true, kind: MetricKind::Float, in_study: true },
    doc: "Sentence BLEU / 100 of lj(output) against lj(reference) (sacrebleu, 13a, exp smoothing).",
    needs: Needs::Words { otherwise: MetricValue::Float(0.0) },
    compute,
    corpus: false,
};

fn compute(s: &Sides) -> MetricValue {
    MetricValue::Float(crate::bleu::bleu(&s.reference.bleu, &s.output.bleu))
}
