//! Import: turns records of existing files into `RawPair`s and `Generation`s.
//!
//! Owns: the column mappings of the predecessor study's files and of CSV/JSONL/Parquet. Never
//! opens a file and never dedupes: it attaches outputs to the pairs it is given.
//!
//! The engine opens files (and decompresses them); this crate only sees readers and records,
//! so the same mapping serves CSV, JSONL and Parquet and is testable on strings.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::io::{BufRead, Read};

use doc2ci_rows::{Generation, Pair, RawPair};

/// A bad record: the engine adds the file name, so the message names file and line.
#[derive(Debug, Clone, PartialEq)]
pub struct ImportError {
    pub line: u64,
    pub message: String,
    /// Set when the record lacks a whole column (not just a value): every record of a file with
    /// a header or schema lacks it too, so this is a file-level error, not a row to skip.
    pub missing_column: Option<String>,
    /// Set when the file cannot be read from this record on (a corrupt Parquet page): the rest
    /// would be lost, so this is never a row to skip.
    pub unreadable: bool,
}

impl ImportError {
    pub fn at(line: u64, message: impl Into<String>) -> Self {
        Self { line, message: message.into(), missing_column: None, unreadable: false }
    }

    pub fn unreadable(line: u64, message: impl Into<String>) -> Self {
        Self { unreadable: true, ..Self::at(line, message) }
    }
}

impl fmt::Display for ImportError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}: {}", self.line, self.message)
    }
}

impl std::error::Error for ImportError {}

/// One input record: its first line in the file and its fields by column name.
#[derive(Debug, Clone, Default)]
pub struct Record {
    pub line: u64,
    pub fields: HashMap<String, Option<String>>,
}

/// Which input column feeds which field. Keys: id, url, title, description, reference,
/// output, raw_output, latency_s, latency_ms, error.
#[derive(Debug, Clone)]
pub struct ColumnMap(BTreeMap<String, String>);

/// A column mapping that cannot be used (an unknown field renamed).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ColumnError(pub String);

impl ColumnMap {
    /// The predecessor study's CSV columns.
    pub fn llm4ci() -> Self {
        let m = [
            ("id", "ID"),
            ("url", "URL"),
            ("title", "Title"),
            ("description", "Description"),
            ("reference", "Code"),
            ("output", "LLM_YML_Output"),
            ("latency_s", "Time"),
        ];
        Self(m.iter().map(|(a, b)| (a.to_string(), b.to_string())).collect())
    }

    /// Generic formats default to the field names themselves; `overrides` renames.
    pub fn for_format(format: &str, overrides: &BTreeMap<String, String>) -> Result<Self, ColumnError> {
        Self::mapped(format, overrides).map_err(ColumnError)
    }

    fn mapped(format: &str, overrides: &BTreeMap<String, String>) -> Result<Self, String> {
        const FIELDS: &[&str] = &[
            "id",
            "url",
            "title",
            "description",
            "reference",
            "output",
            "raw_output",
            "latency_s",
            "latency_ms",
            "error",
        ];
        let mut base = if format == "llm4ci" {
            Self::llm4ci()
        } else {
            Self(FIELDS.iter().map(|f| (f.to_string(), f.to_string())).collect())
        };
        // A released benchmark (`doc2ci export benchmark`) identifies pairs by their pair_id.
        if format == "benchmark" {
            base.0.insert("id".into(), "pair_id".into());
        }
        for (k, v) in overrides {
            if !FIELDS.contains(&k.as_str()) {
                return Err(format!("unknown field `{k}` in `columns` (fields: {})", FIELDS.join(", ")));
            }
            base.0.insert(k.clone(), v.clone());
        }
        Ok(base)
    }

    /// The input columns this mapping reads (a columnar file need not decode the others).
    pub fn columns(&self) -> Vec<String> {
        self.0.values().cloned().collect()
    }

    fn col<'a>(&'a self, field: &'a str) -> &'a str {
        self.0.get(field).map(String::as_str).unwrap_or(field)
    }
}

/// Passes bytes through and remembers where each `\n` is, so records get their true line: the csv
/// crate places a record after a CRLF terminator at its `\n`, one line too early.
struct LineFeeds<R> {
    inner: R,
    offset: u64,
    feeds: std::rc::Rc<std::cell::RefCell<LineIndex>>,
}

#[derive(Default)]
struct LineIndex {
    /// Offsets of the `\n`s not yet passed by a lookup (lookups come in increasing order).
    ahead: std::collections::VecDeque<u64>,
    passed: u64,
    /// Bytes read since the last record was handed out: one record may not hold more than
    /// [`MAX_RECORD_BYTES`] (the csv reader would buffer it whole).
    since_record: u64,
}

impl LineIndex {
    /// The 1-based line of the record that csv says starts at `byte`.
    fn line(&mut self, byte: u64) -> u64 {
        while self.ahead.front().is_some_and(|&x| x < byte) {
            self.ahead.pop_front();
            self.passed += 1;
        }
        // A record placed on the `\n` of a CRLF really starts on the next line.
        self.passed + 1 + u64::from(self.ahead.front() == Some(&byte))
    }
}

impl<R: Read> Read for LineFeeds<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let mut f = self.feeds.borrow_mut();
        if f.since_record > MAX_RECORD_BYTES as u64 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("a record longer than {} MiB (after line {})", MAX_RECORD_BYTES >> 20, f.passed + 1),
            ));
        }
        let n = self.inner.read(buf)?;
        f.since_record += n as u64;
        for (i, b) in buf[..n].iter().enumerate() {
            if *b == b'\n' {
                f.ahead.push_back(self.offset + i as u64);
            }
        }
        self.offset += n as u64;
        Ok(n)
    }
}

/// Reads CSV records with a header; gzip is the caller's business.
pub fn csv_records<R: Read>(reader: R) -> Result<impl Iterator<Item = Result<Record, ImportError>>, ImportError> {
    let feeds = std::rc::Rc::new(std::cell::RefCell::new(LineIndex::default()));
    let reader = LineFeeds { inner: reader, offset: 0, feeds: feeds.clone() };
    let mut rdr = csv::ReaderBuilder::new().has_headers(true).flexible(false).from_reader(reader);
    let headers = rdr
        .headers()
        .map_err(|e| ImportError::at(1, format!("cannot read CSV header: {e}")))?
        .iter()
        .map(|h| h.trim_start_matches('\u{feff}').to_string())
        .collect::<Vec<_>>();
    Ok(rdr.into_records().map(move |r| {
        let rec = r.map_err(|e| {
            let line = e.position().map_or(0, |p| feeds.borrow_mut().line(p.byte()));
            ImportError::at(line, format!("malformed CSV: {}", csv_error_text(&e)))
        })?;
        let line = rec.position().map_or(0, |p| feeds.borrow_mut().line(p.byte()));
        feeds.borrow_mut().since_record = 0;
        let fields = headers.iter().cloned().zip(rec.iter().map(|v| Some(v.to_string()))).collect();
        Ok(Record { line, fields })
    }))
}

fn csv_error_text(e: &csv::Error) -> String {
    match e.kind() {
        csv::ErrorKind::UnequalLengths { expected_len, len, .. } => {
            format!("{len} fields where the header has {expected_len}")
        }
        csv::ErrorKind::Utf8 { .. } => "invalid UTF-8".to_string(),
        _ => e.to_string(),
    }
}

/// The most one record (a CSV record, a JSON line) may hold: every field at the cell limit. It is
/// refused before it is buffered whole, so a hostile file costs this much memory at most.
pub const MAX_RECORD_BYTES: usize = 4 * MAX_CELL_BYTES;

/// The lines of `reader` (without their `\n`), numbered from 1; a line over `max` bytes is an
/// error naming its length, read and dropped without being held.
pub fn lines_bounded<R: BufRead>(mut reader: R, max: usize) -> impl Iterator<Item = (u64, Result<String, String>)> {
    let mut n = 0u64;
    std::iter::from_fn(move || {
        let (mut line, mut len, mut ended) = (Vec::new(), 0usize, false);
        loop {
            let buf = match reader.fill_buf() {
                Ok(b) => b,
                Err(e) => return Some((n + 1, Err(format!("cannot read line: {e}")))),
            };
            if buf.is_empty() {
                break;
            }
            let (take, nl) = match buf.iter().position(|b| *b == b'\n') {
                Some(i) => (i, true),
                None => (buf.len(), false),
            };
            if len + take <= max {
                line.extend_from_slice(&buf[..take]);
            }
            len += take;
            reader.consume(take + usize::from(nl));
            if nl {
                ended = true;
                break;
            }
        }
        if len == 0 && !ended {
            return None;
        }
        n += 1;
        if len > max {
            return Some((
                n,
                Err(format!("the line is {} MiB, over the {} MiB a record may hold", len >> 20, max >> 20)),
            ));
        }
        if line.last() == Some(&b'\r') {
            line.pop();
        }
        Some((n, String::from_utf8(line).map_err(|_| "cannot read line: not UTF-8".to_string())))
    })
}

/// Reads JSON Lines: one object per line; blank lines are allowed.
pub fn jsonl_records<R: BufRead>(reader: R) -> impl Iterator<Item = Result<Record, ImportError>> {
    lines_bounded(reader, MAX_RECORD_BYTES).filter_map(|(n, line)| {
        let line = match line {
            Ok(l) => l,
            Err(e) => return Some(Err(ImportError::at(n, e))),
        };
        if line.trim().is_empty() {
            return None;
        }
        let v: serde_json::Value = match serde_json::from_str(&line) {
            Ok(v) => v,
            Err(e) => return Some(Err(ImportError::at(n, format!("invalid JSON: {e}")))),
        };
        let serde_json::Value::Object(obj) = v else {
            return Some(Err(ImportError::at(n, "expected a JSON object")));
        };
        let fields = obj
            .into_iter()
            .map(|(k, v)| {
                let s = match v {
                    serde_json::Value::Null => None,
                    serde_json::Value::String(s) => Some(s),
                    other => Some(other.to_string()),
                };
                (k, s)
            })
            .collect();
        Some(Ok(Record { line: n, fields }))
    })
}

/// A cell larger than this is refused with an error naming its line and column: every later
/// stage holds a text several times over (rows, Arrow arrays, Parquet pages), and a CI file is never
/// this large (the largest of the llm4ci data is 18 KB). The validator refuses the same size.
pub const MAX_CELL_BYTES: usize = 8 << 20;

impl Record {
    /// Every field this record has, checked against [`MAX_CELL_BYTES`].
    pub fn check_sizes(&self) -> Result<(), ImportError> {
        match self.fields.iter().find(|(_, v)| v.as_ref().is_some_and(|v| v.len() > MAX_CELL_BYTES)) {
            Some((k, v)) => Err(ImportError::at(
                self.line,
                format!(
                    "column `{k}`: a cell of {} bytes exceeds the {} MiB limit",
                    v.as_ref().map_or(0, |v| v.len()),
                    MAX_CELL_BYTES >> 20
                ),
            )),
            None => Ok(()),
        }
    }

    fn get(&self, map: &ColumnMap, field: &str) -> Option<&str> {
        self.fields.get(map.col(field)).and_then(|v| v.as_deref())
    }
    fn require(&self, map: &ColumnMap, field: &str) -> Result<&str, ImportError> {
        match self.fields.get(map.col(field)) {
            Some(Some(v)) => Ok(v),
            Some(None) => Ok(""),
            None => {
                let mut have: Vec<&str> = self.fields.keys().map(String::as_str).collect();
                have.sort_unstable();
                Err(ImportError {
                    line: self.line,
                    message: format!(
                        "missing column `{}` (for {field}); the columns are: {}",
                        map.col(field),
                        have.join(", ")
                    ),
                    missing_column: Some(map.col(field).to_string()),
                    unreadable: false,
                })
            }
        }
    }
    fn id(&self, map: &ColumnMap) -> Result<String, ImportError> {
        let id = self.require(map, "id")?.trim();
        if id.is_empty() {
            return Err(ImportError::at(self.line, format!("empty `{}`", map.col("id"))));
        }
        Ok(id.to_string())
    }
}

/// A record as a pair of `service`, from source `source`, at `position` in it.
pub fn to_raw_pair(
    rec: &Record,
    map: &ColumnMap,
    service: &str,
    source: &str,
    position: u64,
) -> Result<RawPair, ImportError> {
    rec.check_sizes()?;
    let id = rec.id(map)?;
    let title = rec.require(map, "title")?.to_string();
    let description = rec.require(map, "description")?.to_string();
    let reference = rec.require(map, "reference")?.to_string();
    let url = rec.get(map, "url").unwrap_or("").to_string();
    Ok(RawPair {
        pair_id: doc2ci_rows::pair_id(service, &title, &description, &reference),
        service: service.into(),
        url,
        title,
        description,
        reference,
        source: source.into(),
        source_id: id,
        position,
    })
}

/// A model output before it is attached to a pair.
#[derive(Debug, Clone, PartialEq)]
pub struct OutputRecord {
    pub line: u64,
    pub id: String,
    pub output: Option<String>,
    pub raw_output: Option<String>,
    pub latency_ms: Option<f64>,
    pub error: Option<String>,
}

pub fn to_output(rec: &Record, map: &ColumnMap) -> Result<OutputRecord, ImportError> {
    rec.check_sizes()?;
    let id = rec.id(map)?;
    let output = rec.require(map, "output")?.to_string();
    let number = |field: &str, scale: f64| -> Result<Option<f64>, ImportError> {
        match rec.get(map, field).map(str::trim) {
            None | Some("") => Ok(None),
            Some(v) => v
                .parse::<f64>()
                .map(|x| Some(x * scale))
                .map_err(|_| ImportError::at(rec.line, format!("`{}` is not a number: {v:?}", map.col(field)))),
        }
    };
    let latency_ms = match number("latency_ms", 1.0)? {
        Some(v) => Some(v),
        None => number("latency_s", 1000.0)?,
    };
    let error = rec.get(map, "error").filter(|e| !e.is_empty()).map(str::to_string);
    let raw = rec.get(map, "raw_output").map(str::to_string).unwrap_or_else(|| output.clone());
    Ok(OutputRecord {
        line: rec.line,
        id,
        output: if error.is_some() && output.is_empty() { None } else { Some(output) },
        raw_output: Some(raw),
        latency_ms,
        error,
    })
}

/// What happened to a file's outputs when attached to the deduplicated pairs.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct AttachStats {
    pub attached: usize,
    /// Outputs for a copy that dedupe dropped: not scored (SPEC §1).
    pub dropped_copies: usize,
    pub skipped_bad: usize,
}

/// Maps output IDs to the pairs of one source: `source_id` of a kept pair → attached;
/// the id of one of its copies → dropped; unknown or repeated ids are errors.
pub struct Attacher<'a> {
    by_id: HashMap<&'a str, (&'a Pair, bool)>,
    seen: HashMap<String, u64>,
    service: String,
    model: String,
}

impl<'a> Attacher<'a> {
    pub fn new(pairs: &'a [Pair], source: &str, service: &str, model: &str) -> Self {
        let mut by_id = HashMap::new();
        for p in pairs.iter().filter(|p| p.source == source) {
            for sid in &p.source_ids {
                by_id.insert(sid.as_str(), (p, *sid == p.source_id));
            }
        }
        Self { by_id, seen: HashMap::new(), service: service.into(), model: model.into() }
    }

    /// `Ok(None)` for the output of a dropped copy.
    pub fn attach(&mut self, out: OutputRecord) -> Result<Option<Generation>, ImportError> {
        let Some(&(pair, kept)) = self.by_id.get(out.id.as_str()) else {
            return Err(ImportError::at(out.line, format!("ID {} matches no pair of the source", out.id)));
        };
        if let Some(first) = self.seen.insert(out.id.clone(), out.line) {
            return Err(ImportError::at(out.line, format!("ID {} repeats the output at line {first}", out.id)));
        }
        if !kept {
            return Ok(None);
        }
        let degenerate = out.output.as_deref().is_none_or(|o| o.trim().is_empty());
        Ok(Some(Generation {
            pair_id: pair.pair_id.clone(),
            service: self.service.clone(),
            model: self.model.clone(),
            sample: 0,
            round: 0,
            output: out.output,
            raw_output: out.raw_output,
            latency_ms: out.latency_ms,
            prompt_tokens: None,
            completion_tokens: None,
            error: out.error,
            degenerate,
            degenerate_kind: degenerate.then(|| "empty".to_string()),
            finish_reason: None,
            attempts: None,
            cost: None,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CSV: &str = "ID,URL,Title,Description,Code\n1,u1,T,\"multi\nline\",\"on: push\n\"\n2,u2,T2,D2,x: 1\n";

    #[test]
    fn csv_multiline_fields_keep_their_start_line() {
        let recs: Vec<_> = csv_records(CSV.as_bytes()).unwrap().collect::<Result<_, _>>().unwrap();
        assert_eq!(recs.len(), 2);
        assert_eq!(recs[0].line, 2);
        assert_eq!(recs[1].line, 5);
        let p = to_raw_pair(&recs[0], &ColumnMap::llm4ci(), "gha", "docs", 0).unwrap();
        assert_eq!(
            (p.description.as_str(), p.reference.as_str(), p.source_id.as_str()),
            ("multi\nline", "on: push\n", "1")
        );
    }

    #[test]
    fn malformed_row_names_its_line() {
        let bad = "ID,URL,Title,Description,Code\n1,u,T,D,C\n2,u,T\n";
        let errs: Vec<_> = csv_records(bad.as_bytes()).unwrap().filter_map(Result::err).collect();
        assert_eq!(errs.len(), 1);
        assert_eq!(errs[0].line, 3);
        assert!(errs[0].to_string().contains("3 fields where the header has 5"), "{}", errs[0]);
    }

    #[test]
    fn oversized_cells_name_line_and_column() {
        let big = "x".repeat(MAX_CELL_BYTES + 1);
        let text = format!("ID,URL,Title,Description,Code\n1,u,T,D,C\n2,u,T,{big},C\n");
        let recs: Vec<_> = csv_records(text.as_bytes()).unwrap().collect::<Result<_, _>>().unwrap();
        assert!(to_raw_pair(&recs[0], &ColumnMap::llm4ci(), "gha", "docs", 0).is_ok());
        let e = to_raw_pair(&recs[1], &ColumnMap::llm4ci(), "gha", "docs", 1).unwrap_err();
        assert_eq!(e.line, 3);
        // The first record too (the csv reader's buffer is refilled inside it).
        for nl in ["\n", "\r\n"] {
            let text = format!("ID,URL,Title,Description,Code{nl}2,u,T,{big},C{nl}1,u,T,D,C{nl}");
            let recs: Vec<_> = csv_records(text.as_bytes()).unwrap().collect::<Result<_, _>>().unwrap();
            assert_eq!(to_raw_pair(&recs[0], &ColumnMap::llm4ci(), "gha", "docs", 0).unwrap_err().line, 2, "{nl:?}");
        }
        assert!(e.message.contains("column `Description`") && e.message.contains("8 MiB"), "{e}");
    }

    #[test]
    fn missing_column_is_named() {
        let recs: Vec<_> = csv_records("ID,URL\n1,u\n".as_bytes()).unwrap().collect::<Result<_, _>>().unwrap();
        let e = to_raw_pair(&recs[0], &ColumnMap::llm4ci(), "gha", "docs", 0).unwrap_err();
        assert!(e.message.contains("`Title`"), "{e}");
    }

    #[test]
    fn jsonl_with_column_map() {
        let map = ColumnMap::for_format("jsonl", &[("reference".to_string(), "yaml".to_string())].into()).unwrap();
        let recs: Vec<_> =
            jsonl_records("{\"id\": 7, \"title\": \"t\", \"description\": \"d\", \"yaml\": \"a: 1\"}\n\n".as_bytes())
                .collect::<Result<_, _>>()
                .unwrap();
        let p = to_raw_pair(&recs[0], &map, "gha", "s", 0).unwrap();
        assert_eq!((p.source_id.as_str(), p.reference.as_str()), ("7", "a: 1"));
        let e = jsonl_records("{oops\n".as_bytes()).next().unwrap().unwrap_err();
        assert_eq!(e.line, 1);
        assert!(ColumnMap::for_format("csv", &[("nope".to_string(), "x".to_string())].into()).is_err());
    }

    #[test]
    fn outputs_attach_to_kept_pairs_only() {
        let pair = Pair {
            pair_id: "p".into(),
            service: "gha".into(),
            url: "u".into(),
            title: "t".into(),
            description: "d".into(),
            reference: "r".into(),
            n_copies: 2,
            urls: vec!["u".into(), "u2".into()],
            source: "docs".into(),
            source_id: "1".into(),
            source_ids: vec!["1".into(), "5".into()],
            position: 0,
            leak: None,
        };
        let pairs = vec![pair];
        let mut a = Attacher::new(&pairs, "docs", "gha", "m");
        let out = |id: &str, line| OutputRecord {
            line,
            id: id.into(),
            output: Some("on: push".into()),
            raw_output: None,
            latency_ms: Some(3.0),
            error: None,
        };
        let g = a.attach(out("1", 2)).unwrap().unwrap();
        assert_eq!((g.pair_id.as_str(), g.model.as_str(), g.degenerate), ("p", "m", false));
        assert_eq!(a.attach(out("5", 3)).unwrap(), None);
        assert!(a.attach(out("1", 4)).unwrap_err().message.contains("repeats the output at line 2"));
        assert!(a.attach(out("9", 5)).unwrap_err().message.contains("matches no pair"));
    }

    #[test]
    fn seconds_become_milliseconds() {
        let recs: Vec<_> = csv_records("ID,LLM_YML_Output,Time\n1,a: 1,1.5\n2,,\n".as_bytes())
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        let o = to_output(&recs[0], &ColumnMap::llm4ci()).unwrap();
        assert_eq!(o.latency_ms, Some(1500.0));
        assert_eq!(to_output(&recs[1], &ColumnMap::llm4ci()).unwrap().latency_ms, None);
    }
}

#[cfg(test)]
mod bounded_tests {
    use super::*;

    /// Issue 31: a record is refused before it is held whole: a line or CSV record over the limit
    /// costs its length in reading, not in memory, and names where it is.
    #[test]
    fn long_lines_and_records_are_refused_before_they_are_buffered() {
        let text = format!("short\n{}\nlast\r\n", "x".repeat(100));
        let got: Vec<(u64, Result<String, String>)> = lines_bounded(text.as_bytes(), 50).collect();
        assert_eq!(got[0], (1, Ok("short".into())));
        assert!(got[1].1.as_ref().unwrap_err().contains("over the 0 MiB"), "{got:?}");
        assert_eq!(got[2], (3, Ok("last".into())));
        assert_eq!(got.len(), 3);
        // A JSON line longer than a record may be.
        let big =
            format!("{{\"id\": \"1\", \"reference\": \"{}\"}}\n{{\"id\": \"2\"}}\n", "y".repeat(MAX_RECORD_BYTES));
        let recs: Vec<Result<Record, ImportError>> = jsonl_records(big.as_bytes()).collect();
        assert_eq!(recs[0].as_ref().unwrap_err().line, 1);
        assert_eq!(recs[1].as_ref().unwrap().fields["id"].as_deref(), Some("2"));
        // A CSV record (a quoted field over many lines) longer than a record may be.
        let csv = format!("ID,Code\n1,\"{}\"\n", "z\n".repeat(MAX_RECORD_BYTES));
        let e = csv_records(csv.as_bytes()).unwrap().find_map(|r| r.err()).expect("refused");
        assert!(e.message.contains("longer than 32 MiB"), "{e}");
    }
}
