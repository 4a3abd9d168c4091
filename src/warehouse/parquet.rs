//! Rows ↔ Parquet: serde_arrow maps a stage's row structs to Arrow (stage crates never see Arrow),
//! zstd-compressed files of 64k-row groups; partition columns live in folder names, not in files.

use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{anyhow, Context, Result};
use datafusion::arrow::array::{ArrayRef, RecordBatch, StringArray};
use datafusion::arrow::datatypes::{DataType, Field, FieldRef, Schema};
use datafusion::parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use datafusion::parquet::arrow::{ArrowWriter, ProjectionMask};
use datafusion::parquet::basic::{Compression, ZstdLevel};
use datafusion::parquet::file::properties::WriterProperties;
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_arrow::schema::{SchemaLike, TracingOptions};

use super::{atomic_write, Partition};

pub(super) fn tracing_options() -> TracingOptions {
    TracingOptions::default().allow_null_fields(true).strings_as_large_utf8(false)
}

pub(super) fn encode_parquet<T: Serialize + DeserializeOwned>(
    p: &Partition,
    rows: &[T],
    fields: Option<&[FieldRef]>,
) -> Result<Vec<u8>> {
    let drop: Vec<&str> = p.values.iter().map(|(k, _)| k.as_str()).collect();
    encode_rows_as(rows, &drop, fields)
}

/// Rows → one Parquet file in memory, without the columns that the folder names carry.
pub fn encode_rows<T: Serialize + DeserializeOwned>(rows: &[T], drop: &[&str]) -> Result<Vec<u8>> {
    encode_rows_as(rows, drop, None)
}

/// As [`encode_rows`], with the columns `fields` rather than traced from `T` when given.
fn encode_rows_as<T: Serialize + DeserializeOwned>(
    rows: &[T],
    drop: &[&str],
    fields: Option<&[FieldRef]>,
) -> Result<Vec<u8>> {
    let traced;
    let fields = match fields {
        Some(f) => f,
        None => {
            traced = Vec::<FieldRef>::from_type::<T>(tracing_options()).map_err(|e| anyhow!("schema of rows: {e}"))?;
            &traced
        }
    };
    let batch = serde_arrow::to_record_batch(fields, &rows).map_err(|e| anyhow!("rows to Arrow: {e}"))?;
    let keep: Vec<usize> = batch
        .schema()
        .fields()
        .iter()
        .enumerate()
        .filter(|(_, f)| !drop.contains(&f.name().as_str()))
        .map(|(i, _)| i)
        .collect();
    let batch = batch.project(&keep)?;
    let props = WriterProperties::builder()
        .set_compression(Compression::ZSTD(ZstdLevel::try_new(3)?))
        .set_max_row_group_row_count(Some(64 * 1024))
        .build();
    let mut buf = Vec::new();
    let mut w = ArrowWriter::try_new(&mut buf, batch.schema(), Some(props))?;
    w.write(&batch)?;
    w.close()?;
    Ok(buf)
}

/// A standalone Parquet file of rows (caches outside the table folders), written atomically.
pub fn write_rows_file<T: Serialize + DeserializeOwned>(path: &Path, rows: &[T]) -> Result<()> {
    atomic_write(path, &encode_rows(rows, &[])?)
}

/// As [`write_rows_file`], with the columns traced from `template` (rows whose columns are data:
/// `scores`, with `Score::template`).
pub fn write_rows_file_like<T: Serialize + DeserializeOwned>(path: &Path, rows: &[T], template: &T) -> Result<()> {
    let fields = Vec::<FieldRef>::from_samples(std::slice::from_ref(template), tracing_options())
        .map_err(|e| anyhow!("schema of rows: {e}"))?;
    atomic_write(path, &encode_rows_as(rows, &[], Some(&fields))?)
}

pub fn parquet_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = fs::read_dir(dir)
        .map(|rd| rd.flatten().map(|e| e.path()).filter(|p| p.extension().is_some_and(|e| e == "parquet")).collect())
        .unwrap_or_default();
    files.sort();
    files
}

/// Reads a Parquet file back into rows, restoring the partition columns from the folder names.
pub fn read_file_rows<T: DeserializeOwned>(path: &Path, p: Option<&Partition>) -> Result<Vec<T>> {
    decode(read_batches(path)?, path, p)
}

/// As [`read_file_rows`], decoding only `columns` (a reader of narrow columns of a wide table
/// never pays for its texts).
pub fn read_file_columns<T: DeserializeOwned>(path: &Path, p: Option<&Partition>, columns: &[&str]) -> Result<Vec<T>> {
    let f = File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
    let b = ParquetRecordBatchReaderBuilder::try_new(f)
        .with_context(|| format!("{} is not a readable Parquet file", path.display()))?;
    let mask = ProjectionMask::columns(b.parquet_schema(), columns.iter().copied());
    let batches = b
        .with_projection(mask)
        .build()?
        .collect::<std::result::Result<Vec<_>, _>>()
        .with_context(|| format!("cannot read {}", path.display()))?;
    decode(batches, path, p)
}

fn decode<T: DeserializeOwned>(batches: Vec<RecordBatch>, path: &Path, p: Option<&Partition>) -> Result<Vec<T>> {
    let mut out = Vec::new();
    for b in batches {
        let b = match p {
            Some(p) if !p.values.is_empty() => with_partition_cols(&b, p)?,
            _ => b,
        };
        let mut rows: Vec<T> =
            serde_arrow::from_record_batch(&b).map_err(|e| anyhow!("{}: cannot decode rows: {e}", path.display()))?;
        out.append(&mut rows);
    }
    Ok(out)
}

pub fn read_batches(path: &Path) -> Result<Vec<RecordBatch>> {
    let f = File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
    let reader = ParquetRecordBatchReaderBuilder::try_new(f)
        .with_context(|| format!("{} is not a readable Parquet file", path.display()))?
        .build()?;
    reader.collect::<std::result::Result<Vec<_>, _>>().with_context(|| format!("cannot read {}", path.display()))
}

fn with_partition_cols(b: &RecordBatch, p: &Partition) -> Result<RecordBatch> {
    let mut fields: Vec<Field> = b.schema().fields().iter().map(|f| f.as_ref().clone()).collect();
    let mut cols: Vec<ArrayRef> = b.columns().to_vec();
    for (k, v) in &p.values {
        fields.push(Field::new(k, DataType::Utf8, false));
        cols.push(Arc::new(StringArray::from(vec![v.as_str(); b.num_rows()])));
    }
    Ok(RecordBatch::try_new(Arc::new(Schema::new(fields)), cols)?)
}
