//! The metric registry. A metric is one file here (its declaration and `compute`) plus one line in
//! the `registry!` list below; the `scores` table has one column per entry, in that order, and the
//! engine hands stats and report the list as data ([`crate::metric_infos`]).

use doc2ci_rows::{MetricInfo, MetricValue};

use crate::Prepared;

/// A similarity metric: what the tables, stats and report know of it, and how it is computed.
#[derive(Debug, Clone, Copy)]
pub struct Metric {
    /// Name (= `scores` column), direction, value kind, and whether the study tests it.
    pub info: MetricInfo,
    /// One line for people: what is compared, and how.
    pub doc: &'static str,
    /// What the metric reads, and its value where that is missing.
    pub needs: Needs,
    /// The value of one output against its reference; called only where [`Self::needs`] holds,
    /// and its variant is [`MetricInfo::kind`].
    pub compute: fn(&Sides) -> MetricValue,
    /// Its value depends on the study's other references, not only on the pair (crystal_bleu
    /// ignores the n-grams the service's references share): the same answer scores differently in
    /// a study of other pairs, so runs of different studies compare it with that caveat.
    pub corpus: bool,
}

/// What a metric needs of a pair before `compute` runs, and the value it takes otherwise.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Needs {
    /// The sentence embeddings of both cleaned texts. Only [`crate::score_all`] has them; a one-off
    /// [`crate::score_prepared`] leaves the metric out.
    Embeddings,
    /// Both texts' `lj` non-empty (SPEC §5: an empty side scores `otherwise` on the lexical metrics).
    Words { otherwise: MetricValue },
    /// Both texts' YAML documents (`load_all` of `clean`); a text that does not load scores
    /// `otherwise` (CloudEval records 0 where its code raises). `wildcards`: the reference is read
    /// with CloudEval's wildcard labels applied, as kv_wildcard compares it.
    Yaml { otherwise: MetricValue, wildcards: bool },
    /// Both texts' canonical forms under their service's rules (`doc2ci-sem`). A text prepared
    /// without a service ([`crate::Prepared::new`]) leaves the metric out; one that does not load
    /// scores `otherwise`.
    Canon { otherwise: MetricValue },
    /// Only the prepared texts, which every text has: one that does not load still has its
    /// stripped lines (`canon`) and a bare-root tree.
    Text,
}

/// The two sides of one scored pair (prepared with the same `CrystalContext`).
#[derive(Clone, Copy)]
pub struct Sides<'a> {
    pub reference: &'a Prepared,
    pub output: &'a Prepared,
    /// (reference, output) embeddings, when the caller has them.
    pub embeddings: Option<(&'a [f32], &'a [f32])>,
}

impl<'a> Sides<'a> {
    /// The embeddings of a metric that [`Needs::Embeddings`].
    pub fn embeddings(&self) -> (&'a [f32], &'a [f32]) {
        self.embeddings.expect("Needs::Embeddings metrics are computed only with embeddings")
    }

    /// The service and both canonical forms of a [`Needs::Canon`] metric.
    pub(crate) fn canon(&self) -> (&'static doc2ci_sem::Service, &'a doc2ci_sem::Canon, &'a doc2ci_sem::Canon) {
        let service = self.reference.service.expect("Needs::Canon metrics are computed with a service");
        let form = |p: &'a crate::Prepared| p.canon_form.as_ref().expect("Needs::Canon: both sides load");
        (service, form(self.reference), form(self.output))
    }

    /// The reference's documents as a [`Needs::Yaml`] metric compares them.
    pub(crate) fn reference_docs(&self, wildcards: bool) -> &'a crate::kv::Docs {
        match (&self.reference.labelled_docs, wildcards) {
            (Some(labelled), true) => labelled,
            _ => &self.reference.docs,
        }
    }
}

impl Metric {
    /// The metric's value for one pair; None when it needs embeddings `sides` does not have.
    pub fn score(&self, sides: &Sides) -> Option<MetricValue> {
        match self.needs {
            Needs::Embeddings if sides.embeddings.is_none() => return None,
            Needs::Words { otherwise } if sides.reference.lj.is_empty() || sides.output.lj.is_empty() => {
                return Some(otherwise)
            }
            Needs::Yaml { otherwise, wildcards }
                if sides.reference_docs(wildcards).is_none() || sides.output.docs.is_none() =>
            {
                return Some(otherwise)
            }
            Needs::Canon { .. } if sides.reference.service.is_none() || sides.output.service.is_none() => return None,
            Needs::Canon { otherwise } if sides.reference.canon_form.is_none() || sides.output.canon_form.is_none() => {
                return Some(otherwise)
            }
            _ => {}
        }
        let v = (self.compute)(sides);
        debug_assert_eq!(v.kind(), self.info.kind, "{} computed a value of another kind", self.info.name);
        Some(v)
    }
}

// Each metric's file, declared where rustfmt sees it; [`registry!`] lists them in column order
// (a file declared here and not listed there fails the test below).
pub(crate) mod bleu;
pub(crate) mod chrf;
pub(crate) mod cosine;
pub(crate) mod crystal_bleu;
pub(crate) mod euclidean;
pub(crate) mod exact;
pub(crate) mod kv_exact;
pub(crate) mod kv_wildcard;
pub(crate) mod levenshtein;
pub(crate) mod rouge_l;
pub(crate) mod sem_contains;
pub(crate) mod sem_exact;
pub(crate) mod sem_recall;
pub(crate) mod tree_edit;
pub(crate) mod tree_exact;

/// Lists each metric in [`METRICS`]: one line per metric, in column order.
macro_rules! registry {
    ($($metric:ident),* $(,)?) => {
        /// Every metric, in the order of the `scores` columns.
        pub const METRICS: &[Metric] = &[$($metric::METRIC),*];

        /// The file (module) of each metric, for the test that a metric's name is its file's.
        #[cfg(test)]
        const FILES: &[&str] = &[$(stringify!($metric)),*];
    };
}

registry! {
    cosine,
    euclidean,
    bleu,
    crystal_bleu,
    rouge_l,
    chrf,
    tree_edit,
    levenshtein,
    exact,
    kv_exact,
    kv_wildcard,
    tree_exact,
    sem_exact,
    sem_recall,
    sem_contains,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_metric_is_named_after_its_file_once_and_clashes_with_no_other_column() {
        let names: Vec<&str> = METRICS.iter().map(|m| m.info.name).collect();
        assert_eq!(names, FILES);
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/metrics");
        let (on_disk, listed) = doc2ci_testkit::registry_files(&dir, FILES);
        assert_eq!(on_disk, listed, "every file of src/metrics is a registered metric");
        let mut unique = names.clone();
        unique.sort_unstable();
        unique.dedup();
        assert_eq!(unique.len(), names.len(), "a metric is registered twice");
        for id in ["pair_id", "service", "model", "sample", "round", "truncated"] {
            assert!(!names.contains(&id), "metric `{id}` would collide with a column of every scores row");
        }
        for m in METRICS {
            assert!(!m.doc.is_empty() && !m.doc.contains('\n'), "{}: doc is one line", m.info.name);
            if let Needs::Words { otherwise } | Needs::Yaml { otherwise, .. } | Needs::Canon { otherwise } = m.needs {
                assert_eq!(otherwise.kind(), m.info.kind, "{}: value when not applicable", m.info.name);
            }
        }
    }
}
