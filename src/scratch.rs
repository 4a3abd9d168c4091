//! Private scratch folders: the lint sandbox's per-run folders and the browser's profile both
//! start from one made by mkdtemp, never from a name someone else could have prepared.

use std::path::PathBuf;

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
