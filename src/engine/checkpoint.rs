//! Batches of a long partition, each committed as it finishes under
//! `_doc2ci/checkpoints/<partition>/<key>`, so a killed run resumes after the last one; dropped
//! once the partition is published.

use std::fs;
use std::path::PathBuf;

use anyhow::{Context, Result};
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::warehouse::{atomic_write, disk_size, encode_rows, read_file_rows, Partition, Swept, Warehouse};

/// Batches of a long stage, written as they finish so a killed run resumes after the last one.
pub struct Checkpoint {
    dir: PathBuf,
}

impl Checkpoint {
    /// The checkpoint of partition `p` under cache key `key`: another key, another folder.
    pub fn at(wh: &Warehouse, p: &Partition, key: &str) -> Checkpoint {
        Checkpoint { dir: wh.meta().join("checkpoints").join(p.id().replace('/', "~")).join(&key[..16]) }
    }

    /// Removes every checkpoint for which `keep(partition id, key prefix)` is false.
    pub fn sweep(wh: &Warehouse, keep: impl Fn(&str, &str) -> bool) -> Swept {
        let mut swept = Swept::default();
        for e in fs::read_dir(wh.meta().join("checkpoints")).into_iter().flatten().flatten() {
            let id = e.file_name().to_string_lossy().replace('~', "/");
            for k in fs::read_dir(e.path()).into_iter().flatten().flatten() {
                if !keep(&id, &k.file_name().to_string_lossy()) {
                    swept.bytes += disk_size(&k.path());
                    let _ = fs::remove_dir_all(k.path());
                    swept.items += 1;
                }
            }
            let _ = fs::remove_dir(e.path());
        }
        swept
    }

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
