//! What the engine remembers between runs, under the warehouse's `_doc2ci/`: each finished
//! partition's key, output hash and file stamp (`state.json`), the last run, and the run lock
//! that keeps two runs off one warehouse.

use std::collections::BTreeMap;
use std::fs::{self, File};
use std::io::Write;

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

use super::Owed;
use crate::warehouse::{atomic_write, now, stamp, Partition, Warehouse};

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
    /// What the published rows still lack ([`Owed`]); absent when complete.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owed: Option<Owed>,
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

impl State {
    pub fn load(wh: &Warehouse) -> Result<State> {
        let p = wh.meta().join("state.json");
        match fs::read(&p) {
            Ok(b) => serde_json::from_slice(&b)
                .with_context(|| format!("corrupt engine state {}: delete it to rebuild from scratch", p.display())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(State::default()),
            Err(e) => Err(e).with_context(|| format!("cannot read {}", p.display())),
        }
    }

    pub fn save(&self, wh: &Warehouse) -> Result<()> {
        fs::create_dir_all(wh.meta())?;
        atomic_write(&wh.meta().join("state.json"), &serde_json::to_vec_pretty(self)?)
    }
}

impl PartState {
    /// Why the partition's file is not what was published as recorded here (None: it is). Size first, then
    /// the content hash only when size or time differ, so a no-op run reads no file.
    pub fn unpublished(&self, wh: &Warehouse, p: &Partition) -> Option<String> {
        let f = wh.file(p);
        let Ok((bytes, mtime)) = stamp(&f) else { return Some("output missing from the warehouse".into()) };
        if self.bytes.is_some_and(|b| b != bytes) {
            return Some("output on disk is not what was published (size changed)".into());
        }
        if self.bytes.is_some() && self.mtime_ns.is_some() && self.mtime_ns == mtime {
            return None;
        }
        let same = File::open(&f)
            .and_then(|fh| blake3::Hasher::new().update_reader(fh).map(|h| h.finalize().to_hex().to_string()))
            .is_ok_and(|h| h == self.output_hash);
        (!same).then(|| "output on disk is not what was published (content changed)".into())
    }
}

/// Held for the whole run; the kernel drops it if the process dies, so `kill -9` never wedges.
pub struct Lock {
    _file: File,
}

impl Lock {
    /// The warehouse's run lock, or an error naming the run that holds it.
    pub fn take(wh: &Warehouse) -> Result<Lock> {
        fs::create_dir_all(wh.meta()).with_context(|| format!("cannot create warehouse {}", wh.root.display()))?;
        let path = wh.meta().join("lock");
        let mut file = fs::OpenOptions::new().create(true).truncate(false).read(true).write(true).open(&path)?;
        use std::os::unix::io::AsRawFd;
        // SAFETY: flock on a file descriptor we own; no memory is shared.
        let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
        if rc != 0 {
            let holder = fs::read_to_string(&path).unwrap_or_default();
            let holder = if holder.trim().is_empty() { "unknown process" } else { holder.trim() };
            bail!("warehouse {} is in use by another doc2ci run ({holder}); wait for it to finish", wh.root.display());
        }
        file.set_len(0)?;
        writeln!(file, "pid {} since {}", std::process::id(), now())?;
        Ok(Lock { _file: file })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn second_lock_is_refused_with_a_message() {
        let dir = tempfile::tempdir().unwrap();
        let wh = Warehouse::new(dir.path());
        let _l = Lock::take(&wh).unwrap();
        let e = Lock::take(&wh).err().unwrap().to_string();
        assert!(
            e.contains("in use by another doc2ci run") && e.contains(&format!("pid {}", std::process::id())),
            "{e}"
        );
    }
}
