//! doc2ci's binary side: the engine (`engine`: DAG, cache keys, plan, scheduler), the study's
//! jobs (`jobs`: one file per stage, wiring config to the stage crates), the backends
//! (`backends`), the Parquet warehouse and SQL over it, and the CLI that wires them. Stage logic
//! lives in `stages/`, shared row types and models in `libs/`; nothing here computes a metric.

pub mod assets;
pub mod backends;
pub mod cli;
pub mod code;
pub mod coding;
pub mod config;
pub mod crawl;
pub mod engine;
pub mod jobs;
pub mod keys;
pub mod linters;
pub mod release;
pub mod remote;
pub mod resources;
pub mod sql;
pub mod ui;
pub mod warehouse;

#[cfg(test)]
mod layout {
    use std::collections::{BTreeMap, BTreeSet};
    use std::path::Path;

    /// Top-level module → the top-level modules its files name as `crate::…`.
    fn uses() -> BTreeMap<String, BTreeSet<String>> {
        fn walk(d: &Path, top: Option<&str>, out: &mut BTreeMap<String, BTreeSet<String>>) {
            for e in std::fs::read_dir(d).unwrap().flatten() {
                let p = e.path();
                let name = p.file_stem().unwrap().to_string_lossy().into_owned();
                let module = top.map_or(name.clone(), str::to_string);
                if p.is_dir() {
                    walk(&p, Some(&module), out);
                } else if p.extension().is_some_and(|x| x == "rs") && !matches!(module.as_str(), "lib" | "main") {
                    let text = std::fs::read_to_string(&p).unwrap();
                    let deps = out.entry(module.clone()).or_default();
                    for (i, _) in text.match_indices("crate::") {
                        let m: String =
                            text[i + 7..].chars().take_while(|c| c.is_ascii_lowercase() || *c == '_').collect();
                        if !m.is_empty() && m != module {
                            deps.insert(m);
                        }
                    }
                }
            }
        }
        let mut out = BTreeMap::new();
        walk(
            &Path::new(&std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR")).join("src"),
            None,
            &mut out,
        );
        out
    }

    /// Issue 13: the engine's glue has no import circle, so each module can be read (and tested)
    /// knowing only what it imports.
    #[test]
    fn src_has_no_import_circle_and_the_engine_names_no_job() {
        let uses = uses();
        for start in uses.keys() {
            let (mut seen, mut todo) = (BTreeSet::new(), vec![start.clone()]);
            while let Some(m) = todo.pop() {
                for d in uses.get(&m).into_iter().flatten() {
                    assert_ne!(d, start, "import circle through `{start}` (via `{m}`): {uses:?}");
                    if seen.insert(d.clone()) {
                        todo.push(d.clone());
                    }
                }
            }
        }
        let engine = &uses["engine"];
        for m in ["jobs", "config", "backends", "crawl", "linters", "cli"] {
            assert!(!engine.contains(m), "the engine imports `{m}`: {engine:?}");
        }
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
