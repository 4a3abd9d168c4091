//! CloudEval-YAML's YAML-aware key–value metrics (`metrics/kv_match.py`, `metrics/kv_wildcard.py`),
//! ported with their exact failure behaviour: wherever CloudEval's code raises (a non-mapping
//! document, a non-string key, a reference that does not load), its `evaluate.py` records 0.
//!
//! doc2ci feeds them `clean(x)` loaded with the YAML 1.2 loader used everywhere else (CloudEval
//! used PyYAML, YAML 1.1): the documents compared are then the ones `canon` and `tree_edit` see.

use crate::text::py_rstrip;
use doc2ci_yaml::{Int, Map, Timestamp, Value};

/// A text's YAML documents, or None when it does not load.
pub type Docs = Option<Vec<Value>>;

/// `kv_match.test`: every document equal as data (DeepDiff finds no difference).
pub fn kv_exact(reference: &Docs, output: &Docs) -> f64 {
    let (Some(out), Some(refs)) = (output, reference) else {
        return 0.0;
    };
    if refs.is_empty() || out.len() != refs.len() {
        return 0.0;
    }
    out.iter().zip(refs).all(|(a, b)| strict_eq(a, b)) as u8 as f64
}

/// `kv_wildcard.test`: leaf-path intersection over union; `reference` must already be loaded from
/// [`label_wildcards`] of the cleaned reference.
pub fn kv_wildcard(reference: &Docs, output: &Docs) -> f64 {
    let (Some(out), Some(refs)) = (output, reference) else {
        return 0.0;
    };
    if refs.is_empty() {
        return 0.0;
    }
    let empty = Value::Map(Map::default());
    let n = out.len().max(refs.len());
    let (mut inter, mut union) = (0usize, 0usize);
    for i in 0..n {
        let (Ok(t), Ok(r)) = (leaves(out.get(i).unwrap_or(&empty)), leaves(refs.get(i).unwrap_or(&empty))) else {
            return 0.0;
        };
        let hit = r
            .iter()
            .filter(|rl| t.iter().any(|tl| tl.path == rl.path && (rl.wildcard || py_eq(tl.value, rl.value, false))))
            .count();
        inter += hit;
        union += t.len() + r.len() - hit;
    }
    if union == 0 {
        return 0.0;
    }
    inter as f64 / union as f64
}

/// `append_labels_to_keys`: a line holding `#` and ending in `*` marks its key as a wildcard. Returns
/// None when no line does (the common case: load the text as is), `Some(Err)` when CloudEval's code
/// would raise (such a line without `:`).
pub fn label_wildcards(cleaned: &str) -> Option<Result<String, ()>> {
    let marked = |l: &str| l.contains('#') && py_rstrip(l).ends_with('*');
    if !cleaned.split('\n').any(marked) {
        return None;
    }
    let mut out = Vec::new();
    for line in cleaned.split('\n') {
        if marked(line) {
            let Some((key, rest)) = line.split_once(':') else {
                return Some(Err(()));
            };
            out.push(format!("{}*:{}", py_rstrip(key), rest));
        } else {
            out.push(line.to_string());
        }
    }
    Some(Ok(out.join("\n")))
}

struct Leaf<'a> {
    path: Vec<&'a str>,
    value: &'a Value,
    wildcard: bool,
}

/// `get_leaf_nodes`; Err where Python raises (`.items()` of a non-mapping, `.rstrip` of a non-string
/// key that a leaf needs).
fn leaves(v: &Value) -> Result<Vec<Leaf<'_>>, ()> {
    let Value::Map(m) = v else { return Err(()) };
    let mut out = Vec::new();
    for (k, val) in m.iter() {
        let key = || k.as_str().ok_or(());
        let sub = match val {
            Value::Map(_) => Some(leaves(val)?),
            Value::Seq(items) if matches!(items.first(), Some(Value::Map(_))) => {
                let mut all = Vec::new();
                for item in items {
                    all.extend(leaves(item)?);
                }
                Some(all)
            }
            _ => None,
        };
        match sub {
            Some(sub) => {
                // Python evaluates `key.rstrip` only inside the comprehension, i.e. per leaf.
                for mut l in sub {
                    l.path.insert(0, key()?.trim_end_matches('*'));
                    out.push(l);
                }
            }
            None => {
                let key = key()?;
                out.push(Leaf { path: vec![key.trim_end_matches('*')], value: val, wildcard: key.ends_with('*') });
            }
        }
    }
    Ok(out)
}

/// Python's `==` on loaded values. `in_container` applies the identity shortcut of list and dict
/// comparison, which makes ruamel's single shared NaN object equal to itself there.
fn py_eq(a: &Value, b: &Value, in_container: bool) -> bool {
    use Value::*;
    match (a, b) {
        (Null { .. }, Null { .. }) => true,
        (Str(x), Str(y)) => x == y,
        (Timestamp { value: x, .. }, Timestamp { value: y, .. }) => timestamp_eq(x, y),
        (Seq(x), Seq(y)) => x.len() == y.len() && x.iter().zip(y).all(|(p, q)| py_eq(p, q, true)),
        (Map(x), Map(y)) => map_eq(x, y, |p, q| py_eq(p, q, true)),
        _ => match (number(a), number(b)) {
            (Some(x), Some(y)) => num_eq(&x, &y, in_container),
            _ => false,
        },
    }
}

/// DeepDiff's notion of "no difference": types must match exactly (`1`, `1.0` and `true` differ),
/// mapping keys still match by Python equality.
fn strict_eq(a: &Value, b: &Value) -> bool {
    use Value::*;
    match (a, b) {
        (Null { .. }, Null { .. }) => true,
        (Bool { value: x, .. }, Bool { value: y, .. }) => x == y,
        (Int { value: x, .. }, Int { value: y, .. }) => x == y,
        // ruamel shares one NaN object, and DeepDiff skips identical objects.
        (Float { value: x, .. }, Float { value: y, .. }) => x == y || (x.is_nan() && y.is_nan()),
        (Str(x), Str(y)) => x == y,
        (Timestamp { value: x, .. }, Timestamp { value: y, .. }) => {
            x.time.is_some() == y.time.is_some() && timestamp_eq(x, y)
        }
        (Seq(x), Seq(y)) => x.len() == y.len() && x.iter().zip(y).all(|(p, q)| strict_eq(p, q)),
        (Map(x), Map(y)) => map_eq(x, y, strict_eq),
        _ => false,
    }
}

fn map_eq(x: &Map, y: &Map, value_eq: impl Fn(&Value, &Value) -> bool) -> bool {
    x.len() == y.len()
        && x.iter().all(|(k, v)| y.iter().find(|(k2, _)| py_eq(k, k2, true)).is_some_and(|(_, v2)| value_eq(v, v2)))
}

enum Num<'a> {
    Int(std::borrow::Cow<'a, Int>),
    Float(f64),
}

fn number(v: &Value) -> Option<Num<'_>> {
    match v {
        Value::Bool { value, .. } => Some(Num::Int(std::borrow::Cow::Owned(Int::from_i64(*value as i64)))),
        Value::Int { value, .. } => Some(Num::Int(std::borrow::Cow::Borrowed(value))),
        Value::Float { value, .. } => Some(Num::Float(*value)),
        _ => None,
    }
}

/// Python compares ints and floats exactly, not after rounding the int to a float.
fn num_eq(a: &Num, b: &Num, in_container: bool) -> bool {
    match (a, b) {
        (Num::Int(x), Num::Int(y)) => x == y,
        (Num::Float(x), Num::Float(y)) => x == y || (in_container && x.is_nan() && y.is_nan()),
        (Num::Int(i), Num::Float(f)) | (Num::Float(f), Num::Int(i)) => {
            f.is_finite() && f.fract() == 0.0 && i.to_decimal().is_some_and(|d| d == format!("{f:.0}"))
        }
    }
}

/// Python's `==` on `date`/`datetime`: a date never equals a datetime, naive never equals aware,
/// aware ones compare as instants.
fn timestamp_eq(x: &Timestamp, y: &Timestamp) -> bool {
    match (&x.time, &y.time) {
        (None, None) => x == y,
        (Some(a), Some(b)) => match (a.offset_minutes, b.offset_minutes) {
            (None, None) => x == y,
            (Some(_), Some(_)) => instant(x) == instant(y),
            _ => false,
        },
        _ => false,
    }
}

/// Microseconds since 0001-01-01 UTC.
fn instant(t: &Timestamp) -> i128 {
    let (y, m, d) = (t.year as i64, t.month as i64, t.day as i64);
    // Days from civil (proleptic Gregorian), Howard Hinnant's algorithm.
    let y2 = if m <= 2 { y - 1 } else { y };
    let era = y2.div_euclid(400);
    let yoe = y2 - era * 400;
    let doy = (153 * (m + if m > 2 { -3 } else { 9 }) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146097 + doe;
    let time = t.time.as_ref().expect("instant of a datetime");
    let secs = days as i128 * 86400 + time.hour as i128 * 3600 + time.minute as i128 * 60 + time.second as i128
        - time.offset_minutes.unwrap_or(0) as i128 * 60;
    secs * 1_000_000 + time.microsecond as i128
}

#[cfg(test)]
mod tests {
    use super::*;
    use doc2ci_yaml::{load, Limits};

    fn docs(t: &str) -> Docs {
        Some(vec![load(t, &Limits::default()).unwrap()])
    }

    #[test]
    fn exact_is_type_strict_but_wildcard_uses_python_equality() {
        let (r, o) = (docs("a: 1\nb: [x]\n"), docs("b: [x]\na: 1.0\n"));
        assert_eq!(kv_exact(&r, &o), 0.0);
        assert_eq!(kv_wildcard(&r, &o), 1.0);
        assert_eq!(kv_exact(&r, &docs("b: [x]\na: 1\n")), 1.0);
    }

    #[test]
    fn cloudeval_failures_score_zero() {
        // A sequence document and a non-string key make CloudEval's get_leaf_nodes raise.
        assert_eq!(kv_wildcard(&docs("- a: 1\n"), &docs("- a: 1\n")), 0.0);
        assert_eq!(kv_wildcard(&docs("a: 1\n"), &docs("1: a\na: 1\n")), 0.0);
        // ... but not when the non-string key holds no leaf.
        assert_eq!(kv_wildcard(&docs("a: 1\n"), &docs("1: {}\na: 1\n")), 1.0);
        assert_eq!(kv_exact(&None, &docs("a: 1\n")), 0.0);
    }

    #[test]
    fn wildcard_keys_match_any_value() {
        let labelled = label_wildcards("image: nginx #*").unwrap().unwrap();
        assert_eq!(labelled, "image*: nginx #*");
        let r = docs("image*: nginx\nport: 80\n");
        assert_eq!(kv_wildcard(&r, &docs("image: httpd\nport: 80\n")), 1.0);
        assert_eq!(label_wildcards("- x #*"), Some(Err(())));
        assert_eq!(label_wildcards("a: b"), None);
    }
}
