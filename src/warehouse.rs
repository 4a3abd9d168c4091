//! The Parquet warehouse: Hive-partitioned tables that readers may query at any moment.
//!
//! A partition is one Parquet file in a leaf folder (`scores/service=…/model=…/part-0.parquet`;
//! repair rounds add `round-1.parquet`, … beside it, each its own partition with a `round`
//! column inside). It is written complete in a staging folder and renamed over its target in
//! one step, so a concurrent `read_parquet('scores/**/*.parquet')` sees either the old rows or
//! the new ones, never both.
//! Engine bookkeeping lives under `_doc2ci/`, outside every table folder.
//!
//! Long on purpose: the table definitions, the atomic publish, the run lock, checkpoints and the
//! Parquet encoding are one storage contract (SPEC §2); splitting them would spread its rules.

use std::collections::BTreeMap;
use std::fs::{self, File};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{anyhow, bail, Context, Result};
use datafusion::arrow::array::{ArrayRef, RecordBatch, StringArray};
use datafusion::arrow::datatypes::{DataType, Field, FieldRef, Schema};
use datafusion::parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use datafusion::parquet::arrow::ArrowWriter;
use datafusion::parquet::basic::{Compression, ZstdLevel};
use datafusion::parquet::file::properties::WriterProperties;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_arrow::schema::{SchemaLike, TracingOptions};

/// A table and the columns that live in its folder names rather than its files.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TableDef {
    pub name: &'static str,
    pub partition_cols: &'static [&'static str],
}

pub const PAIRS_RAW: TableDef = TableDef { name: "pairs_raw", partition_cols: &["service", "source"] };
/// Crawled pages, raw HTML included (compressed by the Parquet writer).
pub const PAGES: TableDef = TableDef { name: "pages", partition_cols: &["service", "source"] };
/// Every code block extraction met on the crawled pages, and what became of it (the crawl summary).
pub const CODE_BLOCKS: TableDef = TableDef { name: "code_blocks", partition_cols: &["service", "source"] };
pub const PAIRS: TableDef = TableDef { name: "pairs", partition_cols: &["service"] };
pub const GENERATIONS: TableDef = TableDef { name: "generations", partition_cols: &["service", "model"] };
pub const MODELS: TableDef = TableDef { name: "models", partition_cols: &[] };
/// Validity of each pair's own reference (the study reports how many are fragments).
pub const PAIR_VALIDATIONS: TableDef = TableDef { name: "pair_validations", partition_cols: &["service"] };
pub const VALIDATIONS: TableDef = TableDef { name: "validations", partition_cols: &["service", "model"] };
pub const SCORES: TableDef = TableDef { name: "scores", partition_cols: &["service", "model"] };
/// Each lint tool's verdict on each output and reference (`model = "reference"`).
pub const LINTS: TableDef = TableDef { name: "lints", partition_cols: &["service", "model"] };
/// What each repair round revisited and fixed, per service and model.
pub const REPAIRS: TableDef = TableDef { name: "repairs", partition_cols: &["service", "model"] };

/// The study's tests in tidy rows (one partition: they compare across services and models).
pub const STATS: TableDef = TableDef { name: "stats", partition_cols: &[] };
/// The report's files (HTML, Markdown, CSV, SVG) live in this folder beside its index rows.
pub const REPORT: TableDef = TableDef { name: "report", partition_cols: &[] };

pub const TABLES: &[TableDef] = &[
    PAGES,
    CODE_BLOCKS,
    PAIRS_RAW,
    PAIRS,
    GENERATIONS,
    MODELS,
    PAIR_VALIDATIONS,
    VALIDATIONS,
    SCORES,
    LINTS,
    REPAIRS,
    STATS,
    REPORT,
];

pub fn table(name: &str) -> Option<TableDef> {
    TABLES.iter().copied().find(|t| t.name == name)
}

/// One leaf folder of a table; its id (`pairs/service=x`) is also its relative path.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Partition {
    pub table: &'static str,
    pub values: Vec<(String, String)>,
    /// A named file beside the folder's `part-0.parquet` (repair round k: `round-k`).
    pub file: Option<String>,
}

impl Partition {
    pub fn new(t: TableDef, values: &[&str]) -> Self {
        assert_eq!(t.partition_cols.len(), values.len(), "partition arity of {}", t.name);
        Self {
            table: t.name,
            values: t.partition_cols.iter().zip(values).map(|(k, v)| (k.to_string(), v.to_string())).collect(),
            file: None,
        }
    }
    pub fn with_file(mut self, name: &str) -> Self {
        self.file = Some(name.to_string());
        self
    }
    /// `generations/service=a/model=b`, or `…/model=b#round-1` for a named file.
    pub fn id(&self) -> String {
        let mut s = self.table.to_string();
        for (k, v) in &self.values {
            s.push_str(&format!("/{k}={v}"));
        }
        if let Some(f) = &self.file {
            s.push('#');
            s.push_str(f);
        }
        s
    }
    pub fn file_name(&self) -> String {
        format!("{}.parquet", self.file.as_deref().unwrap_or("part-0"))
    }
    /// The partition of table `t` with this one's values and file: the validations (or scores)
    /// of a generations partition, repair round included.
    pub fn sibling(&self, t: TableDef) -> Partition {
        assert_eq!(t.partition_cols.len(), self.values.len(), "partition arity of {}", t.name);
        Partition { table: t.name, values: self.values.clone(), file: self.file.clone() }
    }
    pub fn get(&self, col: &str) -> Option<&str> {
        self.values.iter().find(|(k, _)| k == col).map(|(_, v)| v.as_str())
    }
}

/// What the engine remembers of a finished partition; the cache key decides reuse.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct PartState {
    pub stage: String,
    pub key: String,
    pub output_hash: String,
    pub rows: u64,
    /// The stage's code version; older warehouses stored a hand-written number, read as text so
    /// they are told "stage code changed" rather than refused.
    #[serde(deserialize_with = "version_text")]
    pub version: String,
    pub params_hash: String,
    /// Input name → content hash, so `plan` can say which input changed.
    pub inputs: BTreeMap<String, String>,
    pub finished_at: String,
    #[serde(default)]
    pub seconds: f64,
    /// The file as published: its size and modification time. A file whose size differs is not
    /// the output; one whose time differs is hashed again (absent in older warehouses: hashed).
    #[serde(default)]
    pub bytes: Option<u64>,
    #[serde(default)]
    pub mtime_ns: Option<i128>,
}

/// A file's size and modification time (ns since the epoch), as [`PartState`] records them.
pub fn stamp(path: &Path) -> std::io::Result<(u64, Option<i128>)> {
    let m = fs::metadata(path)?;
    let t = m.modified().ok().and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok()).map(|d| d.as_nanos() as i128);
    Ok((m.len(), t))
}

fn version_text<'de, D: serde::Deserializer<'de>>(d: D) -> std::result::Result<String, D::Error> {
    Ok(match serde_json::Value::deserialize(d)? {
        serde_json::Value::String(s) => s,
        other => other.to_string(),
    })
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct RunInfo {
    pub started_at: String,
    pub finished_at: String,
    pub config: String,
    pub ran: usize,
    pub reused: usize,
    pub failed: usize,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct State {
    pub partitions: BTreeMap<String, PartState>,
    pub last_run: Option<RunInfo>,
}

pub struct Warehouse {
    pub root: PathBuf,
}

/// Held for the whole run; the kernel drops it if the process dies, so `kill -9` never wedges.
pub struct Lock {
    _file: File,
}

impl Warehouse {
    pub fn new(root: &Path) -> Self {
        Self { root: root.to_path_buf() }
    }

    pub fn meta(&self) -> PathBuf {
        self.root.join("_doc2ci")
    }

    pub fn lock(&self) -> Result<Lock> {
        fs::create_dir_all(self.meta()).with_context(|| format!("cannot create warehouse {}", self.root.display()))?;
        let path = self.meta().join("lock");
        let mut file = fs::OpenOptions::new().create(true).truncate(false).read(true).write(true).open(&path)?;
        use std::os::unix::io::AsRawFd;
        // SAFETY: flock on a file descriptor we own; no memory is shared.
        let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
        if rc != 0 {
            let holder = fs::read_to_string(&path).unwrap_or_default();
            bail!(
                "warehouse {} is in use by another doc2ci run ({}); wait for it to finish",
                self.root.display(),
                holder.trim().if_empty("unknown process")
            );
        }
        file.set_len(0)?;
        writeln!(file, "pid {} since {}", std::process::id(), now())?;
        Ok(Lock { _file: file })
    }

    pub fn load_state(&self) -> Result<State> {
        let p = self.meta().join("state.json");
        match fs::read(&p) {
            Ok(b) => serde_json::from_slice(&b)
                .with_context(|| format!("corrupt engine state {}: delete it to rebuild from scratch", p.display())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(State::default()),
            Err(e) => Err(e).with_context(|| format!("cannot read {}", p.display())),
        }
    }

    /// This warehouse's id, made once: what a mirror records as its owner.
    pub fn id(&self) -> Result<String> {
        let path = self.meta().join("id");
        if let Ok(id) = fs::read_to_string(&path) {
            if !id.trim().is_empty() {
                return Ok(id.trim().to_string());
            }
        }
        fs::create_dir_all(self.meta())?;
        let seed = format!("{}\n{}", self.root.display(), unique());
        let id = blake3::hash(seed.as_bytes()).to_hex()[..32].to_string();
        atomic_write(&path, id.as_bytes())?;
        Ok(id)
    }

    pub fn save_state(&self, st: &State) -> Result<()> {
        fs::create_dir_all(self.meta())?;
        atomic_write(&self.meta().join("state.json"), &serde_json::to_vec_pretty(st)?)
    }

    /// The leaf folder holding the partition's file (shared with the other rounds).
    pub fn dir(&self, p: &Partition) -> PathBuf {
        let mut d = self.root.join(p.table);
        for (k, v) in &p.values {
            d.push(format!("{k}={v}"));
        }
        d
    }

    pub fn file(&self, p: &Partition) -> PathBuf {
        self.dir(p).join(p.file_name())
    }

    pub fn checkpoint(&self, p: &Partition, key: &str) -> Checkpoint {
        Checkpoint { dir: self.meta().join("checkpoints").join(p.id().replace('/', "~")).join(&key[..16]) }
    }

    /// Writes `rows` as the partition's entire content and returns the content hash.
    pub fn write<T: Serialize + DeserializeOwned>(&self, p: &Partition, rows: &[T]) -> Result<String> {
        self.write_with(p, rows, &[])
    }

    /// As [`Self::write`], with extra files (relative path, bytes) beside the rows, e.g. the
    /// report's HTML and figures. Each lands by rename; the rows file goes last, so a reader that
    /// finds the rows also finds the files they index.
    pub fn write_with<T: Serialize + DeserializeOwned>(
        &self,
        p: &Partition,
        rows: &[T],
        extra: &[(String, Vec<u8>)],
    ) -> Result<String> {
        self.write_as(p, rows, extra, None)
    }

    /// As [`Self::write`], with the file's columns traced from `template` instead of from `T`'s
    /// type: for rows whose columns are data the type cannot describe. `scores` is one (a column
    /// per metric of the score stage's registry): pass `Score::template(doc2ci_score::metric_infos())`.
    pub fn write_like<T: Serialize + DeserializeOwned>(
        &self,
        p: &Partition,
        rows: &[T],
        template: &T,
    ) -> Result<String> {
        let fields = Vec::<FieldRef>::from_samples(std::slice::from_ref(template), tracing_options())
            .map_err(|e| anyhow!("schema of rows: {e}"))?;
        self.write_as(p, rows, &[], Some(&fields))
    }

    /// The rows file's columns are `fields`, or traced from `T` when None.
    fn write_as<T: Serialize + DeserializeOwned>(
        &self,
        p: &Partition,
        rows: &[T],
        extra: &[(String, Vec<u8>)],
        fields: Option<&[FieldRef]>,
    ) -> Result<String> {
        let staging = self.meta().join("staging");
        fs::create_dir_all(&staging)?;
        let target = self.dir(p);
        for (rel, bytes) in extra {
            if rel.starts_with('/') || rel.split('/').any(|c| c == ".." || c.is_empty()) {
                bail!("internal: extra file path `{rel}` must be relative");
            }
            let tmp = staging.join(format!("extra-{}.tmp", unique()));
            fs::write(&tmp, bytes).with_context(|| format!("cannot write {}", tmp.display()))?;
            let path = target.join(rel);
            fs::create_dir_all(path.parent().expect("joined path has a parent"))?;
            fs::rename(&tmp, &path).with_context(|| format!("cannot move {} into place", path.display()))?;
        }
        let bytes = encode_parquet(p, rows, fields)?;
        let tmp = staging.join(format!("{}-{}.tmp", p.id().replace(['/', '#'], "~"), unique()));
        {
            let mut f = File::create(&tmp)?;
            f.write_all(&bytes)?;
            f.sync_all()?;
        }
        fs::create_dir_all(&target)?;
        fs::rename(&tmp, self.file(p)).with_context(|| format!("cannot move partition into {}", target.display()))?;
        sync_dir(&target)?;
        Ok(blake3::hash(&bytes).to_hex().to_string())
    }

    /// Why the partition's file is not what was published as `st` (None: it is). Size first, then
    /// the content hash only when size or time differ, so a no-op run reads no file.
    pub fn unpublished(&self, p: &Partition, st: &PartState) -> Option<String> {
        let f = self.file(p);
        let Ok((bytes, mtime)) = stamp(&f) else { return Some("output missing from the warehouse".into()) };
        if st.bytes.is_some_and(|b| b != bytes) {
            return Some("output on disk is not what was published (size changed)".into());
        }
        if st.bytes.is_some() && st.mtime_ns.is_some() && st.mtime_ns == mtime {
            return None;
        }
        let same = File::open(&f)
            .and_then(|fh| blake3::Hasher::new().update_reader(fh).map(|h| h.finalize().to_hex().to_string()))
            .is_ok_and(|h| h == st.output_hash);
        (!same).then(|| "output on disk is not what was published (content changed)".into())
    }

    /// The partition's rows; none when it was never written.
    pub fn read<T: DeserializeOwned>(&self, p: &Partition) -> Result<Vec<T>> {
        let f = self.file(p);
        if !f.exists() {
            return Ok(Vec::new());
        }
        read_file_rows(&f, Some(p))
    }

    pub fn remove(&self, p: &Partition) -> Result<()> {
        let d = self.dir(p);
        let f = self.file(p);
        if f.exists() {
            fs::remove_file(&f)?;
        }
        // Files of older layouts are not partitions of their own; an otherwise empty folder goes.
        if p.file.is_none()
            && d.exists()
            && !parquet_files(&d)
                .iter()
                .any(|x| x.file_name().is_some_and(|n| n.to_string_lossy().starts_with("round-")))
        {
            let trash = self.meta().join("staging").join(format!("trash-{}", unique()));
            fs::create_dir_all(trash.parent().unwrap())?;
            fs::rename(&d, &trash)?;
            fs::remove_dir_all(&trash)?;
        }
        let _ = fs::remove_dir(&d);
        // Leave no empty `service=…` folders behind.
        let mut parent = d.parent().map(Path::to_path_buf);
        while let Some(pp) = parent {
            if pp == self.root || fs::remove_dir(&pp).is_err() {
                break;
            }
            parent = pp.parent().map(Path::to_path_buf);
        }
        Ok(())
    }

    /// Every partition currently on disk for a table (leaf folders, and named files as `…#name`).
    pub fn partitions_on_disk(&self, t: TableDef) -> Vec<String> {
        let mut out = Vec::new();
        let base = self.root.join(t.name);
        fn walk(dir: &Path, depth: usize, prefix: String, out: &mut Vec<String>) {
            if depth == 0 {
                let files = parquet_files(dir);
                if files.is_empty() || files.iter().any(|f| f.file_name().is_some_and(|n| n == "part-0.parquet")) {
                    out.push(prefix.clone());
                }
                for f in files {
                    let name = f.file_stem().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
                    if name != "part-0" {
                        out.push(format!("{prefix}#{name}"));
                    }
                }
                return;
            }
            if let Ok(rd) = fs::read_dir(dir) {
                let mut names: Vec<_> = rd
                    .flatten()
                    .filter(|e| e.path().is_dir())
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect();
                names.sort();
                for n in names {
                    walk(&dir.join(&n), depth - 1, format!("{prefix}/{n}"), out);
                }
            }
        }
        if base.exists() {
            walk(&base, t.partition_cols.len(), t.name.to_string(), &mut out);
        }
        out
    }
}

trait IfEmpty {
    fn if_empty<'a>(&'a self, alt: &'a str) -> &'a str;
}
impl IfEmpty for str {
    fn if_empty<'a>(&'a self, alt: &'a str) -> &'a str {
        if self.is_empty() {
            alt
        } else {
            self
        }
    }
}

/// Batches of a long stage, written as they finish so a killed run resumes after the last one.
pub struct Checkpoint {
    dir: PathBuf,
}

impl Checkpoint {
    /// Rows of finished batches, how far into the input the last one reached, how many
    /// batches there are, and how many bad records were skipped so far.
    pub fn resume<T: DeserializeOwned>(&self) -> Result<(Vec<T>, u64, usize, u64)> {
        let mut files = self.batch_files()?;
        files.sort();
        let (mut rows, mut done, mut skipped) = (Vec::new(), 0u64, 0u64);
        for (name, path) in &files {
            let mut r: Vec<T> = read_file_rows(path, None)?;
            rows.append(&mut r);
            let parts: Vec<u64> =
                name.trim_end_matches(".parquet").split('-').skip(1).filter_map(|s| s.parse().ok()).collect();
            if let [_, d, s] = parts[..] {
                (done, skipped) = (d, s);
            }
        }
        Ok((rows, done, files.len(), skipped))
    }

    /// `done` is how far into the input this batch reaches (records consumed so far).
    pub fn commit<T: Serialize + DeserializeOwned>(
        &self,
        seq: usize,
        done: u64,
        skipped: u64,
        rows: &[T],
    ) -> Result<()> {
        fs::create_dir_all(&self.dir)?;
        let bytes = encode_rows(rows, &[])?;
        atomic_write(&self.dir.join(format!("batch-{seq:06}-{done:012}-{skipped:09}.parquet")), &bytes)
    }

    /// A small side record of a running job (an in-flight provider batch's id), kept with the
    /// batches and dropped with them at publish.
    pub fn note(&self, name: &str) -> Result<Option<serde_json::Value>> {
        let path = self.dir.join(format!("note-{name}.json"));
        match fs::read(&path) {
            Ok(b) => Ok(Some(
                serde_json::from_slice(&b).with_context(|| format!("checkpoint note {} is corrupt", path.display()))?,
            )),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e).with_context(|| format!("cannot read {}", path.display())),
        }
    }

    /// Replaces the note atomically (None removes it).
    pub fn set_note(&self, name: &str, v: Option<&serde_json::Value>) -> Result<()> {
        let path = self.dir.join(format!("note-{name}.json"));
        match v {
            Some(v) => {
                fs::create_dir_all(&self.dir)?;
                atomic_write(&path, &serde_json::to_vec(v)?)
            }
            None => match fs::remove_file(&path) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e.into()),
                _ => Ok(()),
            },
        }
    }

    pub fn clear(&self) {
        let _ = fs::remove_dir_all(&self.dir);
        if let Some(parent) = self.dir.parent() {
            let _ = fs::remove_dir(parent);
        }
    }

    fn batch_files(&self) -> Result<Vec<(String, PathBuf)>> {
        let mut v = Vec::new();
        if let Ok(rd) = fs::read_dir(&self.dir) {
            for e in rd.flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                if name.starts_with("batch-") && name.ends_with(".parquet") {
                    v.push((name, e.path()));
                }
            }
        }
        Ok(v)
    }
}

pub fn now() -> String {
    chrono::Utc::now().format("%Y-%m-%dT%H:%M:%SZ").to_string()
}

pub fn unique() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    format!(
        "{}-{}-{}",
        std::process::id(),
        chrono::Utc::now().timestamp_nanos_opt().unwrap_or(0),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

pub fn atomic_write(path: &Path, bytes: &[u8]) -> Result<()> {
    let tmp = path.with_extension(format!("tmp-{}", unique()));
    {
        let mut f = File::create(&tmp).with_context(|| format!("cannot write {}", tmp.display()))?;
        f.write_all(bytes)?;
        f.sync_all()?;
    }
    fs::rename(&tmp, path).with_context(|| format!("cannot rename into {}", path.display()))?;
    sync_dir(path.parent().unwrap_or(Path::new(".")))
}

/// A rename is durable only once its folder is: after a power loss the state could otherwise
/// name a file whose rename was lost.
pub fn sync_dir(dir: &Path) -> Result<()> {
    File::open(dir).and_then(|d| d.sync_all()).with_context(|| format!("cannot sync folder {}", dir.display()))
}

fn tracing_options() -> TracingOptions {
    TracingOptions::default().allow_null_fields(true).strings_as_large_utf8(false)
}

fn encode_parquet<T: Serialize + DeserializeOwned>(
    p: &Partition,
    rows: &[T],
    fields: Option<&[FieldRef]>,
) -> Result<Vec<u8>> {
    let drop: Vec<&str> = p.values.iter().map(|(k, _)| k.as_str()).collect();
    encode_rows_as(rows, &drop, fields)
}

/// Rows → one Parquet file in memory, without the columns that the folder names carry.
fn encode_rows<T: Serialize + DeserializeOwned>(rows: &[T], drop: &[&str]) -> Result<Vec<u8>> {
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

pub fn parquet_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = fs::read_dir(dir)
        .map(|rd| rd.flatten().map(|e| e.path()).filter(|p| p.extension().is_some_and(|e| e == "parquet")).collect())
        .unwrap_or_default();
    files.sort();
    files
}

/// Reads a Parquet file back into rows, restoring the partition columns from the folder names.
pub fn read_file_rows<T: DeserializeOwned>(path: &Path, p: Option<&Partition>) -> Result<Vec<T>> {
    let batches = read_batches(path)?;
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

#[cfg(test)]
mod tests {
    use super::*;
    use doc2ci_rows::ModelRow;

    #[test]
    fn write_swap_and_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let wh = Warehouse::new(dir.path());
        let p = Partition::new(MODELS, &[]);
        let row = |m: &str| ModelRow {
            model: m.into(),
            backend: "import".into(),
            family: None,
            size_b: Some(7.0),
            code: Some(true),
            proprietary: None,
            base_model: None,
        };
        let h1 = wh.write(&p, &[row("a")]).unwrap();
        let h2 = wh.write(&p, &[row("b"), row("c")]).unwrap();
        assert_ne!(h1, h2);
        let back: Vec<ModelRow> = wh.read(&p).unwrap();
        assert_eq!(back, vec![row("b"), row("c")]);
        assert_eq!(parquet_files(&wh.dir(&p)).len(), 1, "superseded file left the table folder");
        assert_eq!(h2, wh.write(&p, &[row("b"), row("c")]).unwrap(), "same rows, same bytes");
    }

    /// `scores` rows carry their metrics as registry data; written through [`Warehouse::write_like`]
    /// their files are byte for byte those of the struct that had a field per metric, and read back.
    #[test]
    fn scores_files_are_those_of_the_struct_with_a_field_per_metric() {
        use doc2ci_rows::{MetricKind, MetricValue, Score};
        use std::borrow::Cow;

        #[derive(Serialize, Deserialize)]
        struct OldScore {
            pair_id: String,
            service: String,
            model: String,
            sample: u32,
            round: u32,
            cosine: f64,
            euclidean: f64,
            bleu: f64,
            crystal_bleu: f64,
            rouge_l: f64,
            chrf: f64,
            tree_edit: f64,
            levenshtein: f64,
            exact: bool,
            kv_exact: f64,
            kv_wildcard: f64,
            #[serde(default)]
            truncated: bool,
        }
        // The registry's metrics that the old struct had (a metric registered later adds a column).
        let old_metrics = [
            "cosine",
            "euclidean",
            "bleu",
            "crystal_bleu",
            "rouge_l",
            "chrf",
            "tree_edit",
            "levenshtein",
            "exact",
            "kv_exact",
            "kv_wildcard",
        ];
        let infos: Vec<_> =
            doc2ci_score::metric_infos().iter().copied().filter(|m| old_metrics.contains(&m.name)).collect();
        assert_eq!(infos.iter().map(|m| m.name).collect::<Vec<_>>(), old_metrics);
        let rows: Vec<Score> = (0..5u32)
            .map(|i| Score {
                pair_id: format!("p{i}"),
                service: "github-actions".into(),
                model: "m".into(),
                sample: i % 2,
                round: i / 3,
                metrics: infos
                    .iter()
                    .enumerate()
                    .map(|(k, m)| {
                        let v = match m.kind {
                            MetricKind::Float => MetricValue::Float(i as f64 / 7.0 + k as f64),
                            MetricKind::Bool => MetricValue::Bool(i % 3 == 0),
                        };
                        (Cow::Borrowed(m.name), v)
                    })
                    .collect(),
                truncated: i == 2,
            })
            .collect();
        let old: Vec<OldScore> = rows
            .iter()
            .map(|s| {
                let f = |m: &str| s.get(m).unwrap().as_f64();
                OldScore {
                    pair_id: s.pair_id.clone(),
                    service: s.service.clone(),
                    model: s.model.clone(),
                    sample: s.sample,
                    round: s.round,
                    cosine: f("cosine"),
                    euclidean: f("euclidean"),
                    bleu: f("bleu"),
                    crystal_bleu: f("crystal_bleu"),
                    rouge_l: f("rouge_l"),
                    chrf: f("chrf"),
                    tree_edit: f("tree_edit"),
                    levenshtein: f("levenshtein"),
                    exact: f("exact") == 1.0,
                    kv_exact: f("kv_exact"),
                    kv_wildcard: f("kv_wildcard"),
                    truncated: s.truncated,
                }
            })
            .collect();
        let dir = tempfile::tempdir().unwrap();
        let wh = Warehouse::new(dir.path());
        let p = Partition::new(SCORES, &["github-actions", "m"]);
        let template = Score::template(&infos);
        let old_hash = wh.write(&p, &old).unwrap();
        let old_bytes = fs::read(wh.file(&p)).unwrap();
        assert_eq!(wh.read::<Score>(&p).unwrap(), rows, "files of the old struct read as rows");
        assert_eq!(wh.write_like(&p, &rows, &template).unwrap(), old_hash);
        assert_eq!(fs::read(wh.file(&p)).unwrap(), old_bytes);
        let back: Vec<Score> = wh.read(&p).unwrap();
        assert_eq!(back, rows);
        // Rows read back (owning their metric names) write the same bytes again.
        assert_eq!(wh.write_like(&p, &back, &template).unwrap(), old_hash);
        // An empty partition has the same columns too.
        let empty_old = wh.write(&p, &Vec::<OldScore>::new()).unwrap();
        assert_eq!(wh.write_like(&p, &[], &template).unwrap(), empty_old);
    }

    #[test]
    fn second_lock_is_refused_with_a_message() {
        let dir = tempfile::tempdir().unwrap();
        let wh = Warehouse::new(dir.path());
        let _l = wh.lock().unwrap();
        let e = wh.lock().err().unwrap().to_string();
        assert!(
            e.contains("in use by another doc2ci run") && e.contains(&format!("pid {}", std::process::id())),
            "{e}"
        );
    }
}
