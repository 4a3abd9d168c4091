//! tree_edit: how many node edits turn one YAML tree into the other (zss's Zhang–Shasha distance),
//! normalised by the larger tree.

use doc2ci_rows::{MetricInfo, MetricKind, MetricValue};

use super::{Metric, Needs, Sides};

pub const METRIC: Metric = Metric {
    info: MetricInfo { name: "tree_edit", higher_is_better: true, kind: MetricKind::Float, in_study: true },
    doc: "1 − d / (2·max(n1, n2)) of the YAML trees of clean(x), d the Zhang–Shasha distance.",
    // A text that does not load as one document is a bare root, which still has a distance.
    needs: Needs::Text,
    compute,
    corpus: false,
};

fn compute(s: &Sides) -> MetricValue {
    let (r, o) = (&s.reference.tree, &s.output.tree);
    let d = crate::zss::distance(r, o);
    MetricValue::Float((1.0 - d as f64 / (2 * r.len().max(o.len())) as f64).clamp(0.0, 1.0))
}
