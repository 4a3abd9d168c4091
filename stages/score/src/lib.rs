//! doc2ci's similarity metrics (SPEC §5), each matching the Python peer the SPEC names to 1e-9, and
//! the scoring of a generations partition against its pairs ([`score_all`]).
//!
//! Owns: the metric registry ([`METRICS`], one file per metric under `metrics/`) and so the
//! `scores` columns; every other crate learns the metrics from [`metric_infos`]. Pure metrics over
//! typed rows: never reads or writes files, never caches, never embeds (the engine's callback
//! does, with its cache); everything here is `Send + Sync` and cheap to call from rayon.
//!
//! The engine scores the same reference against every model's output, so the per-text work
//! (cleaning, tokenising, n-gram counting, YAML loading, tree building) lives in [`Prepared`]:
//! prepare each distinct text once, then [`score_prepared`] any pair of them. [`score_pair`] does
//! both for one-off use.

mod batch;
mod bleu;
mod chrf;
mod crystal;
mod kv;
mod levenshtein;
pub mod metrics;
mod ngrams;
mod rouge;
mod text;
#[cfg(test)]
mod xorshift;
mod zss;

pub use batch::{score_all, Embedded, ScoreError};
pub use crystal::CrystalContext;
pub use doc2ci_rows::{MetricInfo, MetricKind, MetricValue};
pub use metrics::cosine::cosine;
pub use metrics::euclidean::euclidean;
pub use metrics::{Metric, Needs, Sides, METRICS};
pub use text::{clean, lj, py_split};

use doc2ci_yaml::{Limits, Value};

/// What stats and report know of each metric of [`METRICS`], in the same order: what the engine
/// passes them (`study::Params::metrics`, `report::Input::metrics`).
pub fn metric_infos() -> &'static [MetricInfo] {
    static INFOS: std::sync::OnceLock<Vec<MetricInfo>> = std::sync::OnceLock::new();
    INFOS.get_or_init(|| METRICS.iter().map(|m| m.info).collect())
}

/// The named values of one output's metrics, in registry order.
#[derive(Debug, Clone, PartialEq)]
pub struct Scores(pub Vec<(&'static str, MetricValue)>);

impl Scores {
    pub fn get(&self, name: &str) -> Option<MetricValue> {
        self.0.iter().find(|(n, _)| *n == name).map(|(_, v)| *v)
    }

    /// The value of `name` as a number (a bool as 0 or 1). Panics when it was not scored.
    pub fn value(&self, name: &str) -> f64 {
        self.get(name).unwrap_or_else(|| panic!("metric `{name}` was not scored")).as_f64()
    }
}

/// Texts longer than this are scored on their first `MAX_SCORED_BYTES` (cut at a character
/// boundary) and flagged: the metrics' memory grows with the text (chrF n-gram maps, Levenshtein
/// bit vectors) and the tree edit distance with the product of both trees' sizes, so an imported
/// 100 MB output must not take the machine. The largest real text of the llm4ci data is 18 KB.
pub const MAX_SCORED_BYTES: usize = 64 << 10;

/// SPEC §5 `clean` of a text as it is scored (cut to [`MAX_SCORED_BYTES`] first): what
/// [`Prepared::clean`] gives, without preparing the rest.
pub fn cleaned(text: &str) -> String {
    text::clean(capped(text).0)
}

/// `text` cut to at most `MAX_SCORED_BYTES` at a character boundary, and whether it was cut.
fn capped(text: &str) -> (&str, bool) {
    if text.len() <= MAX_SCORED_BYTES {
        return (text, false);
    }
    let mut end = MAX_SCORED_BYTES;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    (&text[..end], true)
}

/// One text with everything the metrics need from it, whichever side of a pair it is on.
#[derive(Debug, Clone)]
pub struct Prepared {
    /// The text was longer than [`MAX_SCORED_BYTES`] and is scored on its beginning only.
    pub truncated: bool,
    clean: String,
    lj: String,
    canon: String,
    canon_chars: Vec<char>,
    bleu: bleu::BleuSide,
    chrf: chrf::ChrfSide,
    words: crystal::WordSide,
    tree: zss::Tree,
    docs: kv::Docs,
    /// Documents of the text with CloudEval's wildcard labels applied, when any line carries one.
    labelled_docs: Option<kv::Docs>,
    /// The service whose rules read the text ([`Prepared::for_service`]); None for a one-off
    /// [`Prepared::new`], which leaves the semantic metrics out.
    service: Option<&'static doc2ci_sem::Service>,
    /// The documents' canonical form under that service's rules, when it has one and they load.
    canon_form: Option<doc2ci_sem::Canon>,
}

impl Prepared {
    /// Prepares `text` (as stored: raw reference or model output) with the service's context.
    pub fn new(text: &str, ctx: &CrystalContext) -> Prepared {
        let (text, truncated) = capped(text);
        let clean = cleaned(text);
        let lj = text::lj_of_clean(&clean);
        let limits = Limits::default();
        let docs = documents(&clean, &limits);
        let single = single_document(&docs);
        let canon = canon_of(&clean, single);
        let tree = tree_of(single);
        let labelled_docs = kv::label_wildcards(&clean).map(|labelled| match labelled {
            Ok(t) => documents(&t, &limits),
            Err(()) => None,
        });
        Prepared {
            truncated,
            canon_chars: canon.chars().collect(),
            canon,
            bleu: bleu::BleuSide::new(&lj),
            chrf: chrf::ChrfSide::new(&lj),
            words: crystal::WordSide::new(&lj, ctx),
            tree,
            docs,
            labelled_docs,
            service: None,
            canon_form: None,
            clean,
            lj,
        }
    }

    /// [`Prepared::new`] read with the rules of `service` (a partition name) too, as the semantic
    /// metrics need; a service doc2ci-sem does not know leaves them out.
    pub fn for_service(text: &str, ctx: &CrystalContext, service: &str) -> Prepared {
        let mut p = Prepared::new(text, ctx);
        p.service = doc2ci_sem::service(service);
        if let (Some(svc), Some(docs)) = (p.service, &p.docs) {
            p.canon_form = Some(doc2ci_sem::canonical(svc, docs));
        }
        p
    }

    /// SPEC §5 `clean` of the text.
    pub fn clean(&self) -> &str {
        &self.clean
    }

    /// SPEC §5 `lj` of the text.
    pub fn lj(&self) -> &str {
        &self.lj
    }

    /// SPEC §5 `canon` of the text.
    pub fn canon(&self) -> &str {
        &self.canon
    }

    /// Node count of the text's YAML tree (1 when it does not load).
    pub fn tree_nodes(&self) -> usize {
        self.tree.len()
    }
}

/// The YAML documents of a cleaned text as CloudEval's `load_all` would give them (none for an
/// empty or comments-only text), or None when the text does not load.
fn documents(clean: &str, limits: &Limits) -> kv::Docs {
    doc2ci_yaml::load_all(clean, limits).ok()
}

/// What `load` gives for the text, from its documents: `load` fails exactly where `load_all`
/// fails or finds more than one document, and otherwise returns the only document (null for
/// none, which `canon` and the tree treat as not loading anyway).
fn single_document(docs: &kv::Docs) -> Option<&Value> {
    match docs.as_deref() {
        Some([one]) => Some(one),
        _ => None,
    }
}

/// SPEC §5 tree: `root`; a mapping adds a child per key over its value, a sequence `item_i`
/// children, a non-null scalar one leaf labelled with its text as written.
fn tree_of(value: Option<&Value>) -> zss::Tree {
    let mut arena = zss::Arena::default();
    let root = arena.add("root");
    if let Some(v) = value {
        attach(&mut arena, root, v);
    }
    arena.into_tree(root)
}

fn attach(arena: &mut zss::Arena, parent: u32, v: &Value) {
    match v {
        Value::Map(m) => {
            for (k, val) in m.iter() {
                let node = arena.add(&label(k));
                arena.attach(parent, node);
                attach(arena, node, val);
            }
        }
        Value::Seq(items) => {
            for (i, item) in items.iter().enumerate() {
                let node = arena.add(&format!("item_{i}"));
                arena.attach(parent, node);
                attach(arena, node, item);
            }
        }
        Value::Null { .. } => {}
        scalar => {
            let node = arena.add(&label(scalar));
            arena.attach(parent, node);
        }
    }
}

fn label(v: &Value) -> String {
    match v {
        Value::Bool { value, .. } => if *value { "true" } else { "false" }.to_string(),
        // A sequence used as a key is a Python tuple; its label is the tuple's str().
        Value::Seq(_) | Value::Map(_) => doc2ci_yaml::py_str_key(v),
        other => other.scalar_text().unwrap_or_default().to_string(),
    }
}

/// The reference's canonical leaves (`path = value`) that `output` misses at the best anchoring,
/// as sem_recall counts them: what the sample browser shows beside an answer. None when the service
/// has no `doc2ci-sem` rules or a text does not load.
pub fn missed_leaves(service: &str, reference: &str, output: &str) -> Option<Vec<String>> {
    let svc = doc2ci_sem::service(service)?;
    let form = |text: &str| -> Option<doc2ci_sem::Canon> {
        let docs = documents(&text::clean(capped(text).0), &Limits::default())?;
        Some(doc2ci_sem::canonical(svc, &docs))
    };
    Some(doc2ci_sem::containment_explained(svc, &form(reference)?, &form(output)?).missed)
}

/// Every metric of one prepared output against its prepared reference (same [`CrystalContext`]),
/// but those that need embeddings (only [`score_all`] has them).
pub fn score_prepared(reference: &Prepared, output: &Prepared) -> Scores {
    let sides = Sides { reference, output, embeddings: None };
    Scores(METRICS.iter().filter_map(|m| Some((m.info.name, m.score(&sides)?))).collect())
}

/// [`score_prepared`] of `output` against `reference` (texts as stored).
pub fn score_pair(reference: &str, output: &str, ctx: &CrystalContext) -> Scores {
    score_prepared(&Prepared::new(reference, ctx), &Prepared::new(output, ctx))
}

/// SPEC §5 `canon`: compact sorted-key JSON of a text that loads as a mapping or sequence, else its
/// stripped non-empty cleaned lines.
pub fn canon(x: &str) -> String {
    let clean = text::clean(x);
    canon_of(&clean, doc2ci_yaml::load(&clean, &Limits::default()).ok().as_ref())
}

/// The JSON fallback also covers values `json.dumps(sort_keys=True)` cannot write (keys of mixed
/// types, non-string keys it cannot convert), where the peer's dump raises.
fn canon_of(clean: &str, loaded: Option<&Value>) -> String {
    match loaded {
        Some(v @ (Value::Map(_) | Value::Seq(_))) => doc2ci_yaml::canon_json(v),
        _ => None,
    }
    .unwrap_or_else(|| text::stripped_lines_of_clean(clean))
}

/// Sentence BLEU / 100 of `lj(output)` against `lj(reference)` (sacrebleu, 13a, exp smoothing).
pub fn bleu(reference: &str, output: &str) -> f64 {
    sentence_bleu(&lj(reference), &lj(output))
}

/// Sentence BLEU / 100 of two texts as given (sacrebleu's `sentence_bleu`, 13a, exp smoothing);
/// 0 when either is empty.
pub fn sentence_bleu(reference: &str, hypothesis: &str) -> f64 {
    if reference.is_empty() || hypothesis.is_empty() {
        return 0.0;
    }
    bleu::bleu(&bleu::BleuSide::new(reference), &bleu::BleuSide::new(hypothesis))
}

/// CrystalBLEU of `lj(output)` against `lj(reference)`, ignoring the context's n-grams.
pub fn crystal_bleu(reference: &str, output: &str, ctx: &CrystalContext) -> f64 {
    let (r, o) = (lj(reference), lj(output));
    if r.is_empty() || o.is_empty() {
        return 0.0;
    }
    crystal::crystal_bleu(&crystal::WordSide::new(&r, ctx), &crystal::WordSide::new(&o, ctx))
}

/// ROUGE-L F1 over whitespace tokens of `lj`.
pub fn rouge_l(reference: &str, output: &str) -> f64 {
    let (r, o) = (lj(reference), lj(output));
    if r.is_empty() || o.is_empty() {
        return 0.0;
    }
    rouge::rouge_l(&ngrams::Vocab::new(text::py_split(&r)), &ngrams::Vocab::new(text::py_split(&o)))
}

/// chrF / 100 over `lj` (lowercased, whitespace included, eps smoothing).
pub fn chrf(reference: &str, output: &str) -> f64 {
    let (r, o) = (lj(reference), lj(output));
    if r.is_empty() || o.is_empty() {
        return 0.0;
    }
    chrf::chrf(&chrf::ChrfSide::new(&r), &chrf::ChrfSide::new(&o))
}

/// 1 − d / (2·max(n1, n2)) of the YAML trees of `clean(x)`, d the Zhang–Shasha distance.
pub fn tree_edit(reference: &str, output: &str) -> f64 {
    let ctx = CrystalContext::default();
    score_prepared(&Prepared::new(reference, &ctx), &Prepared::new(output, &ctx)).value("tree_edit")
}

/// 1 − Levenshtein(canon(output), canon(reference)) / max length, in code points.
pub fn levenshtein(reference: &str, output: &str) -> f64 {
    edit_similarity(&canon(output), &canon(reference))
}

/// 1 − Levenshtein distance / max length of two texts as given, in code points (rapidfuzz's
/// `Levenshtein.normalized_similarity`).
pub fn edit_similarity(a: &str, b: &str) -> f64 {
    let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
    levenshtein::similarity(&a, &b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn similarity_formulas() {
        let a = [1.0f32, 0.0];
        let b = [0.0f32, 1.0];
        assert!(cosine(&a, &b).abs() < 1e-12);
        assert!((cosine(&a, &a) - 1.0).abs() < 1e-12);
        assert!((euclidean(&a, &b) - 1.0 / (1.0 + 2f64.sqrt())).abs() < 1e-12);
        assert_eq!(euclidean(&a, &a), 1.0);
        assert_eq!(cosine(&[0.0, 0.0], &a), 0.0);
    }

    #[test]
    fn layout_quoting_order_and_comments_do_not_break_exact() {
        let a = "# CI\non: [push]\njobs:\n  t:\n    runs-on: ubuntu-latest  # runner\n";
        let b = "jobs:\n  t: {runs-on: 'ubuntu-latest'}\non:\n  - push\n";
        let s = score_pair(a, b, &CrystalContext::default());
        assert_eq!(s.value("exact"), 1.0);
        assert_eq!(s.value("levenshtein"), 1.0);
        assert_eq!(s.value("kv_exact"), 1.0);
        assert!(s.value("tree_edit") < 1.0, "children order is part of the tree");
    }

    #[test]
    fn unparseable_text_is_a_bare_root_and_canon_falls_back_to_lines() {
        let p = Prepared::new("jobs:\n  a: [1,\n  # c\n   b: }", &CrystalContext::default());
        assert_eq!(p.tree_nodes(), 1);
        assert_eq!(p.canon(), "jobs:\na: [1,\nb: }");
    }

    #[test]
    fn tree_labels_numbers_as_written() {
        let p = Prepared::new("v: 0x1F\nf: True\nn: ~\nl: [1.10]\n", &CrystalContext::default());
        let labels: Vec<&str> = p.tree.labels().collect();
        assert_eq!(labels, ["0x1F", "v", "true", "f", "n", "1.10", "item_0", "l", "root"]);
    }

    #[test]
    fn documents_are_all_of_the_stream_while_canon_and_tree_need_one() {
        let ctx = CrystalContext::default();
        // CloudEval scores each document: `a` matches, `b` is in both with other values.
        let s = score_pair("a: 1\n---\nb: 2\n", "a: 1\n---\nb: 3\n", &ctx);
        assert!((s.value("kv_wildcard") - 1.0 / 3.0).abs() < 1e-12, "{}", s.value("kv_wildcard"));
        assert_eq!(s.value("kv_exact"), 0.0);
        let same = score_pair("a: 1\n---\nb: 2\n", "a: 1\n---\nb: 2\n", &ctx);
        assert_eq!((same.value("kv_exact"), same.value("kv_wildcard")), (1.0, 1.0));
        // ruamel's `load` refuses a second document: canon falls back to lines, the tree is bare.
        let p = Prepared::new("a: 1\n---\nb: 2\n", &ctx);
        assert_eq!(p.canon(), "a: 1\n---\nb: 2");
        assert_eq!(p.tree_nodes(), 1);
        assert_eq!(p.docs.as_ref().map(Vec::len), Some(2));
        // No document at all: `load_all` gives none, which CloudEval's reference check refuses.
        let empty = Prepared::new("# only a comment\n", &ctx);
        assert_eq!(empty.docs, Some(Vec::new()));
        let nulls = score_pair("---\n", "---\n", &ctx);
        assert_eq!((nulls.value("kv_exact"), nulls.value("kv_wildcard")), (1.0, 0.0));
    }

    #[test]
    fn prepared_texts_can_be_shared_across_threads() {
        fn send_sync<T: Send + Sync>() {}
        send_sync::<Prepared>();
        send_sync::<CrystalContext>();
    }

    #[test]
    fn single_metric_functions_agree_with_the_batch() {
        let ctx = CrystalContext::from_lj_texts(["on: push jobs:"], 2);
        let (r, o) = (
            "on: push\njobs:\n  a:\n    runs-on: ubuntu-latest\n",
            "on: [push]\njobs:\n  b:\n    runs-on: ubuntu-22.04\n",
        );
        let s = score_pair(r, o, &ctx);
        assert_eq!(s.value("bleu"), bleu(r, o));
        assert_eq!(s.value("crystal_bleu"), crystal_bleu(r, o, &ctx));
        assert_eq!(s.value("rouge_l"), rouge_l(r, o));
        assert_eq!(s.value("chrf"), chrf(r, o));
        assert_eq!(s.value("tree_edit"), tree_edit(r, o));
        assert_eq!(s.value("levenshtein"), levenshtein(r, o));
        assert!(s.value("bleu") > 0.0 && s.value("bleu") < 1.0);
    }

    #[test]
    fn embeddings() {
        assert!((cosine(&[1.0, 0.0], &[1.0, 1.0]) - std::f64::consts::FRAC_1_SQRT_2).abs() < 1e-12);
        assert_eq!(cosine(&[0.0, 0.0], &[1.0, 1.0]), 0.0);
        assert!((euclidean(&[0.0, 0.0], &[3.0, 4.0]) - 1.0 / 6.0).abs() < 1e-12);
    }

    /// Issue 12: a 100 MB output (here 4 MB of deep YAML, multi-byte characters at the cut) is
    /// scored on its beginning and flagged, not prepared whole.
    #[test]
    fn huge_texts_are_capped_and_flagged() {
        let ctx = CrystalContext::from_references(["on: push"]);
        let mut huge = String::from("jobs:\n");
        while huge.len() < 4 << 20 {
            huge.push_str("  - é: [a, b, c]\n");
        }
        let p = Prepared::new(&huge, &ctx);
        assert!(p.truncated && p.clean().len() <= MAX_SCORED_BYTES);
        let r = Prepared::new("on: push", &ctx);
        assert!(!r.truncated);
        let s = score_prepared(&r, &p);
        assert!(s.value("levenshtein") >= 0.0 && s.value("levenshtein") < 0.5, "{s:?}");
    }
}
