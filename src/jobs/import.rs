//! import: files of pairs (`pairs_raw`) and of a model's outputs (`generations`), streamed in
//! checkpointed batches so a killed import resumes after its last batch.

use std::fs::File;
use std::io::{BufReader, Read};
use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context, Result};
use datafusion::arrow::array::Array;
use datafusion::arrow::util::display::{ArrayFormatter, FormatOptions};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use doc2ci_import::{ColumnMap, ImportError, JsonLine, Record};
use doc2ci_rows::Pair;

use super::tables::{GENERATIONS, PAIRS, PAIRS_RAW};
use crate::config::{Config, ImportModel, ImportSource, Place, Section};
use crate::engine::{Ctx, Graph, Job, Node, Output};
use crate::warehouse::Partition;

/// `[stages.import]`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Settings {
    /// Rows per checkpointed batch.
    #[serde(default = "default_batch")]
    pub batch_size: usize,
}

impl Default for Settings {
    fn default() -> Self {
        Self { batch_size: default_batch() }
    }
}

fn default_batch() -> usize {
    500
}

impl Section for Settings {
    const NAME: &'static str = "import";

    fn check(&self, at: &Place, _: &Config) -> Result<()> {
        if self.batch_size == 0 {
            at.fail_at("batch_size", "must be at least 1")?;
        }
        Ok(())
    }
}

/// One `kind = "import"` source → `pairs_raw/service=…/source=…`.
pub fn declare_pairs(cfg: &Config, source: usize, g: &mut Graph) -> Result<()> {
    let src = &cfg.sources[source];
    let s = src.import().expect("an import source");
    let file = if s.format == "benchmark" { s.path.join(crate::benchmark::PAIRS_JSONL) } else { s.path.clone() };
    let job = ImportPairs {
        name: src.name.clone(),
        service: src.service.clone(),
        file: s.clone(),
        batch_size: cfg.section::<Settings>()?.batch_size as u64,
    };
    g.add(Node::new("import", Partition::new(PAIRS_RAW, &[&src.service, &src.name]), job).files(vec![file]));
    Ok(())
}

/// Every `backend = "import"` model → `generations/service=…/model=…`, attached to the deduped pairs.
pub fn declare_outputs(cfg: &Config, g: &mut Graph) -> Result<()> {
    let batch_size = cfg.section::<Settings>()?.batch_size as u64;
    for (name, m) in cfg.models.iter().filter_map(|m| m.import().map(|i| (&m.name, i))) {
        let service = &m.service;
        let Some(dedupe) = g.find(PAIRS.name, &[("service", service)]) else {
            bail!("model `{name}`: service `{service}` has no source of pairs");
        };
        let job = ImportOutputs { name: name.clone(), file: m.clone(), batch_size };
        g.add(
            Node::new("import", Partition::new(GENERATIONS, &[service, name]), job)
                .deps(vec![dedupe])
                .files(vec![m.path.clone()])
                .model(name),
        );
    }
    Ok(())
}

/// How many rows a checkpoint holds never changes the rows: skipped from the key.
#[derive(Serialize)]
struct ImportPairs {
    name: String,
    service: String,
    file: ImportSource,
    #[serde(skip)]
    batch_size: u64,
}

impl Job for ImportPairs {
    fn run(&self, cx: &Ctx) -> Result<Output> {
        let (s, service) = (&self.file, self.service.as_str());
        let map = ColumnMap::for_format(&s.format, &s.columns).map_err(|e| anyhow!("source `{}`: {e}", self.name))?;
        let benchmark = s.format == "benchmark";
        let mut columns = map.columns();
        columns.push("service".into());
        let file = FileSpec {
            path: &s.path,
            format: &s.format,
            columns,
            skip_bad: s.skip_bad_rows,
            batch_size: self.batch_size,
        };
        let (rows, note) = batched(cx, &file, |rec, idx| {
            // A released benchmark holds every service: this source takes its own.
            if benchmark && rec.fields.get("service").and_then(|v| v.as_deref()) != Some(service) {
                return Ok(None);
            }
            doc2ci_import::to_raw_pair(&rec, &map, service, &self.name, idx).map(Some)
        })?;
        cx.publish(&rows, note)
    }
}

#[derive(Serialize)]
struct ImportOutputs {
    name: String,
    file: ImportModel,
    #[serde(skip)]
    batch_size: u64,
}

impl Job for ImportOutputs {
    fn run(&self, cx: &Ctx) -> Result<Output> {
        let m = &self.file;
        let pairs: Vec<Pair> = cx.read(&Partition::new(PAIRS, &[&m.service]))?;
        if m.format == crate::config::BATCH_RESULTS {
            return self.batch_results(cx, &pairs);
        }
        let map = ColumnMap::for_format(&m.format, &m.columns).map_err(|e| anyhow!("model `{}`: {e}", self.name))?;
        let mut att = doc2ci_import::Attacher::new(&pairs, &m.source, &m.service, &self.name);
        let mut dropped = 0usize;
        let file = FileSpec {
            path: &m.path,
            format: &m.format,
            columns: map.columns(),
            skip_bad: m.skip_bad_rows,
            batch_size: self.batch_size,
        };
        let (rows, note) = batched(cx, &file, |rec, _| {
            let g = att.attach(doc2ci_import::to_output(&rec, &map)?)?;
            if g.is_none() {
                dropped += 1;
            }
            Ok(g)
        })?;
        let mut note = note.map_or(String::new(), |n| format!("{n}; "));
        note.push_str(&format!("{} attached, {dropped} outputs of dropped duplicate pairs not kept", rows.len()));
        cx.publish(&rows, Some(note))
    }
}

impl ImportOutputs {
    /// An OpenAI Batch output file (or several concatenated, output and error files alike):
    /// each line's `custom_id` names its pair, sample and round as `export requests` wrote it.
    fn batch_results(&self, cx: &Ctx, pairs: &[Pair]) -> Result<Output> {
        let m = &self.file;
        let name = m.path.display().to_string();
        let known: std::collections::HashSet<&str> = pairs.iter().map(|p| p.pair_id.as_str()).collect();
        let mut seen: std::collections::HashMap<(String, u32, u32), usize> = Default::default();
        let who = format!("model `{}` (batch results {name})", self.name);
        let (mut rows, mut skipped, mut first_bad) = (Vec::new(), 0usize, None);
        let lines = doc2ci_import::json_lines(BufReader::new(open_input(&m.path)?), doc2ci_import::MAX_RECORD_BYTES);
        for (n, line) in lines {
            let n = n as usize;
            let line = line.map_err(|e| anyhow!("{name}:{n}: {e}"))?;
            // A line too long to hold, or not UTF-8, is still the model's answer when its id reads.
            let (parsed, flaw) = match line {
                JsonLine::Whole(b) if b.iter().all(u8::is_ascii_whitespace) => continue,
                JsonLine::Whole(b) => match String::from_utf8(b) {
                    Ok(s) => (doc2ci_llm::batch::parse_result_line(&s), None),
                    Err(e) => (
                        doc2ci_llm::batch::parse_result_line(&String::from_utf8_lossy(e.as_bytes())),
                        Some("undecodable"),
                    ),
                },
                JsonLine::Long { bytes, scanned } => {
                    let id = scanned.ok().and_then(|cells| cells.into_iter().find(|(k, _)| k == "custom_id"));
                    match id.and_then(|(_, c)| c.text.filter(|_| c.flaw.is_none())) {
                        // Its answer is not held: an oversized answer, no text kept.
                        Some(id) => (Ok((id, Ok((String::new(), None, None, None)))), Some("oversized")),
                        None => (Err(format!("a line of {} MiB whose custom_id cannot be read", bytes >> 20)), None),
                    }
                }
            };
            let row = (|| {
                let (id, r) = parsed?;
                let (pair, sample, round) = doc2ci_generate::parse_custom_id(&id)
                    .ok_or_else(|| format!("custom_id {id:?} is not pair/sample/round"))?;
                if !known.contains(pair) {
                    return Err(format!("custom_id {id:?}: pair {pair} is not a pair of service `{}`", m.service));
                }
                if let Some(first) = seen.insert((pair.to_string(), sample, round), n) {
                    return Err(format!("custom_id {id:?} repeats line {first}"));
                }
                let answer = r
                    .map(|(text, finish_reason, prompt_tokens, completion_tokens)| doc2ci_generate::Answer {
                        text,
                        prompt_tokens,
                        completion_tokens,
                        finish_reason,
                        attempts: 1,
                        ..Default::default()
                    })
                    .map_err(|e| crate::generation::failure(&who, &e));
                let key = doc2ci_rows::RowKey {
                    pair_id: pair.to_string(),
                    service: m.service.clone(),
                    model: self.name.clone(),
                    sample,
                    round,
                };
                let mut g = doc2ci_generate::answer_row(key, answer, (None, None));
                // The file does not say how long anything took.
                g.latency_ms = None;
                if let (Some(kind), None) = (flaw, &g.error) {
                    (g.degenerate, g.degenerate_kind) = (true, Some(kind.to_string()));
                    if kind == "oversized" {
                        (g.output, g.raw_output) = (None, None);
                    }
                }
                Ok(g)
            })();
            match row {
                Ok(g) => rows.push(g),
                Err(e) if m.skip_bad_rows => {
                    skipped += 1;
                    first_bad.get_or_insert(format!("{name}:{n}: {e}"));
                }
                Err(e) => bail!("{name}:{n}: {e}"),
            }
        }
        let order: std::collections::HashMap<&str, u64> =
            pairs.iter().map(|p| (p.pair_id.as_str(), p.position)).collect();
        rows.sort_by_key(|g| (g.round, order.get(g.pair_id.as_str()).copied(), g.sample));
        let mut note = format!("{} batch results attached", rows.len());
        if let Some(b) = first_bad {
            note.push_str(&format!("; skipped {skipped} bad lines (skip_bad_rows = true), e.g. {b}"));
        }
        cx.publish(&rows, Some(note))
    }
}

struct FileSpec<'a> {
    path: &'a PathBuf,
    format: &'a str,
    /// The columns the import reads (a Parquet file's others are never decoded).
    columns: Vec<String>,
    skip_bad: bool,
    batch_size: u64,
}

/// Streams a file's records through `convert` (given the record's 0-based index), one
/// checkpointed batch every `batch_size` records.
fn batched<T, F>(cx: &Ctx, file: &FileSpec, mut convert: F) -> Result<(Vec<T>, Option<String>)>
where
    T: Serialize + DeserializeOwned,
    F: FnMut(Record, u64) -> std::result::Result<Option<T>, ImportError>,
{
    let mut batches = cx.batches::<T>()?;
    let done = batches.done();
    let mut skipped = batches.skipped();
    if done > 0 {
        cx.ui.info(&format!("{}: resuming after {done} records", cx.label()));
    }
    let mut batch: Vec<T> = Vec::new();
    let mut consumed = 0u64;
    let mut first_bad: Vec<String> = Vec::new();
    let name = file.path.display();
    for rec in records(file.path, file.format, &file.columns)? {
        consumed += 1;
        if consumed <= done {
            continue;
        }
        match rec.and_then(|rec| convert(rec, consumed - 1)) {
            Ok(Some(row)) => batch.push(row),
            Ok(None) => {}
            // A column missing from the header (or the first JSON record) is missing from every row:
            // skipping rows would "succeed" with nothing.
            Err(e) if e.missing_column.is_some() && (file.format != "jsonl" || consumed == 1) => bail!(
                "{name}: {} (file-level: no row of this file can be read; skip_bad_rows skips bad rows, not a missing column)",
                e.message
            ),
            Err(e) if e.unreadable => bail!("{name}:{}: {}", e.line, e.message),
            Err(e) if file.skip_bad => {
                skipped += 1;
                if first_bad.len() < 3 {
                    first_bad.push(format!("{name}:{}: {}", e.line, e.message));
                }
            }
            Err(e) => bail!("{name}:{}: {}", e.line, e.message),
        }
        if consumed.is_multiple_of(file.batch_size) {
            batches.commit(std::mem::take(&mut batch), consumed, skipped)?;
        }
    }
    let mut rows = batches.into_rows();
    rows.append(&mut batch);
    let note = (skipped > 0)
        .then(|| format!("skipped {skipped} bad rows (skip_bad_rows = true), e.g. {}", first_bad.join("; ")));
    if let Some(n) = &note {
        cx.ui.info(&format!("{}: {n}", cx.label()));
    }
    Ok((rows, note))
}

type Records = Box<dyn Iterator<Item = std::result::Result<Record, ImportError>>>;

fn records(path: &Path, format: &str, wanted: &[String]) -> Result<Records> {
    let name = path.display().to_string();
    match format {
        "llm4ci" | "csv" => {
            let it = doc2ci_import::csv_records(open_input(path)?)
                .map_err(|e| anyhow!("{name}:{}: {}", e.line, e.message))?;
            Ok(Box::new(it))
        }
        "jsonl" => Ok(Box::new(doc2ci_import::jsonl_records(BufReader::new(open_input(path)?)))),
        "benchmark" => {
            let bytes = crate::benchmark::verified_pairs(path)?;
            Ok(Box::new(doc2ci_import::jsonl_records(std::io::Cursor::new(bytes))))
        }
        "parquet" => parquet_records(path, wanted),
        other => bail!("{name}: unknown format `{other}`"),
    }
}

/// Opens a file, decompressing gzip when its magic bytes say so (whatever its name), with a
/// decompression-ratio limit: deflate reaches ~1,000:1 only on crafted input (a gzip bomb), real
/// CSV and JSON Lines stay far below [`MAX_RATIO`].
pub fn open_input(path: &Path) -> Result<Box<dyn Read>> {
    let mut f = File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
    let mut magic = [0u8; 2];
    let n = f.read(&mut magic)?;
    let compressed = f.metadata()?.len();
    let f = File::open(path)?;
    if n == 2 && magic == [0x1f, 0x8b] {
        let limit = compressed.saturating_mul(MAX_RATIO).saturating_add(RATIO_GRACE);
        let gz = flate2::read::MultiGzDecoder::new(BufReader::new(f));
        Ok(Box::new(BufReader::new(Capped { inner: gz, left: limit, path: path.to_path_buf(), compressed })))
    } else {
        Ok(Box::new(BufReader::new(f)))
    }
}

/// Decompressed bytes allowed per compressed byte, beyond [`RATIO_GRACE`].
const MAX_RATIO: u64 = 100;
const RATIO_GRACE: u64 = 64 << 20;

/// A reader that fails once more than `left` bytes came out of it.
struct Capped<R> {
    inner: R,
    left: u64,
    path: PathBuf,
    compressed: u64,
}

impl<R: Read> Read for Capped<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.left = self.left.checked_sub(n as u64).ok_or_else(|| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!(
                    "{}: decompresses to more than {MAX_RATIO} times its {} bytes: not read further (a gzip bomb?)",
                    self.path.display(),
                    self.compressed
                ),
            )
        })?;
        Ok(n)
    }
}

/// Rows decoded at a time: a Parquet file is read a few hundred rows at once, whatever its size.
const PARQUET_ROWS: usize = 256;

/// The largest column chunk (one column of one row group, uncompressed) read; larger is refused
/// from the file's footer, before any of it is decoded.
const MAX_PARQUET_CHUNK: i64 = 1 << 30;

/// Parquet rows as records of text fields, read [`PARQUET_ROWS`] at a time and only in the
/// columns the import maps (`wanted`); "line" is the 1-based row number.
fn parquet_records(path: &Path, wanted: &[String]) -> Result<Records> {
    use datafusion::parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
    let name = path.display().to_string();
    let f = File::open(path).with_context(|| format!("cannot open {name}"))?;
    let builder = ParquetRecordBatchReaderBuilder::try_new(f)
        .with_context(|| format!("{name} is not a readable Parquet file"))?;
    let schema = builder.parquet_schema();
    let leaves: Vec<usize> = (0..schema.num_columns())
        .filter(|&i| schema.column(i).path().parts().first().is_some_and(|c| wanted.contains(c)))
        .collect();
    for (g, rg) in builder.metadata().row_groups().iter().enumerate() {
        for &i in &leaves {
            let size = rg.column(i).uncompressed_size();
            if !(0..=MAX_PARQUET_CHUNK).contains(&size) {
                bail!(
                    "{name}: row group {g}, column `{}`: {size} bytes uncompressed, over the {} MiB read at once",
                    schema.column(i).path().string(),
                    MAX_PARQUET_CHUNK >> 20
                );
            }
        }
    }
    // The other columns are named in every record, without a value: a missing column's error
    // lists the file's columns, not only the decoded ones.
    let skipped: Vec<String> =
        builder.schema().fields().iter().map(|f| f.name().clone()).filter(|n| !wanted.contains(n)).collect();
    let mask = datafusion::parquet::arrow::ProjectionMask::leaves(schema, leaves);
    let reader = builder.with_projection(mask).with_batch_size(PARQUET_ROWS).build()?;
    let opts = FormatOptions::default();
    let (mut line, mut failed) = (0u64, false);
    let batches = reader.map_while(move |b| {
        if failed {
            return None;
        }
        let rows = b
            .map_err(|e| format!("cannot read the rows from here on: {e}"))
            .and_then(|b| batch_records(&b, &opts, &skipped, &mut line));
        Some(rows.unwrap_or_else(|why| {
            failed = true;
            vec![Err(ImportError::unreadable(line + 1, why))]
        }))
    });
    Ok(Box::new(batches.flatten()))
}

/// One decoded batch as records, numbered on from `line`; Err when a column cannot be read as text.
fn batch_records(
    b: &datafusion::arrow::record_batch::RecordBatch,
    opts: &FormatOptions,
    skipped: &[String],
    line: &mut u64,
) -> std::result::Result<Vec<std::result::Result<Record, ImportError>>, String> {
    let fmts = b
        .columns()
        .iter()
        .map(|c| ArrayFormatter::try_new(c.as_ref(), opts))
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(|e| format!("a column doc2ci cannot read as text: {e}"))?;
    let schema = b.schema();
    Ok((0..b.num_rows())
        .map(|row| {
            *line += 1;
            let fields = schema
                .fields()
                .iter()
                .zip(b.columns())
                .zip(&fmts)
                .map(|((f, col), fmt)| (f.name().clone(), (!col.is_null(row)).then(|| fmt.value(row).to_string())))
                .chain(skipped.iter().map(|n| (n.clone(), None)));
            Ok(Record::from_texts(*line, fields))
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::open_input;
    use std::io::{Read, Write};

    /// Issue 31: a gzip bomb stops at the decompression-ratio limit, with the file named, instead of
    /// filling memory or disk.
    #[test]
    fn a_gzip_bomb_stops_at_the_ratio_limit() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("pairs.csv.gz");
        let mut gz = flate2::write::GzEncoder::new(std::fs::File::create(&path).unwrap(), flate2::Compression::best());
        let zeros = vec![0u8; 1 << 20];
        for _ in 0..256 {
            gz.write_all(&zeros).unwrap();
        }
        gz.finish().unwrap();
        let mut sink = [0u8; 1 << 16];
        let (mut r, mut read) = (open_input(&path).unwrap(), 0u64);
        let e = loop {
            match r.read(&mut sink) {
                Ok(0) => panic!("a 256 MiB bomb of {} bytes was read whole", std::fs::metadata(&path).unwrap().len()),
                Ok(n) => read += n as u64,
                Err(e) => break e.to_string(),
            }
        };
        assert!(e.contains("pairs.csv.gz") && e.contains("gzip bomb"), "{e}");
        assert!(read < 128 << 20, "read {read} bytes before stopping");
    }

    /// Issue 31: a Parquet file is read only in the columns the import maps, a few hundred rows at
    /// a time: a column it does not map is never decoded, however large its cells (the whole
    /// file used to be read, every column as text, and the 9 MiB cells failed the cell check).
    #[test]
    fn parquet_import_decodes_only_the_mapped_columns() {
        use datafusion::arrow::array::{ArrayRef, StringArray};
        use std::sync::Arc;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("outputs.parquet");
        let n = 600;
        let ids: Vec<String> = (0..n).map(|i| format!("p{i}")).collect();
        let junk = "x".repeat(9 << 20);
        let cols: Vec<(&str, ArrayRef)> = vec![
            ("id", Arc::new(StringArray::from(ids.clone()))),
            ("output", Arc::new(StringArray::from(vec!["on: push"; n]))),
            ("junk", Arc::new(StringArray::from((0..n).map(|i| (i < 3).then_some(junk.as_str())).collect::<Vec<_>>()))),
        ];
        let batch = datafusion::arrow::record_batch::RecordBatch::try_from_iter(cols).unwrap();
        let mut w = datafusion::parquet::arrow::ArrowWriter::try_new(
            std::fs::File::create(&path).unwrap(),
            batch.schema(),
            None,
        )
        .unwrap();
        w.write(&batch).unwrap();
        w.close().unwrap();
        let recs: Vec<_> = super::parquet_records(&path, &["id".into(), "output".into(), "error".into()])
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(recs.len(), n);
        for (i, r) in recs.iter().enumerate() {
            assert_eq!(r.line, i as u64 + 1);
            assert_eq!(r.fields.len(), 3, "{:?}", r.fields.keys());
            assert_eq!(r.fields["junk"], None, "an unmapped column is named, never decoded");
            assert_eq!(r.fields["id"].as_deref(), Some(ids[i].as_str()));
            r.check_cells(&[]).unwrap();
        }
    }
}
