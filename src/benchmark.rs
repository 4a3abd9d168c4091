//! A released benchmark folder (`doc2ci export benchmark`, `crate::release`): the files it holds,
//! and the check a source with `format = "benchmark"` passes before a byte of it is imported.
//! Apart from the release, which reads the study's tables, so the import job can read a folder
//! without importing the writer.

use std::io::Read;
use std::path::Path;

use anyhow::{bail, Context, Result};
use sha2::{Digest, Sha256};

pub const PAIRS_JSONL: &str = "pairs.jsonl";
pub const PAIRS_PARQUET: &str = "pairs.parquet";
pub const DATASHEET_JSON: &str = "datasheet.json";
pub const DATASHEET_MD: &str = "datasheet.md";
pub const SUMS: &str = "SHA256SUMS";
/// The study's results a release may carry (`export benchmark --with-results`): every answer,
/// verdict and score, each table one file, so `doc2ci compare` reads a published run.
pub const RESULTS: [&str; 4] = ["generations.parquet", "validations.parquet", "lints.parquet", "scores.parquet"];

pub fn sha256_file(p: &Path) -> Result<String> {
    let bytes = std::fs::read(p).with_context(|| format!("cannot read {}", p.display()))?;
    Ok(format!("{:x}", Sha256::digest(&bytes)))
}

/// The pairs of a release folder (`pairs.jsonl`), checked against its `SHA256SUMS` in the same
/// pass that reads them, so what is imported is what was checked. The list must name the pairs;
/// every name in it must be a plain file of the folder (no path, no `..`: a release from someone
/// else never makes doc2ci read a file outside it); every file it names must match.
pub fn verified_pairs(dir: &Path) -> Result<Vec<u8>> {
    let (sums, listed) = listed(dir)?;
    let Some(want) = listed.get(PAIRS_JSONL) else {
        bail!("{}: does not list {PAIRS_JSONL}, the file that is imported: nothing is checked", sums.display());
    };
    let path = dir.join(PAIRS_JSONL);
    let mut bytes = Vec::new();
    std::fs::File::open(&path)
        .with_context(|| format!("cannot read {}", path.display()))?
        .take(MAX_PAIRS_BYTES + 1)
        .read_to_end(&mut bytes)?;
    if bytes.len() as u64 > MAX_PAIRS_BYTES {
        bail!("{}: larger than {} GiB", path.display(), MAX_PAIRS_BYTES >> 30);
    }
    let mismatch = |f: &str| {
        format!("{}: checksum mismatch for {f} (the file changed since the release was written)", sums.display())
    };
    if format!("{:x}", Sha256::digest(&bytes)) != *want {
        bail!(mismatch(PAIRS_JSONL));
    }
    for (file, want) in listed.iter().filter(|(f, _)| *f != PAIRS_JSONL) {
        if sha256_file(&dir.join(file))? != *want {
            bail!(mismatch(file));
        }
    }
    Ok(bytes)
}

/// The release's checksum list: (its path, file name → SHA-256). Every name must be a plain file
/// of the folder (no path, no `..`).
fn listed(dir: &Path) -> Result<(std::path::PathBuf, std::collections::BTreeMap<String, String>)> {
    let sums = dir.join(SUMS);
    let not_a_release =
        || format!("{}: not a benchmark folder (no {SUMS}; write one with `doc2ci export benchmark`)", dir.display());
    let mut text = String::new();
    std::fs::File::open(&sums)
        .with_context(not_a_release)?
        .take(MAX_SUMS_BYTES)
        .read_to_string(&mut text)
        .with_context(not_a_release)?;
    let mut listed = std::collections::BTreeMap::new();
    for (i, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        let Some((want, file)) = line.split_once("  ") else {
            bail!("{}:{}: malformed checksum line", sums.display(), i + 1);
        };
        let file = file.trim();
        let plain = !file.is_empty() && !file.starts_with('.') && !file.contains(['/', '\\', '\0']);
        if !plain {
            bail!("{}:{}: `{file}` is not a file name of the release folder", sums.display(), i + 1);
        }
        listed.insert(file.to_string(), want.trim().to_string());
    }
    Ok((sums, listed))
}

/// One of the release's files, once its checksum matches the list's; None when the release does
/// not hold it (an older release, or one exported without results).
pub fn verified_file(dir: &Path, name: &str) -> Result<Option<std::path::PathBuf>> {
    let (sums, listed) = listed(dir)?;
    let Some(want) = listed.get(name) else { return Ok(None) };
    let path = dir.join(name);
    if sha256_file(&path)? != *want {
        bail!("{}: checksum mismatch for {name} (the file changed since the release was written)", sums.display());
    }
    Ok(Some(path))
}

/// A checksum list is a few lines; a release's pairs a few hundred MB at most.
const MAX_SUMS_BYTES: u64 = 1 << 20;
const MAX_PAIRS_BYTES: u64 = 4 << 30;

#[cfg(test)]
mod tests {
    use super::*;

    fn release(dir: &Path, pairs: &[u8], sums: &str) {
        std::fs::create_dir_all(dir).unwrap();
        std::fs::write(dir.join(PAIRS_JSONL), pairs).unwrap();
        std::fs::write(dir.join(SUMS), sums).unwrap();
    }

    /// Issue 31: a release from someone else is checked before a byte of it is imported, and never
    /// makes doc2ci read outside its folder.
    #[test]
    fn a_release_imports_only_what_its_checksums_name() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("rel");
        let pairs = b"{\"pair_id\": \"x\"}\n";
        let good = format!("{:x}  {PAIRS_JSONL}\n", Sha256::digest(pairs));
        release(&dir, pairs, &good);
        assert_eq!(verified_pairs(&dir).unwrap(), pairs);
        // An empty list, or one that omits the imported file, checks nothing: refused.
        release(&dir, pairs, "");
        assert!(verified_pairs(&dir).unwrap_err().to_string().contains("does not list pairs.jsonl"));
        let other = format!("{:x}  pairs.parquet\n", Sha256::digest(b""));
        std::fs::write(dir.join("pairs.parquet"), b"").unwrap();
        release(&dir, pairs, &other);
        assert!(verified_pairs(&dir).unwrap_err().to_string().contains("does not list pairs.jsonl"));
        // A name with a path reaches outside the folder: refused before anything is read.
        for name in ["../../etc/passwd", "/etc/passwd", "sub/file", ".hidden"] {
            release(&dir, pairs, &format!("{good}{:x}  {name}\n", Sha256::digest(b"")));
            let e = verified_pairs(&dir).unwrap_err().to_string();
            assert!(e.contains("is not a file name of the release folder"), "{name}: {e}");
        }
        // A changed file is a mismatch.
        release(&dir, b"{\"pair_id\": \"y\"}\n", &good);
        assert!(verified_pairs(&dir).unwrap_err().to_string().contains("checksum mismatch for pairs.jsonl"));
    }
}
