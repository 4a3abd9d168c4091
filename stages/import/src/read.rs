//! Records of CSV and JSON Lines files, each cell held to a bound while it is read: a cell over
//! [`MAX_CELL_BYTES`] keeps its first bytes and says how long it was, a cell that is not UTF-8 is
//! kept decoded lossily and says so ([`Flaw`]). Whether a flawed cell is a bad row or a model's
//! oversized answer is the caller's rule ([`Record::check_cells`]); reading never fails a whole
//! file for one record, and never holds more than a record's bound in memory.

use std::collections::HashMap;
use std::io::{BufRead, Read};

use crate::scan::{kept_text, scan, Cell, Scanner};
use crate::{Flaw, ImportError, Record, MAX_CELL_BYTES, MAX_RECORD_BYTES};

/// A CSV file's records after its header; gzip is the caller's business. The dialect is the csv
/// crate's default (RFC 4180 quoting, any of `\r`, `\n`, `\r\n` ends a record, blank lines
/// skipped, a UTF-8 BOM dropped), read with `csv-core` so that no cell is held whole.
pub fn csv_records<R: Read>(reader: R) -> Result<impl Iterator<Item = Result<Record, ImportError>>, ImportError> {
    let mut csv = Csv::new(reader);
    let headers: Vec<String> = match csv.next_raw() {
        None => Vec::new(),
        Some(Err(e)) => return Err(ImportError::at(1, format!("cannot read CSV header: {}", e.message))),
        Some(Ok(raw)) => {
            let mut names = Vec::with_capacity(raw.cells.len());
            for (bytes, len) in raw.cells {
                if len > bytes.len() as u64 {
                    return Err(ImportError::at(raw.line, "cannot read CSV header: a column name over the cell limit"));
                }
                let name = String::from_utf8(bytes)
                    .map_err(|_| ImportError::at(raw.line, "cannot read CSV header: invalid UTF-8"))?;
                names.push(name.trim_start_matches('\u{feff}').to_string());
            }
            names
        }
    };
    csv.width = headers.len();
    Ok(std::iter::from_fn(move || {
        let raw = match csv.next_raw()? {
            Ok(r) => r,
            Err(e) => return Some(Err(e)),
        };
        if raw.cells.len() != headers.len() {
            return Some(Err(ImportError::at(
                raw.line,
                format!("malformed CSV: {} fields where the header has {}", raw.cells.len(), headers.len()),
            )));
        }
        let mut rec = Record { line: raw.line, ..Record::default() };
        for (name, (bytes, len)) in headers.iter().zip(raw.cells) {
            let cut = len > bytes.len() as u64;
            let (text, decoded) = kept_text(bytes, cut);
            if cut {
                rec.flaws.insert(name.clone(), Flaw::Oversized { bytes: len });
            } else if !decoded {
                rec.flaws.insert(name.clone(), Flaw::NotText);
            }
            rec.fields.insert(name.clone(), Some(text));
        }
        Some(Ok(rec))
    }))
}

/// One CSV record as read: its first line and each cell's kept bytes with its whole length.
struct RawRecord {
    line: u64,
    cells: Vec<(Vec<u8>, u64)>,
}

struct Csv<R> {
    inner: R,
    core: csv_core::Reader,
    buf: Vec<u8>,
    pos: usize,
    end: usize,
    eof: bool,
    /// `\n`s consumed so far.
    lines: u64,
    /// Cells kept per record (the header's count; extra ones are only counted).
    width: usize,
    failed: bool,
}

impl<R: Read> Csv<R> {
    fn new(inner: R) -> Self {
        Csv {
            inner,
            core: csv_core::Reader::new(),
            buf: vec![0; 64 << 10],
            pos: 0,
            end: 0,
            eof: false,
            lines: 0,
            width: usize::MAX,
            failed: false,
        }
    }

    /// The next record, its cells each cut to [`MAX_CELL_BYTES`] and all of them to
    /// [`MAX_RECORD_BYTES`]; a read error ends the file (the rest cannot be read).
    fn next_raw(&mut self) -> Option<Result<RawRecord, ImportError>> {
        if self.failed {
            return None;
        }
        let (mut cells, mut cell, mut cell_len, mut kept) = (Vec::new(), Vec::new(), 0u64, 0usize);
        let mut line: Option<u64> = None;
        let mut out = [0u8; 16 << 10];
        loop {
            if self.pos == self.end && !self.eof {
                match self.inner.read(&mut self.buf) {
                    Ok(0) => self.eof = true,
                    Ok(n) => (self.pos, self.end) = (0, n),
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                    Err(e) => {
                        self.failed = true;
                        return Some(Err(ImportError::unreadable(
                            self.lines + 1,
                            format!("cannot read the file: {e}"),
                        )));
                    }
                }
            }
            let input = &self.buf[self.pos..self.end];
            let (res, nin, nout) = self.core.read_field(input, &mut out);
            for &b in &input[..nin] {
                // Blank lines before a record are skipped: it starts at its first other byte.
                if line.is_none() && b != b'\r' && b != b'\n' {
                    line = Some(self.lines + 1);
                }
                self.lines += u64::from(b == b'\n');
            }
            self.pos += nin;
            cell_len += nout as u64;
            let room = if cells.len() < self.width { MAX_CELL_BYTES.min(MAX_RECORD_BYTES - kept) } else { 0 };
            let take = nout.min(room.saturating_sub(cell.len()));
            cell.extend_from_slice(&out[..take]);
            match res {
                csv_core::ReadFieldResult::InputEmpty | csv_core::ReadFieldResult::OutputFull => {}
                csv_core::ReadFieldResult::Field { record_end } => {
                    kept += cell.len();
                    cells.push((std::mem::take(&mut cell), cell_len));
                    cell_len = 0;
                    if record_end {
                        return Some(Ok(RawRecord { line: line.unwrap_or(self.lines), cells }));
                    }
                }
                csv_core::ReadFieldResult::End => return None,
            }
        }
    }
}

/// One line of a JSON Lines file.
pub enum JsonLine {
    /// A line within the bound (its bytes, maybe not UTF-8; without the `\n` and a final `\r`).
    Whole(Vec<u8>),
    /// A longer line, read through once: `bytes` long, its top-level object with each value cut
    /// to [`MAX_CELL_BYTES`] (or why it was not one object).
    Long { bytes: u64, scanned: Result<Vec<(String, Cell)>, String> },
}

/// The lines of `reader`, numbered from 1; one over `max` bytes is scanned as it passes, never
/// held whole. `Err` only for a read error, which ends the file.
pub fn json_lines<R: BufRead>(mut reader: R, max: usize) -> impl Iterator<Item = (u64, Result<JsonLine, String>)> {
    let (mut n, mut failed) = (0u64, false);
    std::iter::from_fn(move || {
        if failed {
            return None;
        }
        let (mut line, mut len, mut ended) = (Vec::new(), 0usize, false);
        let mut scanner: Option<Scanner> = None;
        loop {
            let buf = match reader.fill_buf() {
                Ok(b) => b,
                Err(e) => {
                    failed = true;
                    return Some((n + 1, Err(format!("cannot read line: {e}"))));
                }
            };
            if buf.is_empty() {
                break;
            }
            let (take, nl) = match buf.iter().position(|b| *b == b'\n') {
                Some(i) => (i, true),
                None => (buf.len(), false),
            };
            match &mut scanner {
                Some(s) => s.feed(&buf[..take]),
                None if len + take <= max => line.extend_from_slice(&buf[..take]),
                None => {
                    let mut s = Scanner::new(MAX_CELL_BYTES);
                    s.feed(&std::mem::take(&mut line));
                    s.feed(&buf[..take]);
                    scanner = Some(s);
                }
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
        Some((
            n,
            Ok(match scanner {
                Some(s) => JsonLine::Long { bytes: len as u64, scanned: s.finish() },
                None => {
                    if line.last() == Some(&b'\r') {
                        line.pop();
                    }
                    JsonLine::Whole(line)
                }
            }),
        ))
    })
}

/// Reads JSON Lines: one object per line; blank lines are allowed. A line longer than a record
/// may hold, or with values that are not UTF-8, is still read (its values flawed, not refused).
pub fn jsonl_records<R: BufRead>(reader: R) -> impl Iterator<Item = Result<Record, ImportError>> {
    json_lines(reader, MAX_RECORD_BYTES).filter_map(|(n, line)| {
        let line = match line {
            Ok(l) => l,
            Err(e) => return Some(Err(ImportError::unreadable(n, e))),
        };
        match line {
            JsonLine::Whole(bytes) if bytes.iter().all(u8::is_ascii_whitespace) => None,
            JsonLine::Whole(bytes) => Some(whole_record(n, &bytes)),
            JsonLine::Long { scanned: Ok(cells), .. } => Some(Ok(Record::from_cells(n, cells))),
            JsonLine::Long { bytes, scanned: Err(e) } => {
                Some(Err(ImportError::at(n, format!("a line of {} MiB that is not one JSON object: {e}", bytes >> 20))))
            }
        }
    })
}

/// A line within the bound: serde_json's reading, or where serde_json refuses only because a
/// value is not text, the scanner's (that value flawed).
fn whole_record(n: u64, bytes: &[u8]) -> Result<Record, ImportError> {
    match serde_json::from_slice::<serde_json::Value>(bytes) {
        Ok(serde_json::Value::Object(obj)) => {
            let texts = obj.into_iter().map(|(k, v)| {
                let s = match v {
                    serde_json::Value::Null => None,
                    serde_json::Value::String(s) => Some(s),
                    other => Some(other.to_string()),
                };
                (k, s)
            });
            Ok(Record::from_texts(n, texts))
        }
        Ok(_) => Err(ImportError::at(n, "expected a JSON object")),
        Err(e) => match scan(bytes, MAX_CELL_BYTES) {
            Ok(cells) if cells.iter().any(|(_, c)| c.flaw == Some(Flaw::NotText)) => Ok(Record::from_cells(n, cells)),
            _ if std::str::from_utf8(bytes).is_err() => Err(ImportError::at(n, "cannot read line: not UTF-8")),
            _ => Err(ImportError::at(n, format!("invalid JSON: {e}"))),
        },
    }
}

impl Record {
    /// A record of texts already in memory, each cut to [`MAX_CELL_BYTES`] (flawed when cut).
    pub fn from_texts(line: u64, texts: impl IntoIterator<Item = (String, Option<String>)>) -> Record {
        let mut rec = Record { line, ..Record::default() };
        for (k, v) in texts {
            let v = v.map(|mut s| {
                if s.len() > MAX_CELL_BYTES {
                    rec.flaws.insert(k.clone(), Flaw::Oversized { bytes: s.len() as u64 });
                    s.truncate(s.floor_char_boundary(MAX_CELL_BYTES));
                }
                s
            });
            rec.fields.insert(k, v);
        }
        rec
    }

    fn from_cells(line: u64, cells: Vec<(String, Cell)>) -> Record {
        let mut fields = HashMap::new();
        let mut flaws = HashMap::new();
        for (k, c) in cells {
            if let Some(f) = c.flaw {
                flaws.insert(k.clone(), f);
            }
            fields.insert(k, c.text);
        }
        Record { line, fields, flaws }
    }
}
