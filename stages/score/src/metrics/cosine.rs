//! cosine: how close the two texts' meanings are, by their sentence embeddings.

use doc2ci_rows::{MetricInfo, MetricKind, MetricValue};

use super::{Metric, Needs, Sides};

pub const METRIC: Metric = Metric {
    info: MetricInfo { name: "cosine", higher_is_better: true, kind: MetricKind::Float, in_study: true },
    doc: "Cosine similarity of the embeddings of clean(reference) and clean(output).",
    needs: Needs::Embeddings,
    compute,
    corpus: false,
};

fn compute(s: &Sides) -> MetricValue {
    let (r, o) = s.embeddings();
    MetricValue::Float(cosine(r, o))
}

/// Cosine similarity of two embeddings, accumulated in f64; 0 when either vector is zero.
pub fn cosine(a: &[f32], b: &[f32]) -> f64 {
    assert_eq!(a.len(), b.len(), "embeddings of different dimensions");
    let (mut dot, mut na, mut nb) = (0.0f64, 0.0f64, 0.0f64);
    for (&x, &y) in a.iter().zip(b) {
        let (x, y) = (x as f64, y as f64);
        dot += x * y;
        na += x * x;
        nb += y * y;
    }
    if na == 0.0 || nb == 0.0 {
        return 0.0;
    }
    dot / (na.sqrt() * nb.sqrt())
}
