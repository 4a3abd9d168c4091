//! kv_exact: CloudEval-YAML's `kv_match`, every document equal as data. Recorded in `scores`, not
//! among the study's tested metrics.

use doc2ci_rows::{MetricInfo, MetricKind, MetricValue};

use super::{Metric, Needs, Sides};

pub const METRIC: Metric = Metric {
    info: MetricInfo { name: "kv_exact", higher_is_better: true, kind: MetricKind::Float, in_study: false },
    doc: "1 when every YAML document of the output equals the reference's as data (CloudEval kv_match), else 0.",
    needs: Needs::Yaml { otherwise: MetricValue::Float(0.0), wildcards: false },
    compute,
    corpus: false,
};

fn compute(s: &Sides) -> MetricValue {
    MetricValue::Float(crate::kv::kv_exact(s.reference_docs(false), &s.output.docs))
}
