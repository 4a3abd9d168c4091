//! The canonical tree: a loaded YAML value with mappings as ordered sets of entries (so key order
//! and layout are gone) and scalars as their resolved values (so quoting, `0x1F` against `31`,
//! `True` against `true` are gone), on which each service's rules then rewrite spellings.

use std::collections::BTreeMap;

use doc2ci_yaml::Value;

/// A canonical YAML value. Mappings are sorted by key, sequences keep their order.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Node {
    Null,
    Bool(bool),
    /// Decimal digits of the value.
    Int(String),
    /// Python's `repr` of the value (`3.1` for `3.10`, `nan`, `inf`).
    Float(String),
    Str(String),
    /// A timestamp as written (rare in CI files; compared as text).
    Time(String),
    Seq(Vec<Node>),
    Map(BTreeMap<Node, Node>),
    /// A documented default the text leaves out, filled in so that writing it changes nothing
    /// ([`same`]). It is how the job runs, so it is a leaf the reference asks for in containment
    /// (an output that overrides it runs differently). Only where nothing else can set the key:
    /// a service fills none in a job that inherits, and [`crate::canonical`] drops those of the
    /// part of a file a fragment does not give (they become [`Node::Assumed`]).
    Default(Box<Node>),
    /// A default filled in where the rest of the file could set the key (the job around a list of
    /// steps): equal to the value as [`Node::Default`] is, but the text asks nothing of it. Kept,
    /// not removed, so that canonicalising again fills nothing in.
    Assumed(Box<Node>),
}

/// Equality of canonical forms: a default left out is the default written.
pub fn same(a: &Node, b: &Node) -> bool {
    match (a, b) {
        (Node::Default(x) | Node::Assumed(x), y) | (y, Node::Default(x) | Node::Assumed(x)) => same(x, y),
        (Node::Map(x), Node::Map(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| same(v, w)))
        }
        (Node::Seq(x), Node::Seq(y)) => x.len() == y.len() && x.iter().zip(y).all(|(v, w)| same(v, w)),
        _ => a == b,
    }
}

impl From<&Value> for Node {
    fn from(v: &Value) -> Node {
        match v {
            Value::Null { .. } => Node::Null,
            Value::Bool { value, .. } => Node::Bool(*value),
            Value::Int { value, text } => Node::Int(value.to_decimal().unwrap_or_else(|| text.clone())),
            Value::Float { value, .. } => Node::Float(doc2ci_yaml::py_float_repr(*value)),
            Value::Str(s) => Node::Str(s.clone()),
            Value::Timestamp { text, .. } => Node::Time(text.clone()),
            Value::Seq(items) => Node::Seq(items.iter().map(Node::from).collect()),
            Value::Map(m) => Node::Map(m.iter().map(|(k, v)| (Node::from(k), Node::from(v))).collect()),
        }
    }
}

/// A string key, as most CI keys are.
pub fn key(k: &str) -> Node {
    Node::Str(k.to_string())
}

impl Node {
    pub fn as_map(&self) -> Option<&BTreeMap<Node, Node>> {
        match self {
            Node::Map(m) => Some(m),
            _ => None,
        }
    }
    pub fn as_map_mut(&mut self) -> Option<&mut BTreeMap<Node, Node>> {
        match self {
            Node::Map(m) => Some(m),
            _ => None,
        }
    }
    pub fn as_seq(&self) -> Option<&[Node]> {
        match self {
            Node::Seq(s) => Some(s),
            _ => None,
        }
    }
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Node::Str(s) => Some(s),
            _ => None,
        }
    }
    pub fn get(&self, k: &str) -> Option<&Node> {
        self.as_map()?.get(&key(k))
    }
    pub fn get_mut(&mut self, k: &str) -> Option<&mut Node> {
        self.as_map_mut()?.get_mut(&key(k))
    }
    pub fn is_scalar(&self) -> bool {
        !matches!(self, Node::Seq(_) | Node::Map(_) | Node::Default(_) | Node::Assumed(_))
    }

    /// The string a runner sees for a scalar written where a string is expected: YAML resolved it
    /// first, so `3.10` is the number 3.1 and reaches the program as `3.1`.
    pub fn runner_string(&self) -> Option<String> {
        Some(match self {
            Node::Null => String::new(),
            Node::Bool(b) => b.to_string(),
            Node::Int(d) => d.clone(),
            // Python's repr writes integral floats as `18.0`; a runner's number-to-string does not.
            Node::Float(r) => r.strip_suffix(".0").unwrap_or(r).to_string(),
            Node::Str(s) | Node::Time(s) => s.clone(),
            Node::Seq(_) | Node::Map(_) | Node::Default(_) | Node::Assumed(_) => return None,
        })
    }

    /// An empty mapping or list, as written: a mapping may hold defaults filled in.
    pub fn is_bare(&self) -> bool {
        match self {
            Node::Map(m) => m.values().all(|v| matches!(v, Node::Default(_) | Node::Assumed(_))),
            Node::Seq(s) => s.is_empty(),
            _ => false,
        }
    }

    /// Number of leaves: scalars, defaults left out, and empty mappings or sequences (a structure
    /// with nothing in it still says something: `permissions: {}` grants nothing).
    pub fn leaves(&self) -> usize {
        match self {
            Node::Default(_) => 1,
            Node::Assumed(_) => 0,
            n if n.is_bare() => 1,
            Node::Map(m) => m.values().map(Node::leaves).sum(),
            Node::Seq(s) => s.iter().map(Node::leaves).sum(),
            _ => 1,
        }
    }

    /// Each leaf's path (`jobs.build.steps[1].run`) and value, in tree order.
    pub fn leaf_paths(&self) -> Vec<(String, String)> {
        let mut out = Vec::new();
        self.walk_leaves(String::new(), &mut out);
        out
    }

    fn walk_leaves(&self, path: String, out: &mut Vec<(String, String)>) {
        match self {
            Node::Assumed(_) => {}
            Node::Map(m) if !self.is_bare() => {
                for (k, v) in m {
                    let seg = k.label();
                    let p = if path.is_empty() { seg } else { format!("{path}.{seg}") };
                    v.walk_leaves(p, out);
                }
            }
            Node::Seq(s) if !s.is_empty() => {
                for (i, v) in s.iter().enumerate() {
                    v.walk_leaves(format!("{path}[{i}]"), out);
                }
            }
            leaf => out.push((path, leaf.label())),
        }
    }

    /// A short label for messages and leaf values.
    pub fn label(&self) -> String {
        match self {
            Node::Null => "null".into(),
            Node::Bool(b) => b.to_string(),
            Node::Int(s) | Node::Float(s) | Node::Time(s) => s.clone(),
            Node::Str(s) => s.clone(),
            n if n.is_bare() => if matches!(n, Node::Seq(_)) { "[]" } else { "{}" }.into(),
            Node::Seq(_) => "[…]".into(),
            Node::Map(_) => "{…}".into(),
            Node::Default(d) | Node::Assumed(d) => format!("{} (default)", d.label()),
        }
    }
}
