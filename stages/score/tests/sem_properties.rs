//! Properties of the semantic metrics (`doc2ci-sem` through the score registry), on documents
//! drawn from the documented-equivalence corpus of every service and from the 1,318 real GitHub
//! Actions references of the llm4ci data, each written out in
//! random YAML styles: canonicalisation is idempotent and blind to key order, flow or block style,
//! quoting and anchors; `sem_exact` is symmetric; `tree_exact ⇒ sem_exact ⇒ sem_contains`; and a
//! reference is contained in itself completed by the lint stage's wrapper.

mod common;

use std::path::PathBuf;

use doc2ci_lint::wrap::{complete, Completion};
use doc2ci_score::{score_prepared, CrystalContext, Prepared};
use doc2ci_sem::{canonical, containment, sem_exact, service, Canon, SERVICES};
use doc2ci_validate::Service;
use doc2ci_yaml::{load_all, Limits, Map, Value};
use proptest::prelude::*;

/// A tiny deterministic generator for style choices (proptest shrinks the seed).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn pick(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn coin(&mut self) -> bool {
        self.next() & 1 == 1
    }
}

/// A scalar written so that it loads back as the same value.
fn scalar(v: &Value, rng: &mut Rng) -> String {
    match v {
        Value::Str(s) => {
            let plain = !s.is_empty()
                && !s.contains('\n')
                && s.trim() == s
                && matches!(doc2ci_yaml::load(&format!("k: {s}"), &Limits::default()), Ok(Value::Map(m)) if m.get("k") == Some(v));
            match rng.pick(3) {
                0 if plain => s.clone(),
                1 if !s.contains('\n') && !s.contains('\'') => format!("'{s}'"),
                _ => serde_json::Value::String(s.clone()).to_string(),
            }
        }
        Value::Null { .. } => ["null", "~", ""][rng.pick(3)].to_string(),
        other => other.scalar_text().unwrap_or_default().to_string(),
    }
}

fn shuffled<'a>(m: &'a Map, rng: &mut Rng) -> Vec<(&'a Value, &'a Value)> {
    let mut e: Vec<_> = m.iter().collect();
    for i in (1..e.len()).rev() {
        e.swap(i, rng.pick(i + 1));
    }
    e
}

fn key(k: &Value, rng: &mut Rng) -> String {
    let s = scalar(k, rng);
    if s.is_empty() {
        "null".into()
    } else {
        s
    }
}

fn flow(v: &Value, rng: &mut Rng) -> String {
    match v {
        Value::Map(m) => {
            let items: Vec<String> = shuffled(m, rng)
                .into_iter()
                .map(|(k, v)| format!("{}: {}", flow_item(k, rng), flow_item(v, rng)))
                .collect();
            format!("{{{}}}", items.join(", "))
        }
        Value::Seq(s) => format!("[{}]", s.iter().map(|i| flow_item(i, rng)).collect::<Vec<_>>().join(", ")),
        other => scalar(other, rng),
    }
}

/// A key or value inside a flow collection: an empty plain null would be ambiguous there, and a
/// plain scalar with a flow indicator (`${{ x }}`) would end the collection.
fn flow_item(v: &Value, rng: &mut Rng) -> String {
    match v {
        Value::Null { .. } => "null".into(),
        Value::Str(s) if s.contains(['{', '}', '[', ']', ',', '#', ':']) || s.is_empty() => {
            serde_json::Value::String(s.clone()).to_string()
        }
        Value::Str(s) => {
            let t = scalar(v, rng);
            if t == *s && rng.coin() {
                t
            } else {
                serde_json::Value::String(s.clone()).to_string()
            }
        }
        other => flow(other, rng),
    }
}

/// Writes `v` in block style at `indent`, choosing flow style, quoting and key order at random,
/// and sometimes defining a mapping once with an anchor and reusing it through an alias.
fn block(v: &Value, indent: usize, rng: &mut Rng, anchors: &mut Vec<(Value, String)>, out: &mut String) {
    let pad = " ".repeat(indent);
    match v {
        Value::Map(m) if !m.is_empty() => {
            for (k, val) in shuffled(m, rng) {
                out.push_str(&format!("{pad}{}:", key(k, rng)));
                value_after_key(val, indent, rng, anchors, out);
            }
        }
        Value::Seq(s) if !s.is_empty() => {
            for item in s {
                match item {
                    Value::Map(m) if !m.is_empty() && rng.coin() => {
                        let mut inner = String::new();
                        block(item, indent + 2, rng, anchors, &mut inner);
                        out.push_str(&format!("{pad}- {}", &inner[indent + 2..]));
                    }
                    Value::Map(m) if !m.is_empty() => {
                        out.push_str(&format!("{pad}-\n"));
                        block(item, indent + 2, rng, anchors, out);
                    }
                    Value::Seq(_) | Value::Map(_) => out.push_str(&format!("{pad}- {}\n", flow(item, rng))),
                    other => out.push_str(&format!("{pad}- {}\n", flow_item(other, rng))),
                }
            }
        }
        other => out.push_str(&format!("{pad}{}\n", flow(other, rng))),
    }
}

fn value_after_key(val: &Value, indent: usize, rng: &mut Rng, anchors: &mut Vec<(Value, String)>, out: &mut String) {
    let collection = matches!(val, Value::Map(m) if !m.is_empty()) || matches!(val, Value::Seq(s) if !s.is_empty());
    if !collection {
        out.push_str(&format!(" {}\n", flow_item(val, rng)));
        return;
    }
    // A value met before under an anchor is written as an alias to it.
    if let Some((_, name)) = anchors.iter().find(|(a, _)| a == val) {
        out.push_str(&format!(" *{name}\n"));
        return;
    }
    match rng.pick(4) {
        0 => out.push_str(&format!(" {}\n", flow(val, rng))),
        1 => {
            let name = format!("a{}", anchors.len() + 1);
            out.push_str(&format!(" &{name}\n"));
            // Recorded first, so the anchors inside get other names (a value is never inside itself).
            anchors.push((val.clone(), name));
            block(val, indent + 2, rng, anchors, out);
        }
        _ => {
            out.push('\n');
            block(val, indent + 2, rng, anchors, out);
        }
    }
}

/// `v` written out in a random style, as a text that loads back to the same value.
fn render(v: &Value, seed: u64) -> String {
    let mut rng = Rng(seed | 1);
    let mut out = String::new();
    let mut anchors = Vec::new();
    match v {
        Value::Map(m) if !m.is_empty() => block(v, 0, &mut rng, &mut anchors, &mut out),
        Value::Seq(s) if !s.is_empty() => block(v, 0, &mut rng, &mut anchors, &mut out),
        other => out.push_str(&flow(other, &mut rng)),
    }
    if rng.pick(4) == 0 {
        out = format!("# a comment\n---\n{out}");
    }
    out
}

/// Equal as data, mapping order aside (the tree_exact relation).
fn same_value(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Map(x), Value::Map(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.iter().any(|(k2, v2)| same_value(k, k2) && same_value(v, v2)))
        }
        (Value::Seq(x), Value::Seq(y)) => x.len() == y.len() && x.iter().zip(y).all(|(a, b)| same_value(a, b)),
        (Value::Null { .. }, Value::Null { .. }) => true,
        _ => a == b,
    }
}

/// Every document of the corpus, per service.
fn corpus() -> Vec<(&'static str, Value)> {
    let dir = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap()).join("../../libs/sem/tests/corpus");
    let mut out = Vec::new();
    for svc in SERVICES {
        let body = std::fs::read_to_string(dir.join(format!("{}.yaml", svc.name))).unwrap();
        let cases = doc2ci_yaml::load(&body, &Limits::default()).unwrap();
        for case in cases.as_seq().unwrap() {
            for side in ["a", "b"] {
                let text = case.as_map().unwrap().get(side).and_then(Value::as_str).unwrap();
                out.push((svc.name, doc2ci_yaml::load(text, &Limits::default()).unwrap()));
            }
        }
    }
    out
}

fn canon(service_name: &str, text: &str) -> Canon {
    let docs = load_all(text, &Limits::default()).unwrap_or_else(|e| panic!("{e}:\n{text}"));
    canonical(service(service_name).unwrap(), &docs)
}

/// One small change to a document: a scalar edited, an entry dropped, two items swapped.
fn mutate(v: &Value, rng: &mut Rng) -> Value {
    fn walk(v: &Value, target: &mut usize, rng: &mut Rng) -> Value {
        let hit = *target == 0;
        *target = target.wrapping_sub(1);
        match v {
            Value::Map(m) => {
                let mut entries: Vec<(Value, Value)> = m.entries().to_vec();
                if hit && !entries.is_empty() {
                    entries.remove(rng.pick(entries.len()));
                } else {
                    for e in entries.iter_mut() {
                        e.1 = walk(&e.1, target, rng);
                    }
                }
                let text: String = entries.iter().fold(String::from("{"), |mut s, (k, v)| {
                    s.push_str(&format!("{}: {}, ", flow(k, rng), flow_item(v, rng)));
                    s
                }) + "}";
                doc2ci_yaml::load(&text, &Limits::default()).unwrap_or_else(|_| v.clone())
            }
            Value::Seq(s) => {
                let mut items: Vec<Value> = s.iter().map(|i| walk(i, target, rng)).collect();
                if hit && items.len() > 1 {
                    let (i, j) = (rng.pick(items.len()), rng.pick(items.len()));
                    items.swap(i, j);
                }
                Value::Seq(items)
            }
            _ if hit => Value::Str(format!("{}-changed", v.scalar_text().unwrap_or("x"))),
            other => other.clone(),
        }
    }
    let mut target = rng.pick(12);
    walk(v, &mut target, rng)
}

/// The 1,318 real GitHub Actions references of the llm4ci data that load as one mapping or list.
fn real_references() -> Vec<(&'static str, Value)> {
    let refs: Vec<(&'static str, Value)> = common::column("GitHubActions_Docs.csv.gz", "Code")
        .into_iter()
        .filter_map(|(_, code)| match load_all(&doc2ci_score::clean(&code), &Limits::default()).ok()?.as_slice() {
            [v @ (Value::Map(_) | Value::Seq(_))] => Some(("github-actions", v.clone())),
            _ => None,
        })
        .collect();
    assert!(refs.len() > 1000, "{} real references load", refs.len());
    refs
}

fn corpus_case() -> impl Strategy<Value = (&'static str, Value)> {
    let mut all = corpus();
    all.extend(real_references());
    (0..all.len()).prop_map(move |i| all[i].clone())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1024, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn canonical_form_is_idempotent_and_blind_to_style((svc, v) in corpus_case(), s1: u64, s2: u64) {
        let (t1, t2) = (render(&v, s1), render(&v, s2));
        let back = load_all(&t1, &Limits::default()).unwrap();
        prop_assert!(back.len() == 1 && same_value(&back[0], &v), "render keeps the value:\n{}\n{:?}\n{:?}", t1, back, v);
        let (c1, c2) = (canon(svc, &t1), canon(svc, &t2));
        prop_assert_eq!(&c1.docs, &c2.docs, "\n{}\n---\n{}", t1, t2);
        prop_assert!(sem_exact(&c1, &c2));
        let rules = service(svc).unwrap();
        for (_, n) in &c1.docs {
            let mut again = n.clone();
            (rules.canonicalize)(&mut again, &mut Default::default());
            prop_assert_eq!(&again, n, "canonicalising twice changes the form");
        }
    }

    #[test]
    fn sem_exact_is_symmetric_and_tree_exact_implies_sem_exact_implies_sem_contains(
        (svc, v) in corpus_case(), (_, w) in corpus_case(), s1: u64, s2: u64, pick in 0u8..3,
    ) {
        let mut rng = Rng(s2 | 1);
        let other = match pick { 0 => v.clone(), 1 => mutate(&v, &mut rng), _ => w };
        let (r, o) = (render(&v, s1), render(&other, s2));
        let ctx = CrystalContext::from_references([r.as_str()]);
        let (pr, po) = (Prepared::for_service(&r, &ctx, svc), Prepared::for_service(&o, &ctx, svc));
        let forward = score_prepared(&pr, &po);
        let backward = score_prepared(&po, &pr);
        prop_assert_eq!(forward.value("sem_exact"), backward.value("sem_exact"));
        let (tree, exact, contains) =
            (forward.value("tree_exact"), forward.value("sem_exact"), forward.value("sem_contains"));
        prop_assert!(tree <= exact && exact <= contains, "tree {} sem {} contains {}\n{}\n---\n{}", tree, exact, contains, r, o);
        prop_assert_eq!(contains == 1.0, forward.value("sem_recall") == 1.0);
        if pick == 0 {
            prop_assert_eq!(exact, 1.0, "the same document in another style\n{}\n---\n{}", r, o);
        }
    }

    #[test]
    fn a_reference_is_contained_in_its_own_completion((svc, v) in corpus_case(), s1: u64) {
        let text = render(&v, s1);
        let service_enum: Service = svc.parse().unwrap();
        if let Completion::Wrapped(w) = complete(service_enum, &text) {
            let rules = service(svc).unwrap();
            let (r, o) = (canon(svc, &text), canon(svc, &w.text));
            let c = containment(rules, &r, &o);
            prop_assert!(c.total > 0 && c.matched == c.total, "{:?}\n{}\n--- completed ({}) ---\n{}", c, text, w.rule, w.text);
        }
    }
}
