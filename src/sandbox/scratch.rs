//! Private scratch folders: each made by mkdtemp, never from a name someone else could have
//! prepared, and named after the process that owns it, so that the folders of a killed run (kill
//! -9 runs no destructor) are found and removed once their process is gone.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

/// `$TMPDIR/<prefix>-XXXXXX`, made by mkdtemp: a fresh folder of an unpredictable name, 0700 from
/// the call itself, so a folder (or link) someone prepared in the temporary folder is never used.
pub fn mkdtemp(prefix: &str) -> Result<PathBuf> {
    let template = std::env::temp_dir().join(format!("{prefix}-XXXXXX"));
    let mut bytes = std::ffi::CString::new(template.as_os_str().as_encoded_bytes())?.into_bytes_with_nul();
    // SAFETY: a NUL-terminated, writable template that mkdtemp fills in place.
    if unsafe { libc::mkdtemp(bytes.as_mut_ptr().cast()) }.is_null() {
        return Err(std::io::Error::last_os_error()).with_context(|| format!("creating {}", template.display()));
    }
    bytes.pop();
    use std::os::unix::ffi::OsStringExt;
    Ok(PathBuf::from(std::ffi::OsString::from_vec(bytes)))
}

/// `$TMPDIR/<prefix><pid>-XXXXXX`: a folder of this process, which [`sweep`] leaves alone while
/// the process lives.
pub fn owned(prefix: &str) -> Result<PathBuf> {
    mkdtemp(&format!("{prefix}{}", std::process::id()))
}

/// A private folder of this process, removed when dropped.
pub struct Scratch(pub PathBuf);

impl Scratch {
    pub fn new(prefix: &str) -> Result<Scratch> {
        Ok(Scratch(owned(prefix)?))
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Whether the process that owned a folder is gone (and is not this one).
pub fn owner_gone(pid: u32) -> bool {
    pid != std::process::id() && !Path::new(&format!("/proc/{pid}")).exists()
}

/// Removes the entries of `dir` named `<prefix><pid>-…` whose process is gone: what killed runs
/// left. Returns how many.
pub fn sweep(dir: &Path, prefix: &str) -> usize {
    let mut n = 0;
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let owner = name.strip_prefix(prefix).and_then(|r| r.split('-').next()).and_then(|p| p.parse().ok());
        if owner.is_some_and(owner_gone) {
            let p = e.path();
            let _ = if p.is_dir() { std::fs::remove_dir_all(&p) } else { std::fs::remove_file(&p) };
            n += 1;
        }
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folders_are_fresh_private_and_a_killed_runs_are_swept() {
        use std::os::unix::fs::PermissionsExt;
        let prefix = "doc2ci-scratch-test-";
        let (a, b) = (Scratch::new(prefix).unwrap(), Scratch::new(prefix).unwrap());
        assert_ne!(a.0, b.0);
        for s in [&a, &b] {
            let m = std::fs::symlink_metadata(&s.0).unwrap();
            assert!(m.is_dir() && m.permissions().mode() & 0o777 == 0o700, "{}", s.0.display());
        }
        // A pid that cannot be alive: above the kernel's pid_max.
        let dead = std::env::temp_dir().join(format!("{prefix}99999999-x"));
        std::fs::create_dir_all(&dead).unwrap();
        assert!(sweep(&std::env::temp_dir(), prefix) >= 1);
        assert!(!dead.exists());
        assert!(a.0.exists() && b.0.exists(), "a live process's folders stay");
        let gone = a.0.clone();
        drop(a);
        assert!(!gone.exists());
    }
}
