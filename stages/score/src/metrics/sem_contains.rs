//! sem_contains: sem_recall = 1, the answer holds the reference's whole configuration, perhaps
//! inside a larger, complete file (the study's "fragment reference against a complete workflow").

use doc2ci_rows::{MetricInfo, MetricKind, MetricValue};

use super::{Metric, Needs, Sides};

pub const METRIC: Metric = Metric {
    info: MetricInfo { name: "sem_contains", higher_is_better: true, kind: MetricKind::Bool, in_study: true },
    doc: "The output holds every canonical leaf of the reference (sem_recall = 1), perhaps in a larger file.",
    needs: Needs::Canon { otherwise: MetricValue::Bool(false) },
    compute,
    corpus: false,
};

fn compute(s: &Sides) -> MetricValue {
    let (service, r, o) = s.canon();
    let c = doc2ci_sem::containment(service, r, o);
    MetricValue::Bool(c.total > 0 && c.matched == c.total)
}
