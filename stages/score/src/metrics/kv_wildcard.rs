//! kv_wildcard: CloudEval-YAML's `kv_wildcard`, leaf paths shared, where a reference line marked
//! `# ... *` matches any value. Recorded in `scores`, not among the study's tested metrics.

use doc2ci_rows::{MetricInfo, MetricKind, MetricValue};

use super::{Metric, Needs, Sides};

pub const METRIC: Metric = Metric {
    info: MetricInfo { name: "kv_wildcard", higher_is_better: true, kind: MetricKind::Float, in_study: false },
    doc: "Leaf-path intersection over union of the YAML documents, reference wildcards applied (CloudEval).",
    needs: Needs::Yaml { otherwise: MetricValue::Float(0.0), wildcards: true },
    compute,
    corpus: false,
};

fn compute(s: &Sides) -> MetricValue {
    MetricValue::Float(crate::kv::kv_wildcard(s.reference_docs(true), &s.output.docs))
}
