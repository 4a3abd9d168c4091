//! Python's equality, hashing and ordering of mapping keys: ruamel builds a `dict`, so
//! `1`, `1.0` and `true` are the same key, and `json.dumps(sort_keys=True)` orders keys with `<`.

use std::cmp::Ordering;

use crate::num::Int;
use crate::Value;

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) enum NumKey {
    /// Every integral number (bool, int, integral float) by exact value.
    Int(Int),
    /// Non-integral or infinite floats, by bit pattern (+0.0 is integral, so no ±0 issue).
    Frac(u64),
    /// ruamel returns one shared NaN object for `.nan`, so NaN keys are identical (equal) in Python.
    NaN,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) enum PyKey {
    None,
    Num(NumKey),
    Str(String),
    Date(i64),
    NaiveDateTime(i64),
    AwareDateTime(i64),
    Tuple(Vec<PyKey>),
}

fn num_key_f64(f: f64) -> NumKey {
    if f.is_nan() {
        NumKey::NaN
    } else if f.is_finite() && f.fract() == 0.0 {
        NumKey::Int(Int::from_integral_f64(f))
    } else {
        NumKey::Frac(f.to_bits())
    }
}

/// The dict key ruamel would use, or Err with Python's complaint for unhashable keys
/// (mappings; sequences become tuples, which must not hold sequences or mappings).
pub(crate) fn py_key(v: &Value) -> Result<PyKey, String> {
    scalar_key(v).map_or_else(
        || match v {
            Value::Seq(items) => items
                .iter()
                .map(|i| scalar_key(i).ok_or_else(|| "unhashable type: 'list' inside a tuple key".to_string()))
                .collect::<Result<Vec<_>, _>>()
                .map(PyKey::Tuple),
            _ => Err("found unhashable key".into()),
        },
        Ok,
    )
}

fn scalar_key(v: &Value) -> Option<PyKey> {
    Some(match v {
        Value::Null { .. } => PyKey::None,
        Value::Bool { value, .. } => PyKey::Num(NumKey::Int(Int::from_i64(i64::from(*value)))),
        Value::Int { value, .. } => PyKey::Num(NumKey::Int(value.clone())),
        Value::Float { value, .. } => PyKey::Num(num_key_f64(*value)),
        Value::Str(s) => PyKey::Str(s.clone()),
        Value::Timestamp { value, .. } => match &value.time {
            None => PyKey::Date(value.instant_micros()),
            Some(t) if t.offset_minutes.is_some() => PyKey::AwareDateTime(value.instant_micros()),
            Some(_) => PyKey::NaiveDateTime(value.instant_micros()),
        },
        Value::Seq(_) | Value::Map(_) => return None,
    })
}

/// A key that `json.dumps` accepts, as a number for ordering purposes.
#[derive(Clone, Copy)]
pub(crate) enum JsonKeyNum<'a> {
    Int(&'a Int),
    Bool(bool),
    Float(f64),
}

/// Python's `a < b` between numbers (False whenever NaN is involved).
pub(crate) fn num_lt(a: JsonKeyNum, b: JsonKeyNum) -> bool {
    num_cmp(a, b) == Some(Ordering::Less)
}

fn num_cmp(a: JsonKeyNum, b: JsonKeyNum) -> Option<Ordering> {
    use JsonKeyNum::{Bool, Float, Int};
    let bool_int = |b: bool| crate::num::Int::from_i64(i64::from(b));
    match (a, b) {
        (Float(x), Float(y)) => x.partial_cmp(&y),
        (Int(i), Float(f)) => i.cmp_f64(f),
        (Float(f), Int(i)) => i.cmp_f64(f).map(Ordering::reverse),
        (Bool(x), Float(f)) => bool_int(x).cmp_f64(f),
        (Float(f), Bool(x)) => bool_int(x).cmp_f64(f).map(Ordering::reverse),
        (Int(i), Int(j)) => Some(i.cmp(j)),
        (Int(i), Bool(x)) => Some(i.cmp(&bool_int(x))),
        (Bool(x), Int(i)) => Some(bool_int(x).cmp(i)),
        (Bool(x), Bool(y)) => Some(x.cmp(&y)),
    }
}

/// CPython's `list.sort` for fewer than 64 items (count_run, then binary insertion sort),
/// reproduced because with NaN keys `<` is not a total order and the result depends on the
/// algorithm. Returns None for 64 or more items with such an order (not reproduced).
pub(crate) fn python_sort<T: Copy>(items: &mut [T], lt: impl Fn(T, T) -> bool, total_order: bool) -> Option<()> {
    let n = items.len();
    if total_order {
        items.sort_by(|a, b| {
            if lt(*a, *b) {
                Ordering::Less
            } else if lt(*b, *a) {
                Ordering::Greater
            } else {
                Ordering::Equal
            }
        });
        return Some(());
    }
    if n >= 64 {
        return None;
    }
    if n < 2 {
        return Some(());
    }
    // count_run
    let mut run = 2;
    if lt(items[1], items[0]) {
        while run < n && lt(items[run], items[run - 1]) {
            run += 1;
        }
        items[..run].reverse();
    } else {
        while run < n && !lt(items[run], items[run - 1]) {
            run += 1;
        }
    }
    // binarysort(lo, hi, start = run)
    for start in run..n {
        let pivot = items[start];
        let (mut l, mut r) = (0, start);
        while l < r {
            let p = l + ((r - l) >> 1);
            if lt(pivot, items[p]) {
                r = p;
            } else {
                l = p + 1;
            }
        }
        items.copy_within(l..start, l + 1);
        items[l] = pivot;
    }
    Some(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn python_equal_keys_collide() {
        let one = py_key(&Value::Int { value: Int::from_i64(1), text: "1".into() }).unwrap();
        let one_f = py_key(&Value::Float { value: 1.0, text: "1.0".into() }).unwrap();
        let t = py_key(&Value::Bool { value: true, text: "true".into() }).unwrap();
        assert_eq!(one, one_f);
        assert_eq!(one, t);
        let half = py_key(&Value::Float { value: 0.5, text: "0.5".into() }).unwrap();
        assert_ne!(one, half);
        assert!(py_key(&Value::Map(Default::default())).is_err());
    }

    #[test]
    fn small_sort_matches_cpython_with_nan() {
        // Python: sorted([3.0, nan, 1.0, 2.0]) == [3.0, nan, 1.0, 2.0]
        let mut v = [3.0f64, f64::NAN, 1.0, 2.0];
        python_sort(&mut v, |a, b| a < b, false).unwrap();
        assert_eq!(format!("{v:?}"), "[3.0, NaN, 1.0, 2.0]");
        // Python: sorted([2.0, 1.0, nan, 0.5]) == [0.5, 1.0, 2.0, nan]
        let mut v = [2.0f64, 1.0, f64::NAN, 0.5];
        python_sort(&mut v, |a, b| a < b, false).unwrap();
        assert_eq!(format!("{v:?}"), "[0.5, 1.0, 2.0, NaN]");
    }
}
