//! The documented-equivalence corpus (`corpus/<service>.yaml`): pairs the documentation says
//! behave the same, and near-misses that do not, each classified right by `sem_exact` (both
//! ways round) and, where the case says, by containment. Each equivalence needs the rules it names:
//! without any one of them, the two spellings differ.

use doc2ci_sem::{canonical, canonical_without, containment, sem_exact, service, Canon, Service, SERVICES};
use doc2ci_yaml::{load_all, Limits, Value};

fn canon(svc: &Service, text: &str, case: &str) -> Canon {
    let docs = load_all(text, &Limits::default()).unwrap_or_else(|e| panic!("{case}: {e}"));
    canonical(svc, &docs)
}

fn field<'a>(case: &'a Value, k: &str) -> Option<&'a Value> {
    case.as_map().and_then(|m| m.get(k))
}

fn text<'a>(case: &'a Value, k: &str, at: &str) -> &'a str {
    field(case, k).and_then(Value::as_str).unwrap_or_else(|| panic!("{at}: `{k}` is missing"))
}

/// The rule (or rules) a case exercises.
fn rules<'a>(case: &'a Value, at: &str) -> Vec<&'a str> {
    match field(case, "rule") {
        Some(Value::Str(r)) => vec![r.as_str()],
        Some(Value::Seq(rs)) => rs.iter().filter_map(Value::as_str).collect(),
        _ => panic!("{at}: `rule` is missing"),
    }
}

#[test]
fn every_documented_equivalence_holds_and_every_near_miss_is_told_apart() {
    let dir = std::path::Path::new(&std::env::var("CARGO_MANIFEST_DIR").unwrap()).join("tests/corpus");
    let mut used_rules = std::collections::BTreeSet::new();
    for svc in SERVICES {
        let path = dir.join(format!("{}.yaml", svc.name));
        let body = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let cases = doc2ci_yaml::load(&body, &Limits::default()).unwrap();
        let cases = cases.as_seq().expect("a list of cases");
        let (mut same, mut differ) = (0, 0);
        for (i, case) in cases.iter().enumerate() {
            let at = format!("{}#{} ({})", svc.name, i + 1, rules(case, svc.name).join(", "));
            let source = text(case, "source", &at);
            assert!(source.starts_with("https://"), "{at}: cite the page");
            let expect = matches!(field(case, "same"), Some(Value::Bool { value: true, .. }));
            let (a, b) = (canon(svc, text(case, "a", &at), &at), canon(svc, text(case, "b", &at), &at));
            assert_eq!(sem_exact(&a, &b), expect, "{at}: sem_exact\n a: {a:?}\n b: {b:?}");
            assert_eq!(sem_exact(&b, &a), expect, "{at}: sem_exact is symmetric");
            if expect {
                same += 1;
                for rule in rules(case, &at) {
                    assert!(svc.rules.iter().any(|r| r.name == rule), "{at}: `{rule}` is not a rule of {}", svc.name);
                    let rule: &'static str = svc.rules.iter().find(|r| r.name == rule).unwrap().name;
                    let without = |t: &str| canonical_without(svc, &load_all(t, &Limits::default()).unwrap(), rule);
                    assert!(
                        !sem_exact(&without(text(case, "a", &at)), &without(text(case, "b", &at))),
                        "{at}: the pair is equal without rule `{rule}`, which it should need"
                    );
                    used_rules.insert((svc.name, rule.to_string()));
                }
                assert_eq!(containment(svc, &a, &b).recall(), 1.0, "{at}: equal forms contain each other");
            } else {
                differ += 1;
                text(case, "why", &at);
            }
            if let Some(Value::Bool { value, .. }) = field(case, "contains") {
                let c = containment(svc, &a, &b);
                assert_eq!(c.matched == c.total, *value, "{at}: contains ({c:?})");
            }
        }
        assert!(same >= 4 && differ >= 3, "{}: {same} equivalences and {differ} near-misses", svc.name);
    }
    // Every rule of every service is shown by at least one documented pair.
    for svc in SERVICES {
        for r in svc.rules {
            assert!(used_rules.contains(&(svc.name, r.name.to_string())), "{}: rule {} has no case", svc.name, r.name);
        }
    }
    assert!(service("bitbucket").is_none());
}
