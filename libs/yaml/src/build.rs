//! Builds a [`Value`] tree from saphyr-parser events with ruamel's construction rules,
//! iteratively (an explicit stack, so nesting never recurses) and under [`Limits`].

use std::collections::HashMap;

use saphyr_parser::{Event, Marker, Parser, ScalarStyle, Tag};

use crate::pykey::{py_key, PyKey};
use crate::resolve::{construct_tagged, resolve_plain, Resolved};
use crate::{ErrorKind, Limits, Map, Options, Value, YamlError};

const CORE: &str = "tag:yaml.org,2002:";

fn err(kind: ErrorKind, at: Marker, message: impl Into<String>) -> YamlError {
    YamlError { kind, line: at.line(), column: at.col() + 1, message: message.into() }
}

/// How a collection's construction differs from a plain one.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Role {
    Plain,
    /// A mapping that is the value of `<<` (or an item of such a list): ruamel flattens it
    /// without constructing it, so duplicate keys in it do not raise.
    MergeSource,
    /// A sequence that is the value of `<<`.
    MergeList,
    /// GitLab `!reference [...]`: items are kept as their raw text.
    Reference,
}

enum Pending {
    Key(Value, Marker),
    Merge(Marker),
}

struct Entry {
    key: Value,
    value: Value,
    at: Marker,
}

enum Kind {
    Seq(Vec<Value>),
    Map { entries: Vec<Entry>, pending: Option<Pending>, merges: Vec<(Value, Marker)> },
}

struct Frame {
    kind: Kind,
    anchor: usize,
    nodes_at_start: usize,
    bytes_at_start: usize,
    role: Role,
}

struct Anchored {
    value: Value,
    nodes: usize,
    bytes: usize,
}

struct Builder<'a> {
    limits: &'a Limits,
    options: &'a Options,
    stack: Vec<Frame>,
    anchors: HashMap<usize, Anchored>,
    /// Nodes and scalar bytes in the tree, aliases expanded.
    tree_nodes: usize,
    tree_bytes: usize,
    /// Nodes and bytes copied to keep anchored values for later aliases.
    copied_nodes: usize,
    copied_bytes: usize,
    root: Option<Value>,
    documents: usize,
}

/// Loads the only document of `text` (null for a stream without one).
pub(crate) fn build(text: &str, limits: &Limits, options: &Options) -> Result<Value, YamlError> {
    let mut docs = build_stream(text, limits, options, Documents::One)?;
    debug_assert!(docs.len() <= 1);
    Ok(docs.pop().unwrap_or(Value::Null { text: String::new() }))
}

/// Loads every document of `text`, in order (none for a stream without one).
pub(crate) fn build_all(text: &str, limits: &Limits, options: &Options) -> Result<Vec<Value>, YamlError> {
    build_stream(text, limits, options, Documents::All)
}

/// How many documents a stream may hold.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Documents {
    /// ruamel's `load`: a second document is an error.
    One,
    /// ruamel's `load_all`.
    All,
}

/// The documents of the stream. The [`Limits`] on nodes and scalar bytes count the whole stream;
/// anchors are scoped to their document, as ruamel's composer resets them per document.
fn build_stream(text: &str, limits: &Limits, options: &Options, mode: Documents) -> Result<Vec<Value>, YamlError> {
    stray_document_end(text)?;
    let mut b = Builder {
        limits,
        options,
        stack: Vec::new(),
        anchors: HashMap::new(),
        tree_nodes: 0,
        tree_bytes: 0,
        copied_nodes: 0,
        copied_bytes: 0,
        root: None,
        documents: 0,
    };
    let mut docs = Vec::new();
    // saphyr adds a line break to a block scalar whose last line ends the input without one;
    // ruamel (like libyaml and the spec's `b-chomped-last`) does not.
    let unterminated_end = (!text.ends_with(['\n', '\r'])).then(|| text.chars().count());
    let mut parser = Parser::new_from_str(text);
    while let Some(next) = parser.next_event() {
        let (event, span) = next.map_err(|e| {
            // The scanner reads ahead through flow collections before the parser emits their
            // events, so its own nesting limit can trip before `max_depth` does.
            let kind = if e.info().contains("recursion limit") { ErrorKind::TooDeep } else { ErrorKind::Syntax };
            err(kind, *e.marker(), e.info())
        })?;
        let at = span.start;
        match event {
            Event::StreamEnd => break,
            Event::Nothing | Event::StreamStart => {}
            Event::DocumentStart(_) => {
                b.documents += 1;
                if mode == Documents::One && b.documents > 1 {
                    return Err(err(
                        ErrorKind::MultipleDocuments,
                        at,
                        "expected a single document in the stream, but found another document",
                    ));
                }
                // saphyr's event iterator keeps anchor names across documents (only its
                // `load` clears them), so an alias to an earlier document's anchor arrives
                // with that anchor's id: forgetting the values makes it undefined, as in ruamel.
                b.anchors.clear();
            }
            Event::DocumentEnd => {
                // The parser emits an empty scalar for an empty document, so a root is there.
                docs.push(b.root.take().unwrap_or(Value::Null { text: String::new() }));
            }
            Event::Scalar(mut value, style, anchor, tag) => {
                if matches!(style, ScalarStyle::Literal | ScalarStyle::Folded)
                    && unterminated_end == Some(span.end.index())
                    && value.ends_with('\n')
                {
                    value.to_mut().pop();
                }
                b.scalar(&value, style, anchor, tag.as_deref(), at)?
            }
            Event::Alias(id) => b.alias(id, at)?,
            Event::SequenceStart(anchor, tag) => b.open(true, anchor, tag.as_deref(), at)?,
            Event::MappingStart(anchor, tag) => b.open(false, anchor, tag.as_deref(), at)?,
            Event::SequenceEnd | Event::MappingEnd => b.close(at)?,
        }
    }
    Ok(docs)
}

/// A document-end marker (`...`) where no document is open: at the start of the stream, or right
/// after another one. ruamel's parser then starts an implicit document and fails on the marker
/// ("expected the node content, but found '<document end>'"); saphyr skips it, so an elided
/// example (`...` then the configuration, as real documentation writes it) would load.
fn stray_document_end(text: &str) -> Result<(), YamlError> {
    let marker =
        |l: &str, m: &str| l.strip_prefix(m).is_some_and(|rest| rest.is_empty() || rest.starts_with([' ', '\t', '#']));
    let mut open = false;
    for (i, line) in text.trim_start_matches('\u{feff}').lines().enumerate() {
        let t = line.trim_start_matches([' ', '\t']);
        if t.is_empty() || t.starts_with('#') {
            continue;
        }
        if marker(line, "...") {
            if !open {
                return Err(YamlError {
                    kind: ErrorKind::Syntax,
                    line: i + 1,
                    column: 1,
                    message: "while parsing a block node expected the node content, but found '<document end>'".into(),
                });
            }
            open = false;
        } else if !line.starts_with('%') {
            // `---` opens a document explicitly; any other line is content of an implicit one.
            open = true;
        }
    }
    Ok(())
}

fn full_tag(tag: &Tag) -> String {
    format!("{}{}", tag.handle, tag.suffix)
}

impl Builder<'_> {
    fn count(&mut self, nodes: usize, bytes: usize, at: Marker) -> Result<(), YamlError> {
        self.tree_nodes += nodes;
        self.tree_bytes += bytes;
        if self.tree_nodes + self.copied_nodes > self.limits.max_nodes {
            return Err(err(
                ErrorKind::TooManyNodes,
                at,
                format!("more than {} nodes after alias expansion", self.limits.max_nodes),
            ));
        }
        if self.tree_bytes + self.copied_bytes > self.limits.max_total_scalar_bytes {
            return Err(err(
                ErrorKind::ExpansionTooLarge,
                at,
                format!("more than {} bytes of scalars after alias expansion", self.limits.max_total_scalar_bytes),
            ));
        }
        Ok(())
    }

    /// The role of a collection opened at the current position.
    fn child_role(&self, is_seq: bool) -> Role {
        match self.stack.last() {
            Some(Frame { kind: Kind::Map { pending: Some(Pending::Merge(_)), .. }, .. }) => {
                if is_seq {
                    Role::MergeList
                } else {
                    Role::MergeSource
                }
            }
            Some(Frame { role: Role::MergeList, kind: Kind::Seq(_), .. }) if !is_seq => Role::MergeSource,
            _ => Role::Plain,
        }
    }

    fn in_reference(&self) -> bool {
        matches!(self.stack.last(), Some(Frame { role: Role::Reference, .. }))
    }

    fn scalar(
        &mut self,
        text: &str,
        style: ScalarStyle,
        anchor: usize,
        tag: Option<&Tag>,
        at: Marker,
    ) -> Result<(), YamlError> {
        if text.len() > self.limits.max_scalar_bytes {
            return Err(err(
                ErrorKind::ScalarTooLong,
                at,
                format!("scalar of {} bytes exceeds the limit of {} bytes", text.len(), self.limits.max_scalar_bytes),
            ));
        }
        let as_strings = self.options.timestamps_as_strings;
        let resolved = if self.in_reference() {
            Resolved::Value(Value::Str(text.to_string()))
        } else {
            match tag.map(full_tag) {
                None if style == ScalarStyle::Plain => resolve_plain(text, as_strings),
                None => Ok(Resolved::Value(Value::Str(text.to_string()))),
                // ruamel resolves a `!`-tagged scalar as if it were plain, even when quoted.
                Some(t) if t == "!" => resolve_plain(text, as_strings),
                Some(t) if t.starts_with(CORE) => construct_tagged(&t[CORE.len()..], text, as_strings),
                Some(t) if t == "!reference" && self.options.gitlab_reference_tag => {
                    return Err(err(ErrorKind::Construct, at, "a GitLab !reference tag needs a sequence"));
                }
                Some(t) => {
                    return Err(err(ErrorKind::Tag, at, format!("could not determine a constructor for the tag '{t}'")))
                }
            }
            .map_err(|m| err(ErrorKind::Construct, at, m))?
        };
        self.count(1, text.len(), at)?;
        let value = match resolved {
            Resolved::Value(v) => v,
            Resolved::Merge | Resolved::ValueKey => {
                let is_key_position =
                    matches!(self.stack.last(), Some(Frame { kind: Kind::Map { pending: None, .. }, .. }));
                match (resolved, is_key_position) {
                    (Resolved::Merge, true) => {
                        if let Some(Frame { kind: Kind::Map { pending, .. }, .. }) = self.stack.last_mut() {
                            *pending = Some(Pending::Merge(at));
                        }
                        return Ok(());
                    }
                    (Resolved::ValueKey, true) => Value::Str(text.to_string()),
                    (Resolved::Merge, false) => {
                        return Err(err(
                            ErrorKind::Tag,
                            at,
                            format!("could not determine a constructor for the tag '{CORE}merge'"),
                        ));
                    }
                    _ => {
                        return Err(err(
                            ErrorKind::Tag,
                            at,
                            format!("could not determine a constructor for the tag '{CORE}value'"),
                        ));
                    }
                }
            }
        };
        self.finish(value, anchor, 1, text.len(), at)
    }

    fn alias(&mut self, id: usize, at: Marker) -> Result<(), YamlError> {
        let Some(anchored) = self.anchors.get(&id) else {
            let recursive = self.stack.iter().any(|f| f.anchor == id);
            let message = if recursive {
                "recursive alias: it refers to a node that contains it"
            } else {
                "found undefined alias"
            };
            return Err(err(ErrorKind::Alias, at, message));
        };
        let (nodes, bytes) = (anchored.nodes, anchored.bytes);
        // Check the budget before copying, so a bomb never allocates past the limits.
        self.count(nodes, bytes, at)?;
        let value = self.anchors[&id].value.clone();
        let value = if self.in_reference() {
            match value.scalar_text() {
                Some(t) => Value::Str(t.to_string()),
                None => return Err(err(ErrorKind::Construct, at, "GitLab !reference items must be scalars")),
            }
        } else {
            value
        };
        self.attach(value, at)
    }

    fn open(&mut self, is_seq: bool, anchor: usize, tag: Option<&Tag>, at: Marker) -> Result<(), YamlError> {
        if self.stack.len() >= self.limits.max_depth {
            return Err(err(ErrorKind::TooDeep, at, format!("nesting deeper than {} levels", self.limits.max_depth)));
        }
        if self.in_reference() {
            return Err(err(ErrorKind::Construct, at, "GitLab !reference items must be scalars"));
        }
        let kind_name = if is_seq { "sequence" } else { "mapping" };
        let own = if is_seq { "seq" } else { "map" };
        let mut role = self.child_role(is_seq);
        if let Some(t) = tag.map(full_tag) {
            if t == "!reference" && self.options.gitlab_reference_tag {
                if !is_seq {
                    return Err(err(ErrorKind::Construct, at, "a GitLab !reference tag needs a sequence"));
                }
                role = Role::Reference;
            } else if let Some(suffix) = t.strip_prefix(CORE) {
                match suffix {
                    s if s == own => {}
                    "set" | "omap" | "pairs" => {
                        return Err(err(ErrorKind::Tag, at, format!("unsupported tag '{t}'")));
                    }
                    "str" | "int" | "float" | "bool" | "null" | "timestamp" | "binary" => {
                        return Err(err(
                            ErrorKind::Construct,
                            at,
                            format!("expected a scalar node, but found {kind_name}"),
                        ));
                    }
                    "seq" | "map" => {
                        return Err(err(
                            ErrorKind::Construct,
                            at,
                            format!("expected a {suffix} node, but found {kind_name}"),
                        ));
                    }
                    _ => {
                        return Err(err(
                            ErrorKind::Tag,
                            at,
                            format!("could not determine a constructor for the tag '{t}'"),
                        ))
                    }
                }
            } else if t != "!" {
                return Err(err(ErrorKind::Tag, at, format!("could not determine a constructor for the tag '{t}'")));
            }
        }
        self.count(1, 0, at)?;
        let kind = if is_seq {
            Kind::Seq(Vec::new())
        } else {
            Kind::Map { entries: Vec::new(), pending: None, merges: Vec::new() }
        };
        self.stack.push(Frame {
            kind,
            anchor,
            nodes_at_start: self.tree_nodes - 1,
            bytes_at_start: self.tree_bytes,
            role,
        });
        Ok(())
    }

    fn close(&mut self, at: Marker) -> Result<(), YamlError> {
        let frame = self.stack.pop().expect("the parser balances collection events");
        let value = match frame.kind {
            Kind::Seq(items) => Value::Seq(items),
            Kind::Map { entries, pending, merges } => {
                debug_assert!(pending.is_none(), "the parser emits a value for every key");
                Value::Map(self.construct_map(entries, merges, frame.role)?)
            }
        };
        let nodes = self.tree_nodes - frame.nodes_at_start;
        let bytes = self.tree_bytes - frame.bytes_at_start;
        self.finish(value, frame.anchor, nodes, bytes, at)
    }

    /// ruamel's `flatten_mapping` + `construct_mapping`.
    fn construct_map(
        &self,
        entries: Vec<Entry>,
        mut merges: Vec<(Value, Marker)>,
        role: Role,
    ) -> Result<Map, YamlError> {
        if merges.len() > 1 {
            return Err(err(
                ErrorKind::DuplicateKey { path: self.path("<<") },
                merges[1].1,
                "found duplicate merge key \"<<\"",
            ));
        }
        let mut out: Vec<(Value, Value)> = Vec::with_capacity(entries.len());
        let mut index: HashMap<PyKey, usize> = HashMap::with_capacity(entries.len());
        let mut upsert = |k: Value, v: Value, at: Marker, dup_is_error: bool| -> Result<(), YamlError> {
            let key = py_key(&k).map_err(|m| err(ErrorKind::Construct, at, m))?;
            match index.get(&key) {
                Some(_) if dup_is_error => {
                    let shown = k.scalar_text().map_or_else(|| crate::py_str_key(&k), str::to_string);
                    let path = self.path(&shown);
                    let message = format!("found duplicate key \"{shown}\" at {path}");
                    Err(err(ErrorKind::DuplicateKey { path }, at, message))
                }
                Some(&i) => {
                    out[i].1 = v;
                    Ok(())
                }
                None => {
                    index.insert(key, out.len());
                    out.push((k, v));
                    Ok(())
                }
            }
        };
        if let Some((merge_value, merge_at)) = merges.pop() {
            let sources: Vec<Map> = match merge_value {
                Value::Map(m) => vec![m],
                Value::Seq(items) => {
                    let mut maps = Vec::with_capacity(items.len());
                    for item in items {
                        match item {
                            Value::Map(m) => maps.push(m),
                            other => {
                                return Err(err(
                                    ErrorKind::Construct,
                                    merge_at,
                                    format!("expected a mapping for merging, but found {}", other.kind()),
                                ));
                            }
                        }
                    }
                    maps.reverse();
                    maps
                }
                other => {
                    return Err(err(
                        ErrorKind::Construct,
                        merge_at,
                        format!("expected a mapping or list of mappings for merging, but found {}", other.kind()),
                    ));
                }
            };
            // ruamel merges nothing when every merged mapping is empty (`<<: {}`, `<<: []`): the
            // mapping's own keys are then checked for duplicates as in any mapping (found by the
            // differential fuzz test); otherwise they override merged keys and each other.
            let dup_is_error = role != Role::MergeSource && sources.iter().all(|m| m.entries.is_empty());
            for source in sources {
                for (k, v) in source.entries {
                    upsert(k, v, merge_at, false)?;
                }
            }
            for e in entries {
                upsert(e.key, e.value, e.at, dup_is_error)?;
            }
        } else {
            let dup_is_error = role != Role::MergeSource;
            for e in entries {
                upsert(e.key, e.value, e.at, dup_is_error)?;
            }
        }
        Ok(Map { entries: out })
    }

    /// JSON pointer of `leaf` inside the innermost mapping just closed (or being built).
    fn path(&self, leaf: &str) -> String {
        let esc = |s: &str| s.replace('~', "~0").replace('/', "~1");
        let mut p = String::new();
        for f in &self.stack {
            p.push('/');
            match &f.kind {
                Kind::Seq(items) => p.push_str(&items.len().to_string()),
                Kind::Map { pending: Some(Pending::Key(k, _)), .. } => p.push_str(&esc(k.scalar_text().unwrap_or("?"))),
                Kind::Map { pending: Some(Pending::Merge(_)), .. } => p.push_str("<<"),
                Kind::Map { pending: None, .. } => p.push('?'),
            }
        }
        p.push('/');
        p.push_str(&esc(leaf));
        p
    }

    /// Registers an anchor (keeping a copy, charged to the budget) and attaches the value.
    fn finish(&mut self, value: Value, anchor: usize, nodes: usize, bytes: usize, at: Marker) -> Result<(), YamlError> {
        if anchor != 0 {
            self.copied_nodes += nodes;
            self.copied_bytes += bytes;
            self.count(0, 0, at)?;
            self.anchors.insert(anchor, Anchored { value: value.clone(), nodes, bytes });
        }
        self.attach(value, at)
    }

    fn attach(&mut self, value: Value, at: Marker) -> Result<(), YamlError> {
        match self.stack.last_mut() {
            None => self.root = Some(value),
            Some(Frame { kind: Kind::Seq(items), .. }) => items.push(value),
            Some(Frame { kind: Kind::Map { entries, pending, merges }, .. }) => match pending.take() {
                None => *pending = Some(Pending::Key(value, at)),
                Some(Pending::Key(key, key_at)) => entries.push(Entry { key, value, at: key_at }),
                Some(Pending::Merge(merge_at)) => merges.push((value, merge_at)),
            },
        }
        Ok(())
    }
}
