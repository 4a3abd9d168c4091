//! euclidean: the embeddings' L2 distance, mapped to a similarity in (0, 1].

use doc2ci_rows::{MetricInfo, MetricKind, MetricValue};

use super::{Metric, Needs, Sides};

pub const METRIC: Metric = Metric {
    info: MetricInfo { name: "euclidean", higher_is_better: true, kind: MetricKind::Float, in_study: true },
    doc: "1 / (1 + L2 distance) of the embeddings of clean(reference) and clean(output).",
    needs: Needs::Embeddings,
    compute,
    corpus: false,
};

fn compute(s: &Sides) -> MetricValue {
    let (r, o) = s.embeddings();
    MetricValue::Float(euclidean(r, o))
}

/// 1 / (1 + L2 distance) of two embeddings.
pub fn euclidean(a: &[f32], b: &[f32]) -> f64 {
    assert_eq!(a.len(), b.len(), "embeddings of different dimensions");
    let ss: f64 = a.iter().zip(b).map(|(&x, &y)| (x as f64 - y as f64).powi(2)).sum();
    1.0 / (1.0 + ss.sqrt())
}
