//! doc2ci's binary side: the engine (`engine`: DAG, cache keys, plan, scheduler), the study's
//! jobs (`jobs`: one file per stage, wiring config to the stage crates), the backends
//! (`backends`), the Parquet warehouse and SQL over it, and the CLI that wires them. Stage logic
//! lives in `stages/`, shared row types and models in `libs/`; nothing here computes a metric.

pub mod assets;
pub mod backends;
pub mod benchmark;
pub mod cli;
pub mod code;
pub mod coding;
pub mod compare;
pub mod config;
pub mod crawl;
pub mod engine;
pub mod generation;
pub mod jobs;
pub mod keys;
pub mod linters;
pub mod release;
pub mod remote;
pub mod resources;
pub mod sandbox;
pub mod sql;
pub mod ui;
pub mod warehouse;

#[cfg(test)]
mod layout {
    use std::collections::{BTreeMap, BTreeSet};
    use std::path::Path;

    /// Every file of `src/` as a node (`engine` for `engine/mod.rs` or `engine.rs`, `jobs/generate` for
    /// `jobs/generate.rs`) → the nodes it names as `crate::a[::b]` or `super::b` (paths as syn reads
    /// them, grouped imports included): the file `a/b.rs` when there is one, else the module `a`.
    fn uses() -> BTreeMap<String, BTreeSet<String>> {
        let src = Path::new(&std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR")).join("src");
        let mut files = Vec::new();
        for e in std::fs::read_dir(&src).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                files.extend(std::fs::read_dir(&p).unwrap().flatten().map(|e| e.path()));
            } else {
                files.push(p);
            }
        }
        files.retain(|p| p.extension().is_some_and(|x| x == "rs"));
        let node = |p: &Path| -> Option<String> {
            let rel = p.strip_prefix(&src).ok()?.with_extension("");
            let parts: Vec<String> = rel.iter().map(|c| c.to_string_lossy().into_owned()).collect();
            match parts.as_slice() {
                [f] if f != "lib" && f != "main" => Some(f.clone()),
                [d, f] if f == "mod" => Some(d.clone()),
                [d, f] => Some(format!("{d}/{f}")),
                _ => None,
            }
        };
        let nodes: BTreeSet<String> = files.iter().filter_map(|p| node(p)).collect();
        let mut out = BTreeMap::new();
        for p in &files {
            let Some(me) = node(p) else { continue };
            // `dir/sub` when that file exists, else the module `dir`; never the file itself.
            let resolve = |dir: &str, sub: &str| -> Option<String> {
                [format!("{dir}/{sub}"), dir.to_string()].into_iter().find(|n| nodes.contains(n)).filter(|t| *t != me)
            };
            let mut deps = BTreeSet::new();
            for (first, second, third) in crate::code::Paths::of(&std::fs::read_to_string(p).unwrap()).0 {
                match (first.as_str(), me.split_once('/')) {
                    ("crate", _) => deps.extend(resolve(&second, &third)),
                    // `super::` of `jobs/generate` is `jobs`: `super::x` is the sibling `jobs/x`.
                    ("super", Some((dir, _))) => deps.extend(resolve(dir, &second)),
                    // `super::` of a top-level module is the crate root.
                    ("super", None) => deps.extend(resolve(&second, &third)),
                    _ => {}
                }
            }
            out.insert(me, deps);
        }
        out
    }

    /// The first module of `graph` that reaches itself, with the path it takes.
    fn circle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
        for start in graph.keys() {
            let mut todo = vec![vec![start.clone()]];
            let mut seen = BTreeSet::new();
            while let Some(path) = todo.pop() {
                for d in graph.get(path.last().unwrap()).into_iter().flatten() {
                    let mut next = path.clone();
                    next.push(d.clone());
                    if d == start {
                        return Some(next);
                    }
                    if seen.insert(d.clone()) {
                        todo.push(next);
                    }
                }
            }
        }
        None
    }

    /// Issue 13: the engine's glue has no import circle, so each module can be read (and tested)
    /// knowing only what it imports. Issue 34: nor do the files inside a module (`jobs/`), which
    /// folding a folder into one node would hide.
    #[test]
    fn src_has_no_import_circle_and_the_engine_names_no_job() {
        let uses = uses();
        let top = |n: &str| n.split('/').next().unwrap().to_string();
        let mut modules: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        let mut siblings: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for (from, deps) in &uses {
            for d in deps {
                if top(from) != top(d) {
                    modules.entry(top(from)).or_default().insert(top(d));
                } else if from.contains('/') && d.contains('/') {
                    siblings.entry(from.clone()).or_default().insert(d.clone());
                }
            }
        }
        assert_eq!(circle(&modules), None, "an import circle between modules of src/");
        assert_eq!(circle(&siblings), None, "an import circle between files of one folder of src/");
        let engine = &modules["engine"];
        for m in ["jobs", "config", "backends", "crawl", "linters", "cli", "generation"] {
            assert!(!engine.contains(m), "the engine imports `{m}`: {engine:?}");
        }
    }

    /// Issue 48: `cargo fmt --check` (the test command's first step) covers every Rust file of the
    /// repository: a module declared inside a macro, or a file no `mod` reaches, is invisible to it.
    #[test]
    fn rustfmt_sees_every_rust_file_git_tracks() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let run = |cmd: &str, args: &[&str]| {
            let out = std::process::Command::new(cmd).args(args).current_dir(root).output().expect(cmd);
            String::from_utf8_lossy(&out.stdout).into_owned()
        };
        let seen: BTreeSet<String> = run("cargo", &["fmt", "--all", "--check", "--", "--verbose"])
            .lines()
            .filter_map(|l| l.strip_prefix("Formatting "))
            .map(|p| Path::new(p).strip_prefix(root).unwrap_or(Path::new(p)).to_string_lossy().into_owned())
            .collect();
        let tracked: BTreeSet<String> = run("git", &["ls-files", "*.rs"]).lines().map(str::to_string).collect();
        assert!(tracked.len() > 100 && tracked.contains("libs/sem/src/services/gitlab_ci.rs"), "{tracked:?}");
        let unseen: Vec<&String> = tracked.difference(&seen).collect();
        assert!(unseen.is_empty(), "rustfmt never sees {unseen:?}");
    }

    /// The test above would pass on a graph it failed to read: it must see what is known to be there.
    #[test]
    fn the_layout_graph_sees_sibling_and_module_imports() {
        let uses = uses();
        assert!(uses["jobs/repair"].contains("generation"), "{:?}", uses["jobs/repair"]);
        assert!(uses["generation/batch"].contains("generation"), "{:?}", uses["generation/batch"]);
        assert!(uses["jobs/repair"].contains("jobs/tables"), "{:?}", uses["jobs/repair"]);
        assert!(uses["engine/run"].contains("engine/plan"), "{:?}", uses["engine/run"]);
        // A grouped import: `use super::{install, Limits, Tool};`.
        assert!(uses["linters/gitlab_ci_local"].contains("linters/install"), "{:?}", uses["linters/gitlab_ci_local"]);
        let mut toy = BTreeMap::new();
        toy.insert("a/x".to_string(), BTreeSet::from(["a/y".to_string()]));
        toy.insert("a/y".to_string(), BTreeSet::from(["a/x".to_string()]));
        assert_eq!(circle(&toy), Some(vec!["a/x".into(), "a/y".into(), "a/x".into()]));
    }

    /// Issue 34: README's architecture section names every crate, every `src/` module and every
    /// generative backend, so a newcomer finds each in it; one added without a word fails here.
    #[test]
    fn readme_architecture_names_every_crate_module_and_backend() {
        let root = std::path::PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets it"));
        let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
        let start = readme.find("\n## Architecture\n").expect("README has an Architecture section") + 1;
        let rest = &readme[start..];
        let section = &rest[..rest[3..].find("\n## ").map_or(rest.len(), |i| i + 3)];
        let entries = |dir: &str| -> Vec<(String, bool)> {
            let mut v: Vec<(String, bool)> = std::fs::read_dir(root.join(dir))
                .unwrap()
                .flatten()
                .map(|e| (e.file_name().to_string_lossy().into_owned(), e.path().is_dir()))
                .collect();
            v.sort();
            v
        };
        let mut missing = Vec::new();
        for dir in ["stages", "libs"] {
            for (name, is_dir) in entries(dir) {
                if is_dir && !section.contains(&format!("`{name}`")) {
                    missing.push(format!("{dir}/{name}"));
                }
            }
        }
        for (name, is_dir) in entries("src") {
            let want = match (is_dir, name.strip_suffix(".rs")) {
                (true, _) => format!("`{name}/`"),
                (false, Some("lib" | "main")) | (false, None) => continue,
                (false, Some(_)) => format!("`{name}`"),
            };
            if !section.contains(&want) {
                missing.push(format!("src/{name}"));
            }
        }
        for k in crate::backends::BACKENDS {
            if !section.contains(&format!("`{}`", k.name)) {
                missing.push(format!("backend {}", k.name));
            }
        }
        assert!(missing.is_empty(), "README's Architecture section does not name: {missing:?}");
    }
}
