//! Stage code versions (issue 12): every workspace crate's sources, and those of the workspace crates
//! it depends on, hashed at build time. A partition's cache key holds the version of the code that
//! computes it, so an upgrade re-runs exactly the stages whose code changed; no literal to forget.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

fn fnv(h: &mut u64, bytes: &[u8]) {
    for b in bytes {
        *h ^= u64::from(*b);
        *h = h.wrapping_mul(0x0100_0000_01b3);
    }
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(rd) = fs::read_dir(dir) else { return };
    for e in rd.flatten() {
        let p = e.path();
        if p.is_dir() {
            if p.file_name().is_some_and(|n| n == "node_modules") {
                continue;
            }
            walk(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs" || x == "toml" || x == "json" || x == "txt" || x == "cjs") {
            out.push(p);
        }
    }
}

/// Hash of a set of files, by path relative to the workspace and content.
fn hash_files(root: &Path, mut files: Vec<PathBuf>) -> u64 {
    files.sort();
    let mut h = 0xcbf2_9ce4_8422_2325_u64;
    for f in files {
        let rel = f.strip_prefix(root).unwrap_or(&f).to_string_lossy().replace('\\', "/");
        fnv(&mut h, rel.as_bytes());
        fnv(&mut h, &[0]);
        fnv(&mut h, &fs::read(&f).unwrap_or_default());
        fnv(&mut h, &[0]);
    }
    h
}

/// The `doc2ci-*` crates named in a manifest's `[dependencies]` (dev-dependencies do not compute rows).
fn workspace_deps(manifest: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut in_deps = false;
    for line in manifest.lines() {
        let t = line.trim();
        if t.starts_with('[') {
            in_deps = t == "[dependencies]";
            continue;
        }
        if in_deps {
            if let Some(name) = t.split(['=', '.', ' ']).next().filter(|n| n.starts_with("doc2ci-")) {
                out.push(name.to_string());
            }
        }
    }
    out
}

fn main() {
    let root = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap());
    println!("cargo:rerun-if-changed=stages");
    println!("cargo:rerun-if-changed=libs");
    println!("cargo:rerun-if-changed=src");
    println!("cargo:rerun-if-changed=tools");
    // Each stage and library crate: own hash (src/ and Cargo.toml) and workspace dependencies.
    let mut own: BTreeMap<String, (u64, Vec<String>)> = BTreeMap::new();
    let crates = ["stages", "libs"].into_iter().flat_map(|d| fs::read_dir(root.join(d)).unwrap().flatten());
    for e in crates {
        let dir = e.path();
        let Ok(manifest) = fs::read_to_string(dir.join("Cargo.toml")) else { continue };
        let name = format!("doc2ci-{}", dir.file_name().unwrap().to_string_lossy());
        let mut files = vec![dir.join("Cargo.toml")];
        walk(&dir.join("src"), &mut files);
        own.insert(name, (hash_files(&root, files), workspace_deps(&manifest)));
    }
    fn closure(name: &str, own: &BTreeMap<String, (u64, Vec<String>)>, seen: &mut Vec<String>) {
        if seen.iter().any(|s| s == name) {
            return;
        }
        seen.push(name.to_string());
        if let Some((_, deps)) = own.get(name) {
            for d in deps {
                closure(d, own, seen);
            }
        }
    }
    let mut out = String::from(
        "/// (crate, version): a hash of the crate's sources and of every workspace crate it depends on.\n",
    );
    out.push_str("pub const CRATES: &[(&str, &str)] = &[\n");
    for name in own.keys() {
        let mut seen = Vec::new();
        closure(name, &own, &mut seen);
        seen.sort();
        let mut h = 0xcbf2_9ce4_8422_2325_u64;
        for s in &seen {
            fnv(&mut h, s.as_bytes());
            fnv(&mut h, &own.get(s).map_or(0, |o| o.0).to_le_bytes());
        }
        out.push_str(&format!("    ({name:?}, \"{h:016x}\"),\n"));
    }
    out.push_str("];\n");
    // The engine's own code that shapes rows (fetching, asking models): hashed like a crate.
    out.push_str("/// (engine module, version) for the glue that shapes rows itself.\n");
    out.push_str("pub const GLUE: &[(&str, &str)] = &[\n");
    for (name, paths) in [
        ("crawl", vec!["src/crawl", "src/jobs/crawl.rs"]),
        (
            "generation",
            vec!["src/jobs/generate.rs", "src/jobs/generate_batch.rs", "src/jobs/repair.rs", "src/backends"],
        ),
        ("lint", vec!["src/linters", "src/jobs/lint.rs", "tools"]),
    ] {
        let mut files = Vec::new();
        for p in paths {
            let p = root.join(p);
            if p.is_dir() {
                walk(&p, &mut files);
            } else {
                files.push(p);
            }
        }
        out.push_str(&format!("    ({name:?}, \"{:016x}\"),\n", hash_files(&root, files)));
    }
    out.push_str("];\n");
    let dest = PathBuf::from(std::env::var("OUT_DIR").unwrap()).join("code_versions.rs");
    fs::write(dest, out).unwrap();
}
