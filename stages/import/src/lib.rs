//! Import: turns records of existing files into `RawPair`s and `Generation`s.
//!
//! Owns: the column mappings of the predecessor study's files and of CSV/JSONL/Parquet. Never
//! opens a file and never dedupes: it attaches outputs to the pairs it is given.
//!
//! The engine opens files (and decompresses them); this crate only sees readers and records,
//! so the same mapping serves CSV, JSONL and Parquet and is testable on strings.

mod read;
mod scan;

use std::collections::{BTreeMap, HashMap};
use std::fmt;

use doc2ci_rows::{Generation, Pair, RawPair};

pub use read::{csv_records, json_lines, jsonl_records, JsonLine};
pub use scan::Cell;

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
    /// Columns whose cell could not be kept as read (its field holds what was kept).
    pub flaws: HashMap<String, Flaw>,
}

/// Which input column feeds which field. Keys: id, url, title, description, reference,
/// output, raw_output, latency_s, latency_ms, error, published (the example's publication day).
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
            "published",
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

/// The most one record (a CSV record, a JSON line) holds in memory: every field at the cell limit.
/// A longer JSON line is scanned through with its values cut ([`read::JsonLine::Long`]).
pub const MAX_RECORD_BYTES: usize = 4 * MAX_CELL_BYTES;

/// A cell larger than this keeps its first bytes and is flagged [`Flaw::Oversized`]: every later
/// stage holds a text several times over (rows, Arrow arrays, Parquet pages), and a CI file is
/// never this large (the largest of the llm4ci data is 18 KB). The validator refuses the same size.
pub const MAX_CELL_BYTES: usize = 8 << 20;

/// What an oversized answer keeps for validation and scoring: as much as the score stage reads
/// of any text (its `MAX_SCORED_BYTES`).
pub const OVERSIZED_KEPT_BYTES: usize = 64 << 10;

/// A cell that could not be kept as read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flaw {
    /// Longer than the cell limit (or than what its record may hold): `bytes` long in all, its
    /// first bytes kept.
    Oversized { bytes: u64 },
    /// Not UTF-8 text (or a JSON string with a lone surrogate): kept decoded lossily.
    NotText,
}

impl Flaw {
    /// The answer's `degenerate_kind` when the flawed cell is a model's output.
    pub fn kind(self) -> &'static str {
        match self {
            Flaw::Oversized { .. } => "oversized",
            Flaw::NotText => "undecodable",
        }
    }

    fn describe(self, column: &str) -> String {
        match self {
            Flaw::Oversized { bytes } if bytes > MAX_CELL_BYTES as u64 => {
                format!("column `{column}`: a cell of {bytes} bytes exceeds the {} MiB limit", MAX_CELL_BYTES >> 20)
            }
            Flaw::Oversized { bytes } => format!(
                "column `{column}`: a cell of {bytes} bytes past the {} MiB one record may hold",
                MAX_RECORD_BYTES >> 20
            ),
            Flaw::NotText => format!("column `{column}`: not UTF-8 text"),
        }
    }
}

impl Record {
    /// Every flawed cell is an error naming its line and column, but those of the `answer`
    /// columns: a model's output may be its own oversized or undecodable answer.
    pub fn check_cells(&self, answer: &[&str]) -> Result<(), ImportError> {
        let mut flawed: Vec<(&String, &Flaw)> =
            self.flaws.iter().filter(|(k, _)| !answer.contains(&k.as_str())).collect();
        flawed.sort_by_key(|(k, _)| *k);
        match flawed.first() {
            Some((k, f)) => Err(ImportError::at(self.line, f.describe(k))),
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
    rec.check_cells(&[])?;
    let id = rec.id(map)?;
    let title = rec.require(map, "title")?.to_string();
    let description = rec.require(map, "description")?.to_string();
    let reference = rec.require(map, "reference")?.to_string();
    let url = rec.get(map, "url").unwrap_or("").to_string();
    // The source's own publication date, when it has a column for it.
    let published = match rec.get(map, "published").map(str::trim).filter(|s| !s.is_empty()) {
        None => None,
        Some(d) => Some(doc2ci_rows::iso_day(d).ok_or_else(|| {
            ImportError::at(rec.line, format!("column `{}`: `{d}` is not a date (YYYY-MM-DD)", map.col("published")))
        })?),
    };
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
        published: published.clone(),
        published_source: published.map(|_| "source".to_string()),
        not_before: None,
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
    /// The output (or raw output) was too large or not text: the model's answer all the same.
    pub flaw: Option<Flaw>,
}

/// A record as a model's output. Its output cell may be flawed (kept: the first
/// [`OVERSIZED_KEPT_BYTES`] of an oversized one); any other flawed cell makes it a bad row.
pub fn to_output(rec: &Record, map: &ColumnMap) -> Result<OutputRecord, ImportError> {
    rec.check_cells(&[map.col("output"), map.col("raw_output")])?;
    let id = rec.id(map)?;
    let flaw = rec.flaws.get(map.col("output")).or(rec.flaws.get(map.col("raw_output"))).copied();
    let kept = |s: &str| match rec.flaws.get(map.col("output")) {
        Some(Flaw::Oversized { .. }) => s[..s.floor_char_boundary(OVERSIZED_KEPT_BYTES)].to_string(),
        _ => s.to_string(),
    };
    let output = kept(rec.require(map, "output")?);
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
    let raw = match (rec.get(map, "raw_output"), rec.flaws.get(map.col("raw_output"))) {
        (Some(r), Some(Flaw::Oversized { .. })) => r[..r.floor_char_boundary(OVERSIZED_KEPT_BYTES)].to_string(),
        (Some(r), _) => r.to_string(),
        (None, _) => output.clone(),
    };
    Ok(OutputRecord {
        line: rec.line,
        id,
        output: if error.is_some() && output.is_empty() { None } else { Some(output) },
        raw_output: Some(raw),
        latency_ms,
        error,
        flaw,
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
        let empty = out.output.as_deref().is_none_or(|o| o.trim().is_empty());
        // An error row is no answer, so no kind of answer either.
        let kind = match (&out.error, out.flaw) {
            (Some(_), _) => None,
            (None, Some(f)) => Some(f.kind()),
            (None, None) => empty.then_some("empty"),
        };
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
            degenerate: kind.is_some(),
            degenerate_kind: kind.map(str::to_string),
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
            published: None,
            published_source: None,
            not_before: None,
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
            flaw: None,
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

    /// Issue 44: a record is never held whole: a JSON line or CSV cell over the limit keeps its
    /// first bytes and its length, and the rest of the file is read; only a record that cannot be
    /// attached (its id flawed) is a bad row.
    #[test]
    fn oversized_and_undecodable_cells_are_flagged_and_the_file_read_on() {
        let big = "y".repeat(MAX_RECORD_BYTES + 10);
        let text = format!("{{\"id\": \"1\", \"output\": \"{big}\"}}\n{{\"id\": \"2\", \"output\": \"a: 1\"}}\n");
        let recs: Vec<Record> = jsonl_records(text.as_bytes()).collect::<Result<_, _>>().unwrap();
        assert_eq!(recs.len(), 2);
        assert_eq!(recs[0].flaws["output"], Flaw::Oversized { bytes: big.len() as u64 });
        assert_eq!(recs[0].fields["output"].as_ref().unwrap().len(), MAX_CELL_BYTES);
        assert_eq!(recs[0].fields["id"].as_deref(), Some("1"));
        assert!(recs[1].flaws.is_empty());
        let map = ColumnMap::for_format("jsonl", &BTreeMap::new()).unwrap();
        let out = to_output(&recs[0], &map).unwrap();
        assert_eq!(
            (out.flaw, out.output.as_ref().unwrap().len()),
            (recs[0].flaws.get("output").copied(), OVERSIZED_KEPT_BYTES)
        );
        // Not UTF-8 inside a string: serde_json refuses the line, the scanner reads it.
        let mut bad = b"{\"id\": \"3\", \"output\": \"on: \xff\xfe\"}\n".to_vec();
        bad.extend(b"{\"id\": \"\xff\", \"output\": \"x\"}\n");
        let recs: Vec<Result<Record, ImportError>> = jsonl_records(&bad[..]).collect();
        let r = recs[0].as_ref().unwrap();
        assert_eq!((r.flaws["output"], r.fields["output"].as_deref()), (Flaw::NotText, Some("on: \u{fffd}\u{fffd}")));
        assert_eq!(to_output(r, &map).unwrap().flaw, Some(Flaw::NotText));
        // A flawed id cannot be attached: a bad row, named.
        let e = to_output(recs[1].as_ref().unwrap(), &map).unwrap_err();
        assert_eq!((e.line, e.message.as_str()), (2, "column `id`: not UTF-8 text"));
        // A CSV cell: the same, the rest of the file read, the true line kept.
        let mut csv = format!("ID,LLM_YML_Output\n1,\"{}\"\n2,ok\n3,\"a", "z\n".repeat(MAX_CELL_BYTES)).into_bytes();
        csv.extend(b"\xffb\"\n");
        let recs: Vec<Record> = csv_records(&csv[..]).unwrap().collect::<Result<_, _>>().unwrap();
        assert_eq!(
            recs.iter().map(|r| r.line).collect::<Vec<_>>(),
            [2, MAX_CELL_BYTES as u64 + 3, MAX_CELL_BYTES as u64 + 4]
        );
        assert_eq!(recs[0].flaws["LLM_YML_Output"], Flaw::Oversized { bytes: 2 * MAX_CELL_BYTES as u64 });
        assert!(recs[1].flaws.is_empty());
        assert_eq!(recs[2].flaws["LLM_YML_Output"], Flaw::NotText);
        let llm = ColumnMap::llm4ci();
        assert_eq!(to_output(&recs[0], &llm).unwrap().flaw.map(Flaw::kind), Some("oversized"));
        // As a pair, an oversized cell is a bad row naming its column.
        let e = Record::from_texts(4, [("Code".to_string(), Some("c".repeat(MAX_CELL_BYTES + 1)))]).check_cells(&[]);
        assert!(e.unwrap_err().message.contains("column `Code`: a cell of 8388609 bytes exceeds the 8 MiB limit"));
    }

    /// A line too long to hold and not one JSON object is a bad row naming its size; the lines
    /// after it are read.
    #[test]
    fn a_long_line_that_is_not_json_is_one_bad_row() {
        let text = format!("{{\"id\": \"1\", \"output\": \"{}\n{{\"id\": \"2\"}}\n", "x".repeat(MAX_RECORD_BYTES));
        let recs: Vec<Result<Record, ImportError>> = jsonl_records(text.as_bytes()).collect();
        let e = recs[0].as_ref().unwrap_err();
        assert!(e.message.starts_with("a line of 32 MiB that is not one JSON object"), "{e}");
        assert_eq!(recs[1].as_ref().unwrap().fields["id"].as_deref(), Some("2"));
    }

    /// The CSV reader agrees with the csv crate on what it reads: quoting, CRLF, blank lines, a
    /// BOM, and the line each record starts on.
    #[test]
    fn csv_reading_matches_the_csv_dialect() {
        let text = "\u{feff}a,b\r\n1,\"x,\"\"y\"\"\r\nz\"\r\n\r\n\n2,\r\n3,last";
        let recs: Vec<Record> = csv_records(text.as_bytes()).unwrap().collect::<Result<_, _>>().unwrap();
        let got: Vec<(u64, String, String)> =
            recs.iter().map(|r| (r.line, r.fields["a"].clone().unwrap(), r.fields["b"].clone().unwrap())).collect();
        assert_eq!(
            got,
            [(2, "1".into(), "x,\"y\"\r\nz".into()), (6, "2".into(), String::new()), (7, "3".into(), "last".into())]
        );
        let e = csv_records("a,b\n1\n".as_bytes()).unwrap().next().unwrap().unwrap_err();
        assert_eq!((e.line, e.message.as_str()), (2, "malformed CSV: 1 fields where the header has 2"));
        assert_eq!(csv_records("".as_bytes()).unwrap().count(), 0);
    }
}
