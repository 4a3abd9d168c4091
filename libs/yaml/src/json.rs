//! JSON views of a loaded value: the score stage's canonical text and the validator's input.

use crate::num::py_float_repr;
use crate::pykey::{num_lt, python_sort, JsonKeyNum};
use crate::Value;

/// Python's `json.dumps(v, sort_keys=True, ensure_ascii=False, separators=(',', ':'),
/// default=str)` of what ruamel's safe loader returns for the same text, byte for byte:
/// Python float repr (`1.0`, `1e-05`, `NaN`, `Infinity`), unbounded ints, timestamps through
/// `str()`. None where Python raises: a key that is not a str, number, bool or null (a
/// sequence key is a tuple, a date key a `date`), keys of incomparable types in one mapping
/// (`str` with numbers or null), an int beyond Python's 4300-digit limit, or 64+ numeric keys
/// in one mapping including NaN (CPython's sort order for that case is not reproduced).
pub fn canon_json(v: &Value) -> Option<String> {
    let mut out = String::new();
    write_canon(v, &mut out)?;
    Some(out)
}

fn write_canon(v: &Value, out: &mut String) -> Option<()> {
    match v {
        Value::Null { .. } => out.push_str("null"),
        Value::Bool { value, .. } => out.push_str(if *value { "true" } else { "false" }),
        Value::Int { value, .. } => out.push_str(&value.to_decimal()?),
        Value::Float { value, .. } => out.push_str(&json_float(*value)),
        Value::Str(s) => json_str(s, out),
        Value::Timestamp { value, .. } => json_str(&value.python_str(), out),
        Value::Seq(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canon(item, out)?;
            }
            out.push(']');
        }
        Value::Map(m) => {
            #[derive(Clone, Copy)]
            enum K<'a> {
                Str(&'a str),
                Num(JsonKeyNum<'a>),
                Null,
            }
            let mut keys: Vec<(K, usize)> = Vec::with_capacity(m.len());
            for (i, (k, _)) in m.entries().iter().enumerate() {
                let key = match k {
                    Value::Str(s) => K::Str(s),
                    Value::Int { value, .. } => K::Num(JsonKeyNum::Int(value)),
                    Value::Float { value, .. } => K::Num(JsonKeyNum::Float(*value)),
                    Value::Bool { value, .. } => K::Num(JsonKeyNum::Bool(*value)),
                    Value::Null { .. } => K::Null,
                    _ => return None,
                };
                keys.push((key, i));
            }
            if keys.len() > 1 {
                // Python compares only within str, or within numbers; anything else raises.
                if keys.iter().all(|(k, _)| matches!(k, K::Str(_))) {
                    keys.sort_by(|a, b| match (a.0, b.0) {
                        (K::Str(x), K::Str(y)) => x.cmp(y),
                        _ => unreachable!("all keys are strings"),
                    });
                } else if keys.iter().all(|(k, _)| matches!(k, K::Num(_))) {
                    fn num<'a>(k: K<'a>) -> JsonKeyNum<'a> {
                        match k {
                            K::Num(n) => n,
                            _ => unreachable!("all keys are numbers"),
                        }
                    }
                    let total = !keys.iter().any(|(k, _)| matches!(num(*k), JsonKeyNum::Float(f) if f.is_nan()));
                    python_sort(&mut keys, |a, b| num_lt(num(a.0), num(b.0)), total)?;
                } else {
                    return None;
                }
            }
            out.push('{');
            for (n, (key, i)) in keys.iter().enumerate() {
                if n > 0 {
                    out.push(',');
                }
                match key {
                    K::Str(s) => json_str(s, out),
                    K::Null => out.push_str("\"null\""),
                    K::Num(JsonKeyNum::Bool(b)) => out.push_str(if *b { "\"true\"" } else { "\"false\"" }),
                    K::Num(JsonKeyNum::Int(i)) => {
                        out.push('"');
                        out.push_str(&i.to_decimal()?);
                        out.push('"');
                    }
                    K::Num(JsonKeyNum::Float(f)) => {
                        out.push('"');
                        out.push_str(&json_float(*f));
                        out.push('"');
                    }
                }
                out.push(':');
                write_canon(&m.entries()[*i].1, out)?;
            }
            out.push('}');
        }
    }
    Some(())
}

fn json_float(f: f64) -> String {
    if f.is_nan() {
        "NaN".into()
    } else if f.is_infinite() {
        if f > 0.0 { "Infinity" } else { "-Infinity" }.into()
    } else {
        py_float_repr(f)
    }
}

/// Python json's string encoding with `ensure_ascii=False`: only `"`, `\` and C0 controls
/// are escaped (lower-case `\u00xx`).
fn json_str(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
}

/// The JSON document check-jsonschema validates for this value.
///
/// Keys become Python's `str(key)`, as check-jsonschema's `_normalize` does: `True`,
/// `None`, `1.0`, `inf`, a sequence key as a tuple repr `('a', 1)`; when two keys print the
/// same the later value wins. Ints beyond i64/u64 become the nearest f64. Non-finite floats,
/// which JSON cannot hold, become the strings `inf`, `-inf` and `nan` (a `type: number`
/// check then fails where Python's jsonschema would pass; CI schemas have no such field that
/// real files fill with `.inf`). Timestamps become their text, as check-jsonschema loads them.
pub fn to_json(v: &Value) -> serde_json::Value {
    use serde_json::Value as J;
    match v {
        Value::Null { .. } => J::Null,
        Value::Bool { value, .. } => J::Bool(*value),
        Value::Int { value, .. } => {
            if let Some(i) = value.as_i64() {
                J::from(i)
            } else if let Some(u) = value.as_u64() {
                J::from(u)
            } else {
                serde_json::Number::from_f64(value.to_f64()).map_or(J::Null, J::Number)
            }
        }
        Value::Float { value, .. } => {
            serde_json::Number::from_f64(*value).map_or_else(|| J::String(py_float_repr(*value)), J::Number)
        }
        Value::Str(s) => J::String(s.clone()),
        Value::Timestamp { text, .. } => J::String(text.clone()),
        Value::Seq(items) => J::Array(items.iter().map(to_json).collect()),
        Value::Map(m) => {
            let mut obj = serde_json::Map::new();
            for (k, v) in m.iter() {
                obj.insert(py_str_key(k), to_json(v));
            }
            J::Object(obj)
        }
    }
}

/// Python's `str(key)` for a loaded mapping key (see [`to_json`]).
pub fn py_str_key(k: &Value) -> String {
    match k {
        Value::Str(s) => s.clone(),
        Value::Seq(items) => {
            let parts: Vec<String> = items.iter().map(py_repr).collect();
            if parts.len() == 1 {
                format!("({},)", parts[0])
            } else {
                format!("({})", parts.join(", "))
            }
        }
        other => py_repr(other),
    }
}

fn py_repr(v: &Value) -> String {
    match v {
        Value::Null { .. } => "None".into(),
        Value::Bool { value, .. } => if *value { "True" } else { "False" }.into(),
        Value::Int { value, text } => value.to_decimal().unwrap_or_else(|| text.clone()),
        Value::Float { value, .. } => py_float_repr(*value),
        Value::Str(s) => py_str_repr(s),
        Value::Timestamp { text, .. } => py_str_repr(text),
        Value::Seq(_) => format!("[{}]", v.as_seq().unwrap_or(&[]).iter().map(py_repr).collect::<Vec<_>>().join(", ")),
        Value::Map(m) => format!(
            "{{{}}}",
            m.iter().map(|(k, v)| format!("{}: {}", py_repr(k), py_repr(v))).collect::<Vec<_>>().join(", ")
        ),
    }
}

/// Python's `repr(str)`; non-printable characters beyond ASCII controls are approximated
/// (escaped only for C0/C1 controls and line/paragraph separators).
fn py_str_repr(s: &str) -> String {
    let quote = if s.contains('\'') && !s.contains('"') { '"' } else { '\'' };
    let mut out = String::new();
    out.push(quote);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c == quote => {
                out.push('\\');
                out.push(c);
            }
            c if (c as u32) < 0x20 || (0x7f..=0xa0).contains(&(c as u32)) => {
                out.push_str(&format!("\\x{:02x}", c as u32))
            }
            '\u{2028}' | '\u{2029}' => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push(quote);
    out
}
