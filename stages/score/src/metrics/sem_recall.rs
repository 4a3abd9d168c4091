//! sem_recall: the share of the reference's canonical leaves (path, value) that the output holds
//! at the best anchoring of the reference inside it. A fragment reference (a step list, a job, a
//! trigger block) is matched where it would sit in a complete file, by the same shapes the lint
//! stage completes fragments by; jobs are matched whatever their names, steps in order with gaps.

use doc2ci_rows::{MetricInfo, MetricKind, MetricValue};

use super::{Metric, Needs, Sides};

pub const METRIC: Metric = Metric {
    info: MetricInfo { name: "sem_recall", higher_is_better: true, kind: MetricKind::Float, in_study: true },
    doc: "Share of the reference's canonical leaves the output holds where they would sit in a complete file.",
    needs: Needs::Canon { otherwise: MetricValue::Float(0.0) },
    compute,
    corpus: false,
};

fn compute(s: &Sides) -> MetricValue {
    let (service, r, o) = s.canon();
    MetricValue::Float(doc2ci_sem::containment(service, r, o).recall())
}
