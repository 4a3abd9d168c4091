//! The Parquet warehouse as storage: Hive-partitioned tables that readers may query at any moment.
//!
//! A partition is one Parquet file in a leaf folder (`scores/service=…/model=…/part-0.parquet`;
//! repair rounds add `round-1.parquet`, … beside it, each its own partition with a `round`
//! column inside). It is written complete in a staging folder and renamed over its target in
//! one step, so a concurrent `read_parquet('scores/**/*.parquet')` sees either the old rows or
//! the new ones, never both. The rows' encoding is `parquet.rs`.
//!
//! What tables a study has is its jobs' (`jobs/tables.rs`); what the engine remembers of a
//! run (state, run lock, checkpoints) is the engine's (`engine/state.rs`,
//! `engine/checkpoint.rs`), kept under `_doc2ci/`, outside every table folder.

mod parquet;

use std::fs::{self, File};
use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context, Result};
use datafusion::arrow::datatypes::FieldRef;
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_arrow::schema::SchemaLike;

use parquet::{encode_parquet, tracing_options};
pub use parquet::{encode_rows, parquet_files, read_batches, read_file_rows, write_rows_file, write_rows_file_like};

/// A table and the columns that live in its folder names rather than its files.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TableDef {
    pub name: &'static str,
    pub partition_cols: &'static [&'static str],
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

    /// `generations/service=a/model=b` → the partition, when `tables` has its table and the
    /// folder names its every column (for stale folders and state entries).
    pub fn from_id(tables: &[TableDef], id: &str) -> Option<Partition> {
        let (id, file) = match id.split_once('#') {
            Some((a, f)) => (a, Some(f.to_string())),
            None => (id, None),
        };
        let mut it = id.split('/');
        let name = it.next()?;
        let t = tables.iter().find(|t| t.name == name)?;
        let values: Vec<(String, String)> =
            it.map(|kv| kv.split_once('=').map(|(k, v)| (k.to_string(), v.to_string()))).collect::<Option<_>>()?;
        (values.len() == t.partition_cols.len()).then_some(Partition { table: t.name, values, file })
    }
}

/// A file's size and modification time (ns since the epoch), as [`PartState`] records them.
pub fn stamp(path: &Path) -> std::io::Result<(u64, Option<i128>)> {
    let m = fs::metadata(path)?;
    let t = m.modified().ok().and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok()).map(|d| d.as_nanos() as i128);
    Ok((m.len(), t))
}

pub struct Warehouse {
    pub root: PathBuf,
}

/// What a sweep (`doc2ci gc`) removed: how many things, and their bytes.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Swept {
    pub items: usize,
    pub bytes: u64,
}

impl std::ops::AddAssign for Swept {
    fn add_assign(&mut self, o: Swept) {
        self.items += o.items;
        self.bytes += o.bytes;
    }
}

/// The bytes under `p`, a file or a folder (0 when it is not there).
pub fn disk_size(p: &Path) -> u64 {
    if p.is_file() {
        return fs::metadata(p).map(|m| m.len()).unwrap_or(0);
    }
    fs::read_dir(p).map(|rd| rd.flatten().map(|e| disk_size(&e.path())).sum()).unwrap_or(0)
}

impl Warehouse {
    pub fn new(root: &Path) -> Self {
        Self { root: root.to_path_buf() }
    }

    /// `_doc2ci/`: the engine's bookkeeping and the caches, outside every table folder.
    pub fn meta(&self) -> PathBuf {
        self.root.join("_doc2ci")
    }

    /// What killed runs left of this layer's writes: [`atomic_write`]'s temporaries that were never
    /// renamed into place, and the staging folder. Only while no run holds the lock.
    pub fn sweep_leftovers(&self) -> Swept {
        fn temporaries(d: &Path, out: &mut Vec<PathBuf>) {
            for e in fs::read_dir(d).into_iter().flatten().flatten() {
                let p = e.path();
                if p.is_dir() {
                    temporaries(&p, out);
                } else if e.file_name().to_string_lossy().contains(".tmp-") {
                    out.push(p);
                }
            }
        }
        let mut swept = Swept::default();
        let mut tmps = Vec::new();
        temporaries(&self.root, &mut tmps);
        for t in tmps {
            swept.bytes += disk_size(&t);
            if fs::remove_file(&t).is_ok() {
                swept.items += 1;
            }
        }
        let staging = self.meta().join("staging");
        swept.bytes += disk_size(&staging);
        let _ = fs::remove_dir_all(&staging);
        swept
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

    /// The partition's rows; none when it was never written.
    pub fn read<T: DeserializeOwned>(&self, p: &Partition) -> Result<Vec<T>> {
        let f = self.file(p);
        if !f.exists() {
            return Ok(Vec::new());
        }
        read_file_rows(&f, Some(p))
    }

    /// The partition's rows with only `columns` read (and its partition columns): `T` names no
    /// other field.
    pub fn read_columns<T: DeserializeOwned>(&self, p: &Partition, columns: &[&str]) -> Result<Vec<T>> {
        let f = self.file(p);
        if !f.exists() {
            return Ok(Vec::new());
        }
        parquet::read_file_columns(&f, Some(p), columns)
    }

    /// The rows of every partition of `t` on disk that `keep` admits (repair rounds' files
    /// included), in partition order: a whole table read by a command rather than a job.
    pub fn read_table<T: DeserializeOwned>(&self, t: TableDef, keep: impl Fn(&Partition) -> bool) -> Result<Vec<T>> {
        let mut out = Vec::new();
        for id in self.partitions_on_disk(t) {
            if let Some(p) = Partition::from_id(&[t], &id).filter(|p| keep(p)) {
                out.extend(self.read::<T>(&p)?);
            }
        }
        Ok(out)
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

#[cfg(test)]
mod tests {
    use super::*;

    const MODELS: TableDef = TableDef { name: "models", partition_cols: &[] };
    const SCORES: TableDef = TableDef { name: "scores", partition_cols: &["service", "model"] };
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
            knowledge_cutoff: None,
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
        use doc2ci_testkit::{OldScore, OLD_METRICS};
        use std::borrow::Cow;

        // The registry's metrics that the old struct had (a metric registered later adds a column).
        let infos: Vec<_> =
            doc2ci_score::metric_infos().iter().copied().filter(|m| OLD_METRICS.contains(&m.name)).collect();
        assert_eq!(infos.iter().map(|m| m.name).collect::<Vec<_>>(), OLD_METRICS);
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
        let old: Vec<OldScore> = rows.iter().map(OldScore::of).collect();
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
}
