//! crystal_bleu: BLEU that ignores the n-grams every reference of the service shares (boilerplate
//! such as `runs-on: ubuntu-latest`), as the crystalbleu package computes it.

use doc2ci_rows::{MetricInfo, MetricKind, MetricValue};

use super::{Metric, Needs, Sides};

pub const METRIC: Metric = Metric {
    info: MetricInfo { name: "crystal_bleu", higher_is_better: true, kind: MetricKind::Float, in_study: true },
    doc: "CrystalBLEU of lj(output) against lj(reference), ignoring the CrystalContext's frequent n-grams.",
    needs: Needs::Words { otherwise: MetricValue::Float(0.0) },
    compute,
    corpus: true,
};

fn compute(s: &Sides) -> MetricValue {
    MetricValue::Float(crate::crystal::crystal_bleu(&s.reference.words, &s.output.words))
}
