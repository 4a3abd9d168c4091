//! YAML loading for doc2ci, shared by the validate, score and crawl stages.
//!
//! Owns: text → YAML tree, with bounds. Never validates or scores.
//!
//! The study's peer loads YAML with ruamel.yaml's safe loader (YAML 1.2), so this crate
//! builds its own tree from `saphyr-parser` events and reproduces that loader's semantics
//! rather than a generic YAML library's:
//!
//! * **Resolution** follows ruamel's YAML 1.2 resolver: `on`/`yes`/`no`/`y` stay strings;
//!   booleans are `true|True|TRUE|false|False|FALSE`; null is `~|null|Null|NULL|` (empty);
//!   ints accept `_`, `0b`, `0o`, `0x` and leading zeros (`017` is decimal 17); floats include
//!   `1.`, `1e5`, `._5`, `.inf`, `.nan`; `YYYY-MM-DD[ time]` is a timestamp (a Python
//!   `date`/`datetime`, whose `str()` [`canon_json`] prints). Ints are unbounded.
//! * **Anchors and aliases** are expanded into copies; **merge keys** `<<` take a mapping or
//!   a list of mappings (earlier ones win, the mapping's own keys win over all).
//! * **Duplicate keys** are an error, as ruamel.yaml ≥ 0.16 raises `DuplicateKeyError` by
//!   default: [`ErrorKind::DuplicateKey`] carries the key's path. Python's key equality
//!   applies (`1`, `1.0` and `true` are the same key). ruamel skips the check in a mapping
//!   that has a `<<` key (there the last value wins), and so does this crate.
//! * **More than one document** is an error of [`load`] ([`ErrorKind::MultipleDocuments`]), as
//!   ruamel's `load` raises "expected a single document in the stream"; [`load_all`] returns
//!   every document, as ruamel's `load_all` does.
//! * **Hostile input** is bounded by [`Limits`]: input size, nesting depth, nodes and scalar
//!   bytes after alias expansion, scalar length; each fails fast with an error.
//!
//! Known differences from ruamel (none occurs in the study's data): a `%YAML 1.1` directive
//! does not switch to YAML 1.1 resolution; `!!binary`, `!!set`, `!!omap` and `!!pairs` are
//! rejected instead of built; recursive aliases are rejected (Python builds cyclic objects);
//! NEL and U+2028/U+2029 are not line breaks (YAML 1.2, unlike ruamel's reader); the
//! grammar is saphyr's, which may accept or reject a few malformed inputs differently
//! (see the validate stage's DISAGREEMENTS.md for the measured cases). A `...` with no
//! document open is an error, as in ruamel (saphyr skips it). One case met in real
//! documentation (CircleCI's) still differs: a flow mapping of a block mapping's value whose
//! closing `}` sits at column 0 is rejected here and loaded by ruamel.
//!
//! The differential fuzz test (`tests/fuzz_ruamel.rs`, generated and mutated CI-like documents
//! against ruamel) names every kind of difference it meets, each with the texts it covers; beyond
//! the ones above, all on malformed or unusual input: a quoted scalar continued over lines at an
//! indentation saphyr refuses (ruamel accepts any); surrogate escapes (`"\ud83d"`: ruamel keeps
//! lone surrogates, doc2ci refuses them); a comment with no space after a closing quote or bracket
//! (`"x"#`, ruamel takes it as a comment); `:` just before a flow indicator (`{a:}`: key `a` with
//! an empty value here, key `a:` in ruamel); tabs outside quoted scalars, which YAML 1.2 allows in
//! more places than ruamel's reader; a flow collection continued at column 0; a block scalar
//! whose leading blank lines are less indented than its text (ruamel refuses); unknown
//! directives (ignored here, refused by ruamel); an indicator where a node should start
//! (`[x,: y]`, `[?x]`, a block scalar header alone on its line). `bench/fuzz.sh` runs it longer
//! and lists what it finds beyond these.

mod build;
mod cursor;
mod json;
mod num;
mod pykey;
mod resolve;
mod timestamp;

pub use json::{canon_json, py_str_key, to_json};
pub use num::{py_float_repr, Int};
pub use timestamp::{TimeOfDay, Timestamp};

use std::fmt;

/// Bounds that make hostile input fail fast with bounded memory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Refused before parsing starts.
    pub max_input_bytes: usize,
    /// Nesting of sequences and mappings. Python's recursion limit makes ruamel fail a
    /// little above 400 levels; real CI files stay far below the default.
    pub max_depth: usize,
    /// Nodes materialised, counting every alias expansion and the copy kept per anchor:
    /// this is what stops alias bombs. [`load_all`] counts all documents together.
    pub max_nodes: usize,
    /// Length of one scalar's text.
    pub max_scalar_bytes: usize,
    /// Scalar text materialised in total after alias expansion (a bomb of long strings), over
    /// all documents for [`load_all`].
    pub max_total_scalar_bytes: usize,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            max_input_bytes: 8 << 20,
            max_depth: 128,
            max_nodes: 250_000,
            max_scalar_bytes: 1 << 20,
            max_total_scalar_bytes: 32 << 20,
        }
    }
}

/// Loader variants: plain ruamel safe loading, or the tweaks check-jsonschema applies.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Options {
    /// Load timestamps as their text, as check-jsonschema does (JSON Schema `format`s apply
    /// to strings); otherwise they are [`Value::Timestamp`] and invalid dates are errors.
    pub timestamps_as_strings: bool,
    /// Accept GitLab's `!reference [job, key]` tag as a list of its items' texts, as
    /// check-jsonschema's gitlab-ci transform does.
    pub gitlab_reference_tag: bool,
}

impl Options {
    /// What check-jsonschema loads for a service's schema check.
    pub fn check_jsonschema(gitlab: bool) -> Options {
        Options { timestamps_as_strings: true, gitlab_reference_tag: gitlab }
    }
}

/// A loaded YAML value. Scalars keep the text they were written with, because the score
/// stage labels tree nodes with numbers "as written" (`0x1F`, not `31`).
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    Null {
        text: String,
    },
    Bool {
        value: bool,
        text: String,
    },
    Int {
        value: Int,
        text: String,
    },
    Float {
        value: f64,
        text: String,
    },
    /// A string's text is its value.
    Str(String),
    Timestamp {
        value: Timestamp,
        text: String,
    },
    Seq(Vec<Value>),
    Map(Map),
}

/// A mapping in insertion order, as a Python `dict` built by ruamel keeps it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Map {
    entries: Vec<(Value, Value)>,
}

impl Map {
    pub fn len(&self) -> usize {
        self.entries.len()
    }
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
    pub fn iter(&self) -> impl Iterator<Item = (&Value, &Value)> {
        self.entries.iter().map(|(k, v)| (k, v))
    }
    pub fn entries(&self) -> &[(Value, Value)] {
        &self.entries
    }
    pub fn keys(&self) -> impl Iterator<Item = &Value> {
        self.entries.iter().map(|(k, _)| k)
    }
    /// The value under a string key (`on` is a string key in YAML 1.2).
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.entries.iter().find(|(k, _)| matches!(k, Value::Str(s) if s == key)).map(|(_, v)| v)
    }
    pub fn contains_key(&self, key: &str) -> bool {
        self.get(key).is_some()
    }
}

impl Value {
    pub fn is_mapping(&self) -> bool {
        matches!(self, Value::Map(_))
    }
    pub fn is_sequence(&self) -> bool {
        matches!(self, Value::Seq(_))
    }
    pub fn is_null(&self) -> bool {
        matches!(self, Value::Null { .. })
    }
    pub fn as_map(&self) -> Option<&Map> {
        match self {
            Value::Map(m) => Some(m),
            _ => None,
        }
    }
    pub fn as_seq(&self) -> Option<&[Value]> {
        match self {
            Value::Seq(s) => Some(s),
            _ => None,
        }
    }
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::Str(s) => Some(s),
            _ => None,
        }
    }
    /// A scalar's text as written (a string's value); None for collections.
    pub fn scalar_text(&self) -> Option<&str> {
        match self {
            Value::Null { text }
            | Value::Bool { text, .. }
            | Value::Int { text, .. }
            | Value::Float { text, .. }
            | Value::Timestamp { text, .. } => Some(text),
            Value::Str(s) => Some(s),
            Value::Seq(_) | Value::Map(_) => None,
        }
    }
    /// The YAML kind, as ruamel names nodes in its messages.
    pub fn kind(&self) -> &'static str {
        match self {
            Value::Seq(_) => "sequence",
            Value::Map(_) => "mapping",
            _ => "scalar",
        }
    }
}

/// Why loading failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ErrorKind {
    InputTooLarge,
    TooDeep,
    TooManyNodes,
    ScalarTooLong,
    ExpansionTooLarge,
    /// Not printable per YAML (and ruamel's reader): control characters, DEL, U+FFFE…
    UnacceptableCharacter,
    /// The grammar (saphyr's scanner and parser).
    Syntax,
    /// `path` is the JSON pointer of the duplicated key, e.g. `/jobs/build/runs-on`.
    DuplicateKey {
        path: String,
    },
    MultipleDocuments,
    /// Undefined or recursive alias.
    Alias,
    /// A tag the safe loader has no constructor for (`!Ref`, `!!python/...`).
    Tag,
    /// A value its type cannot hold: `2024-13-45`, `0x_`, an unhashable key, a bad merge.
    Construct,
}

/// A load error, located at a 1-based line and column (columns count characters).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct YamlError {
    pub kind: ErrorKind,
    pub line: usize,
    pub column: usize,
    pub message: String,
}

impl fmt::Display for YamlError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} (line {}, column {})", self.message, self.line, self.column)
    }
}

impl std::error::Error for YamlError {}

/// Loads one YAML document as ruamel.yaml's `YAML(typ='safe').load` would.
pub fn load(text: &str, limits: &Limits) -> Result<Value, YamlError> {
    load_with(text, limits, &Options::default())
}

/// [`load`] with loader [`Options`].
pub fn load_with(text: &str, limits: &Limits, options: &Options) -> Result<Value, YamlError> {
    check_input(text, limits)?;
    build::build(text, limits, options)
}

/// Loads every document of a stream as `list(YAML(typ='safe').load_all(text))` would: none for
/// an empty (or comments-only) text, a null for each empty document (`---` alone gives one).
/// Anchors are scoped to their document; an error in any document fails the whole call; the
/// [`Limits`] bound the whole stream (nodes and scalar bytes are totals over all documents).
pub fn load_all(text: &str, limits: &Limits) -> Result<Vec<Value>, YamlError> {
    load_all_with(text, limits, &Options::default())
}

/// [`load_all`] with loader [`Options`].
pub fn load_all_with(text: &str, limits: &Limits, options: &Options) -> Result<Vec<Value>, YamlError> {
    check_input(text, limits)?;
    build::build_all(text, limits, options)
}

/// The checks on the whole input that come before parsing.
fn check_input(text: &str, limits: &Limits) -> Result<(), YamlError> {
    if text.len() > limits.max_input_bytes {
        return Err(YamlError {
            kind: ErrorKind::InputTooLarge,
            line: 1,
            column: 1,
            message: format!("input of {} bytes exceeds the limit of {} bytes", text.len(), limits.max_input_bytes),
        });
    }
    check_printable(text)
}

/// YAML's c-printable set, which ruamel's reader enforces on the whole stream.
fn check_printable(text: &str) -> Result<(), YamlError> {
    let printable = |c: char| {
        matches!(c, '\t' | '\n' | '\r' | ' '..='~' | '\u{85}' | '\u{A0}'..='\u{D7FF}' | '\u{E000}'..='\u{FFFD}')
            || c >= '\u{10000}'
    };
    let Some(pos) = text.find(|c: char| !printable(c)) else {
        return Ok(());
    };
    let before = &text[..pos];
    let line = before.matches('\n').count() + 1;
    let column = before[before.rfind('\n').map_or(0, |i| i + 1)..].chars().count() + 1;
    let c = text[pos..].chars().next().expect("found a character at pos");
    Err(YamlError {
        kind: ErrorKind::UnacceptableCharacter,
        line,
        column,
        message: format!("unacceptable character #x{:04x}: special characters are not allowed", c as u32),
    })
}

#[cfg(test)]
mod tests;
