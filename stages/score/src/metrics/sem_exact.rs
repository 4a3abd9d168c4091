//! sem_exact: output and reference equal in canonical form (`doc2ci-sem`): besides layout, key
//! order and quoting (tree_exact), every spelling the service's documentation makes equivalent
//! (`on: push` ≡ `on: [push]`, `- checkout` ≡ `- checkout: {}`, `script: x` ≡ `script: [x]`, a
//! documented default written out) is the same; step and command order still matter.

use doc2ci_rows::{MetricInfo, MetricKind, MetricValue};

use super::{Metric, Needs, Sides};

pub const METRIC: Metric = Metric {
    info: MetricInfo { name: "sem_exact", higher_is_better: true, kind: MetricKind::Bool, in_study: true },
    doc: "Output and reference equal in the service's canonical form (documented equivalent spellings collapsed).",
    needs: Needs::Canon { otherwise: MetricValue::Bool(false) },
    compute,
    corpus: false,
};

fn compute(s: &Sides) -> MetricValue {
    let (_, r, o) = s.canon();
    MetricValue::Bool(doc2ci_sem::sem_exact(r, o))
}
