//! Issue 48: each service's rules are complete against its own configuration spec. The spec here
//! is the JSON Schema `doc2ci setup` pins for the service (the one validate checks against): every
//! property it lets a file write as one value or as a list of such values (`anyOf: [X, array of
//! X]`, wherever the property sits) must be in the service's `shorthands` table, as a rule or as a
//! named exclusion.

use std::collections::BTreeSet;
use std::path::PathBuf;

use doc2ci_sem::SERVICES;
use serde_json::Value;

/// Where `doc2ci setup` put the schemas (the engine's `assets_dir`).
fn assets() -> PathBuf {
    match std::env::var_os("DOC2CI_ASSETS").filter(|d| !d.is_empty()) {
        Some(d) => PathBuf::from(d),
        None => PathBuf::from(std::env::var_os("HOME").expect("HOME")).join(".cache/doc2ci/assets"),
    }
}

/// The properties of `schema` that take a scalar or a list of scalars.
fn one_or_many(schema: &Value) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    let mut seen = BTreeSet::new();
    let mut todo: Vec<&Value> = vec![schema];
    for defs in ["definitions", "$defs"] {
        todo.extend(schema.get(defs).and_then(Value::as_object).into_iter().flat_map(|m| m.values()));
    }
    while let Some(x) = todo.pop() {
        let x = resolve(schema, x);
        let Some(m) = x.as_object() else { continue };
        if !seen.insert(x as *const Value as usize) {
            continue;
        }
        for k in ["anyOf", "oneOf", "allOf", "prefixItems"] {
            todo.extend(m.get(k).and_then(Value::as_array).into_iter().flatten());
        }
        for k in ["then", "else", "if", "not", "items", "additionalProperties", "additionalItems"] {
            match m.get(k) {
                Some(Value::Array(a)) => todo.extend(a),
                Some(v) => todo.push(v),
                None => {}
            }
        }
        todo.extend(m.get("patternProperties").and_then(Value::as_object).into_iter().flat_map(|p| p.values()));
        for (name, p) in m.get("properties").and_then(Value::as_object).into_iter().flatten() {
            let forms = alternatives(schema, p, 0);
            let scalar = forms.iter().any(is_scalar);
            let list_of_scalars = forms
                .iter()
                .filter(|f| ty(f) == Some("array"))
                .any(|a| a.get("items").is_some_and(|i| alternatives(schema, i, 0).iter().any(is_scalar)));
            if scalar && list_of_scalars {
                found.insert(name.clone());
            }
            todo.push(p);
        }
    }
    found
}

fn resolve<'a>(root: &'a Value, mut x: &'a Value) -> &'a Value {
    for _ in 0..32 {
        let Some(r) = x.get("$ref").and_then(Value::as_str).and_then(|r| r.strip_prefix("#/")) else { break };
        let mut at = root;
        for part in r.split('/') {
            at = match at {
                Value::Array(a) => &a[part.parse::<usize>().expect("an index")],
                _ => &at[part],
            };
        }
        x = at;
    }
    x
}

/// The forms a schema admits, its `anyOf`/`oneOf` and type lists taken apart.
fn alternatives<'a>(root: &'a Value, x: &'a Value, depth: usize) -> Vec<Value> {
    let x = resolve(root, x);
    let Some(m) = x.as_object() else { return vec![] };
    if depth > 10 {
        return vec![];
    }
    for k in ["anyOf", "oneOf"] {
        if let Some(a) = m.get(k).and_then(Value::as_array) {
            return a.iter().flat_map(|v| alternatives(root, v, depth + 1)).collect();
        }
    }
    match m.get("type") {
        Some(Value::Array(ts)) => ts
            .iter()
            .map(|t| {
                let mut one = m.clone();
                one.insert("type".into(), t.clone());
                Value::Object(one)
            })
            .collect(),
        _ => vec![x.clone()],
    }
}

fn ty(f: &Value) -> Option<&str> {
    f.get("type").and_then(Value::as_str)
}

fn is_scalar(f: &Value) -> bool {
    matches!(ty(f), Some("string" | "number" | "integer" | "boolean"))
        || (ty(f).is_none() && (f.get("enum").is_some() || f.get("const").is_some()))
}

#[test]
fn every_shorthand_of_each_spec_is_a_rule_or_a_named_exclusion() {
    for svc in SERVICES {
        let path = assets().join(svc.schema_asset);
        let text =
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e} (run `doc2ci setup`)", path.display()));
        let schema: Value = serde_json::from_str(&text).unwrap();
        let spec = one_or_many(&schema);
        assert!(!spec.is_empty(), "{}: the walk found no shorthand", svc.name);
        let listed: BTreeSet<String> = svc.shorthands.iter().map(|h| h.key.to_string()).collect();
        let missing: Vec<&String> = spec.difference(&listed).collect();
        assert!(missing.is_empty(), "{}: the spec's shorthands not in the table: {missing:?}", svc.name);
        eprintln!("{}: {} shorthands in the schema, {} in the table", svc.name, spec.len(), listed.len());
    }
}
