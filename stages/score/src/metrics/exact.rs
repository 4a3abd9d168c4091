//! exact: the output is the reference up to layout, quoting, key order and comments.

use doc2ci_rows::{MetricInfo, MetricKind, MetricValue};

use super::{Metric, Needs, Sides};

pub const METRIC: Metric = Metric {
    info: MetricInfo { name: "exact", higher_is_better: true, kind: MetricKind::Bool, in_study: true },
    doc: "canon(output) == canon(reference).",
    needs: Needs::Text,
    compute,
    corpus: false,
};

fn compute(s: &Sides) -> MetricValue {
    MetricValue::Bool(s.reference.canon == s.output.canon)
}
