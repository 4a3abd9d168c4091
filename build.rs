//! Code versions, derived from the sources (issue 30): a partition's cache key holds the version of
//! every line of code that can change its rows, found by following imports, never listed by hand.
//!
//! Units: each workspace crate (`stages/*`, `libs/*`: its manifest and every file under `src/`),
//! each top-level module of `src/` (a file, or a folder with everything in it), and each file of
//! `src/jobs/` on its own (a job is the unit a node is declared in). A unit reaches:
//! - the `src/` modules its files name as `crate::m` (grouped `use crate::{a, b}` included) and, in
//!   `src/jobs/`, the sibling jobs they name as `super::x` (`super::item` is `jobs/mod.rs`);
//! - the workspace crates its files name (`doc2ci_x`) or its manifest depends on;
//! - the external crates it names (`tokio::`), at the versions `Cargo.lock.pins` resolves, with
//!   everything they depend on.
//!
//! A unit's version hashes every file and external crate version in its closure, so a change
//! anywhere a job reaches re-runs that job's partitions, and nothing else. `code.rs` reads the table.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

fn fnv(h: &mut u64, bytes: &[u8]) {
    for b in bytes {
        *h ^= u64::from(*b);
        *h = h.wrapping_mul(0x0100_0000_01b3);
    }
}

/// Every file under `dir` but dependency folders and dotfiles.
fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(rd) = fs::read_dir(dir) else { return };
    for e in rd.flatten() {
        let p = e.path();
        let name = e.file_name().to_string_lossy().into_owned();
        if name.starts_with('.') || name == "node_modules" || name == "target" {
            continue;
        }
        if p.is_dir() {
            walk(&p, out);
        } else {
            out.push(p);
        }
    }
}

/// Files a Rust file pulls in at compile time (`include_str!("…")`, `include_bytes!("…")`).
fn included(file: &Path, text: &str) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for mac in ["include_str!(\"", "include_bytes!(\""] {
        for (i, _) in text.match_indices(mac) {
            let rest = &text[i + mac.len()..];
            if let Some(end) = rest.find('"') {
                out.push(file.parent().unwrap().join(&rest[..end]));
            }
        }
    }
    out
}

fn ident_at(s: &str) -> &str {
    let end = s.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).unwrap_or(s.len());
    &s[..end]
}

/// The first segments of every path that starts with `prefix` (`crate::`, `super::`), grouped
/// imports (`crate::{a::X, b}`) included: `[(first, second)]`, second empty when absent.
fn paths_after(text: &str, prefix: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for (i, _) in text.match_indices(prefix) {
        // `super::` inside `super::super::` or a longer identifier is not ours.
        if i > 0 && text[..i].ends_with(|c: char| c.is_ascii_alphanumeric() || c == '_') {
            continue;
        }
        let rest = &text[i + prefix.len()..];
        if let Some(group) = rest.strip_prefix('{') {
            // Each item of the group at depth one: `a::X`, `b`, `c::{…}`.
            let (mut depth, mut start) = (1usize, true);
            for (j, c) in group.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 1 => break,
                    '}' => depth -= 1,
                    ',' if depth == 1 => start = true,
                    c if start && depth == 1 && !c.is_whitespace() => {
                        start = false;
                        let first = ident_at(&group[j..]);
                        let after = &group[j + first.len()..];
                        let second = after.strip_prefix("::").map(ident_at).unwrap_or_default();
                        out.push((first.to_string(), second.to_string()));
                    }
                    _ => {}
                }
            }
        } else {
            let first = ident_at(rest);
            let second = rest[first.len()..].strip_prefix("::").map(ident_at).unwrap_or_default();
            out.push((first.to_string(), second.to_string()));
        }
    }
    out
}

/// Whether `text` names the crate `ident` as a path root (`ident::…`, `use ident;`, `ident!`-free).
fn names_crate(text: &str, ident: &str) -> bool {
    text.match_indices(ident).any(|(i, _)| {
        let before_ok = i == 0 || !text[..i].ends_with(|c: char| c.is_ascii_alphanumeric() || c == '_' || c == ':');
        let after = &text[i + ident.len()..];
        before_ok && (after.starts_with("::") || (text[..i].trim_end().ends_with("use") && after.starts_with(';')))
    })
}

/// One `[[package]]` of the lock file: version, whether it comes from a registry (workspace members
/// do not), and the dependencies it names.
type Package = (String, bool, Vec<String>);

/// `Cargo.lock.pins`: package name → its versions.
struct Lock {
    packages: BTreeMap<String, Vec<Package>>,
}

impl Lock {
    fn parse(text: &str) -> Lock {
        let mut packages: BTreeMap<String, Vec<Package>> = BTreeMap::new();
        for block in text.split("[[package]]").skip(1) {
            let field = |k: &str| {
                block.lines().find_map(|l| l.strip_prefix(&format!("{k} = \""))).map(|v| v.trim_end_matches('"'))
            };
            let (Some(name), Some(version)) = (field("name"), field("version")) else { continue };
            let deps = match block.find("dependencies = [") {
                Some(i) => block[i..]
                    .lines()
                    .skip(1)
                    .take_while(|l| !l.starts_with(']'))
                    .map(|l| l.trim().trim_end_matches(',').trim_matches('"').to_string())
                    .collect(),
                None => vec![],
            };
            packages.entry(name.to_string()).or_default().push((version.to_string(), field("source").is_some(), deps));
        }
        Lock { packages }
    }

    /// `name` or `name version` as a dependency list names it.
    fn find(&self, dep: &str) -> Option<(&str, &Package)> {
        let (name, version) = dep.split_once(' ').map_or((dep, None), |(n, v)| (n, Some(v)));
        let (name, all) = self.packages.get_key_value(name)?;
        let p = match version {
            Some(v) => all.iter().find(|p| p.0 == v)?,
            None => all.first()?,
        };
        Some((name.as_str(), p))
    }

    /// Every external `name version` reachable from `deps`, workspace members excluded (they are
    /// units of their own).
    fn closure(&self, deps: impl IntoIterator<Item = String>, out: &mut BTreeSet<String>) {
        let mut todo: Vec<String> = deps.into_iter().collect();
        while let Some(d) = todo.pop() {
            let Some((name, (version, external, deps))) = self.find(&d) else { continue };
            if !external || !out.insert(format!("{name} {version}")) {
                continue;
            }
            todo.extend(deps.iter().cloned());
        }
    }
}

#[derive(Default)]
struct Unit {
    files: Vec<PathBuf>,
    /// Units it reaches directly.
    edges: BTreeSet<String>,
    /// External crates it reaches (`name version`, closed over their dependencies).
    external: BTreeSet<String>,
}

fn main() {
    let root = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap());
    for p in ["stages", "libs", "src", "tools", "schemas", "models", "Cargo.lock.pins"] {
        println!("cargo:rerun-if-changed={p}");
    }
    let lock = Lock::parse(&fs::read_to_string(root.join("Cargo.lock.pins")).unwrap_or_default());
    let mut units: BTreeMap<String, Unit> = BTreeMap::new();

    // Workspace crates: `doc2ci-<folder>`.
    let crates: BTreeSet<String> = ["stages", "libs"]
        .iter()
        .flat_map(|d| fs::read_dir(root.join(d)).unwrap().flatten())
        .filter(|e| e.path().join("Cargo.toml").exists())
        .map(|e| format!("doc2ci-{}", e.file_name().to_string_lossy()))
        .collect();
    for d in ["stages", "libs"] {
        for e in fs::read_dir(root.join(d)).unwrap().flatten() {
            let dir = e.path();
            let name = format!("doc2ci-{}", e.file_name().to_string_lossy());
            if !crates.contains(&name) {
                continue;
            }
            let mut u = Unit { files: vec![dir.join("Cargo.toml")], ..Unit::default() };
            walk(&dir.join("src"), &mut u.files);
            if let Some((_, (_, _, deps))) = lock.find(&name) {
                for dep in deps {
                    let n = dep.split(' ').next().unwrap();
                    if crates.contains(n) {
                        u.edges.insert(n.to_string());
                    }
                }
                lock.closure(deps.iter().cloned(), &mut u.external);
            }
            units.insert(name, u);
        }
    }

    // `src/`: top-level modules, and each job file on its own.
    let mut file_unit: BTreeMap<String, String> = BTreeMap::new();
    for e in fs::read_dir(root.join("src")).unwrap().flatten() {
        let p = e.path();
        let stem = p.file_stem().unwrap().to_string_lossy().into_owned();
        if p.is_dir() && stem == "jobs" {
            for j in fs::read_dir(&p).unwrap().flatten() {
                let js = j.path().file_stem().unwrap().to_string_lossy().into_owned();
                units.entry(format!("jobs/{js}")).or_default().files.push(j.path());
            }
        } else if p.is_dir() {
            walk(&p, &mut units.entry(stem).or_default().files);
        } else if p.extension().is_some_and(|x| x == "rs") {
            // lib.rs and main.rs only wire modules; an item of theirs is reached as `crate::item`.
            let name = if matches!(stem.as_str(), "main" | "lib") { "lib".to_string() } else { stem };
            units.entry(name).or_default().files.push(p);
        }
    }
    let root_deps = lock.find("doc2ci").map(|(_, p)| p.2.clone()).unwrap_or_default();
    let src_units: Vec<String> = units.keys().filter(|n| !n.starts_with("doc2ci-")).cloned().collect();
    for name in &src_units {
        let files = units[name].files.clone();
        let (mut edges, mut direct_ext, mut extra) = (BTreeSet::new(), Vec::new(), Vec::new());
        for f in &files {
            let rel = f.strip_prefix(&root).unwrap().to_string_lossy().replace('\\', "/");
            file_unit.insert(rel, name.clone());
            let Ok(text) = fs::read_to_string(f) else { continue };
            extra.extend(included(f, &text));
            for (first, second) in paths_after(&text, "crate::") {
                let target = match first.as_str() {
                    "jobs" if units.contains_key(&format!("jobs/{second}")) => format!("jobs/{second}"),
                    "jobs" => "jobs/mod".to_string(),
                    m if units.contains_key(m) => m.to_string(),
                    _ => "lib".to_string(),
                };
                edges.insert(target);
            }
            if name.starts_with("jobs/") {
                for (first, _) in paths_after(&text, "super::") {
                    let sibling = format!("jobs/{first}");
                    edges.insert(if units.contains_key(&sibling) { sibling } else { "jobs/mod".to_string() });
                }
            }
            for c in &crates {
                if names_crate(&text, &c.replace('-', "_")) {
                    edges.insert(c.clone());
                }
            }
            for d in &root_deps {
                let n = d.split(' ').next().unwrap();
                if !crates.contains(n) && n != "doc2ci" && names_crate(&text, &n.replace('-', "_")) {
                    direct_ext.push(d.clone());
                }
            }
        }
        edges.remove(name);
        let u = units.get_mut(name).unwrap();
        u.edges = edges;
        u.files.extend(extra);
        lock.closure(direct_ext, &mut u.external);
    }
    // A crate's compile-time includes are its own files too.
    for u in units.values_mut() {
        let more: Vec<PathBuf> =
            u.files.iter().filter_map(|f| fs::read_to_string(f).ok().map(|t| included(f, &t))).flatten().collect();
        u.files.extend(more);
        u.files.sort();
        u.files.dedup();
    }

    // Each unit's own hash, then each unit's version over its closure.
    let own: BTreeMap<&String, u64> = units
        .iter()
        .map(|(n, u)| {
            let mut h = 0xcbf2_9ce4_8422_2325_u64;
            for f in &u.files {
                let rel = f.strip_prefix(&root).unwrap_or(f).to_string_lossy().replace('\\', "/");
                fnv(&mut h, rel.as_bytes());
                fnv(&mut h, &[0]);
                fnv(&mut h, &fs::read(f).unwrap_or_default());
                fnv(&mut h, &[0]);
            }
            for x in &u.external {
                fnv(&mut h, x.as_bytes());
                fnv(&mut h, &[0]);
            }
            (n, h)
        })
        .collect();
    let mut out = String::from(
        "/// (unit, version, every unit its version covers): `build.rs` derives them from the imports.\n\
         pub const UNITS: &[(&str, &str, &[&str])] = &[\n",
    );
    for name in units.keys() {
        let (mut seen, mut todo) = (BTreeSet::from([name.clone()]), vec![name.clone()]);
        while let Some(n) = todo.pop() {
            for e in &units[&n].edges {
                if units.contains_key(e) && seen.insert(e.clone()) {
                    todo.push(e.clone());
                }
            }
        }
        let mut h = 0xcbf2_9ce4_8422_2325_u64;
        for s in &seen {
            fnv(&mut h, s.as_bytes());
            fnv(&mut h, &own[s].to_le_bytes());
        }
        let covers: Vec<String> = seen.iter().map(|s| format!("{s:?}")).collect();
        out.push_str(&format!("    ({name:?}, \"{h:016x}\", &[{}]),\n", covers.join(", ")));
    }
    out.push_str("];\n/// (file under `src/`, its unit).\npub const FILES: &[(&str, &str)] = &[\n");
    for (f, u) in &file_unit {
        out.push_str(&format!("    ({f:?}, {u:?}),\n"));
    }
    out.push_str("];\n");
    let dest = PathBuf::from(std::env::var("OUT_DIR").unwrap()).join("code_versions.rs");
    fs::write(dest, out).unwrap();
}
