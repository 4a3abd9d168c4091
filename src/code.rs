//! Code versions, derived at build time from the sources (`build.rs`): the version of a job is the
//! hash of its file and of every module, workspace crate and external crate version it reaches
//! through its imports, so a partition's cache key changes exactly when code that can change its
//! rows does, and `plan` can say "stage code changed". Nothing here is listed by hand.

include!(concat!(env!("OUT_DIR"), "/code_versions.rs"));

fn unit(file: &str) -> &'static (&'static str, &'static str, &'static [&'static str]) {
    let file = file.replace('\\', "/");
    let name = FILES
        .iter()
        .find(|(f, _)| *f == file)
        .map(|(_, u)| *u)
        .unwrap_or_else(|| panic!("internal: `{file}` is not a source file of this crate"));
    UNITS.iter().find(|u| u.0 == name).expect("build.rs lists every unit it maps a file to")
}

/// The code version of the source file `file` (as `file!()` names it): its unit and all it reaches.
pub fn version_of(file: &str) -> String {
    unit(file).1.to_string()
}

/// Every unit (`src/` module, job file, `doc2ci-*` crate) the version of `file` covers.
pub fn covered_by(file: &str) -> &'static [&'static str] {
    unit(file).2
}

/// The first three segments of every path a Rust file writes (`use` trees included), read by a
/// real parser: an independent check of `build.rs`'s scan, and the import graph of the `layout`
/// tests (comments and strings are not paths, grouped imports are).
#[cfg(test)]
#[derive(Default)]
pub(crate) struct Paths(pub std::collections::BTreeSet<(String, String, String)>);

#[cfg(test)]
impl Paths {
    /// The paths of one source file.
    pub fn of(text: &str) -> Paths {
        use syn::visit::Visit;
        let mut p = Paths::default();
        p.visit_file(&syn::parse_file(text).expect("a Rust file syn parses"));
        p
    }

    fn add(&mut self, segs: &[&str]) {
        let seg = |i: usize| segs.get(i).map_or(String::new(), |s| s.to_string());
        if !segs.is_empty() {
            self.0.insert((seg(0), seg(1), seg(2)));
        }
    }
}

#[cfg(test)]
impl<'a> syn::visit::Visit<'a> for Paths {
    fn visit_path(&mut self, p: &'a syn::Path) {
        let segs: Vec<String> = p.segments.iter().map(|s| s.ident.to_string()).collect();
        self.add(&segs.iter().map(String::as_str).collect::<Vec<_>>());
        syn::visit::visit_path(self, p);
    }
    fn visit_item_use(&mut self, u: &'a syn::ItemUse) {
        fn walk(t: &syn::UseTree, prefix: &mut Vec<String>, out: &mut Paths) {
            match t {
                syn::UseTree::Path(p) => {
                    prefix.push(p.ident.to_string());
                    walk(&p.tree, prefix, out);
                    prefix.pop();
                }
                syn::UseTree::Group(g) => g.items.iter().for_each(|i| walk(i, prefix, out)),
                syn::UseTree::Name(n) => emit(prefix, &n.ident.to_string(), out),
                syn::UseTree::Rename(r) => emit(prefix, &r.ident.to_string(), out),
                syn::UseTree::Glob(_) => emit(prefix, "", out),
            }
        }
        fn emit(prefix: &[String], last: &str, out: &mut Paths) {
            let all: Vec<&str> = prefix.iter().map(String::as_str).chain([last]).filter(|s| !s.is_empty()).collect();
            out.add(&all);
        }
        walk(&u.tree, &mut vec![], self);
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;
    use std::path::PathBuf;

    use super::*;

    /// Where the tests run from (cargo sets it at run time; a build cached from another checkout
    /// must not read that checkout's files).
    fn root() -> PathBuf {
        PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"))
    }

    /// Workspace crates `name` depends on (normal dependencies, transitively), from `cargo metadata`.
    fn workspace_deps(meta: &serde_json::Value, name: &str, out: &mut BTreeSet<String>) {
        let pkg = meta["packages"].as_array().unwrap().iter().find(|p| p["name"] == name).unwrap();
        for d in pkg["dependencies"].as_array().unwrap() {
            let dn = d["name"].as_str().unwrap();
            if d["kind"].is_null() && dn.starts_with("doc2ci-") && out.insert(dn.to_string()) {
                workspace_deps(meta, dn, out);
            }
        }
    }

    /// Issue 30: for every job file, the version covers each `src/` module and sibling job its
    /// files import (parsed with syn), each workspace crate it names, and every workspace crate
    /// those depend on according to `cargo metadata`.
    #[test]
    fn every_job_version_covers_what_it_imports_and_depends_on() {
        let out = std::process::Command::new(env!("CARGO"))
            .args(["metadata", "--format-version", "1", "--no-deps", "--offline", "--manifest-path"])
            .arg(root().join("Cargo.toml"))
            .output()
            .expect("cargo metadata runs");
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let meta: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let modules: BTreeSet<String> = FILES.iter().map(|(_, u)| u.to_string()).collect();
        let jobs: Vec<_> = std::fs::read_dir(root().join("src/jobs")).unwrap().flatten().map(|e| e.path()).collect();
        assert!(jobs.len() >= 12, "{jobs:?}");
        let mut checked = 0;
        for path in jobs {
            let rel = format!("src/jobs/{}", path.file_name().unwrap().to_string_lossy());
            let covered: BTreeSet<&str> = covered_by(&rel).iter().copied().collect();
            let paths = Paths::of(&std::fs::read_to_string(&path).unwrap());
            let mut want = BTreeSet::new();
            for (first, second, _) in &paths.0 {
                match first.as_str() {
                    "crate" if second == "jobs" => continue,
                    "crate" if modules.contains(second.as_str()) => want.insert(second.clone()),
                    "crate" => want.insert("lib".into()),
                    "super" if modules.contains(&format!("jobs/{second}")) => want.insert(format!("jobs/{second}")),
                    "super" => want.insert("jobs/mod".into()),
                    c if c.starts_with("doc2ci_") => {
                        let name = c.replace('_', "-");
                        workspace_deps(&meta, &name, &mut want);
                        want.insert(name)
                    }
                    _ => continue,
                };
            }
            for m in &want {
                assert!(covered.contains(m.as_str()), "{rel}: its code version does not cover `{m}` ({covered:?})");
            }
            checked += want.len();
        }
        assert!(checked > 50, "only {checked} imports checked");
    }

    #[test]
    fn versions_follow_imports_and_differ() {
        let score = covered_by("src/jobs/score.rs");
        for m in ["jobs/score", "doc2ci-score", "doc2ci-embed", "doc2ci-rows", "resources", "warehouse"] {
            assert!(score.contains(&m), "{m} missing from {score:?}");
        }
        // A job reaches its siblings only through what it names.
        assert!(!score.contains(&"jobs/generate"), "{score:?}");
        assert_ne!(version_of("src/jobs/score.rs"), version_of("src/jobs/validate.rs"));
        assert_eq!(version_of("src/engine/mod.rs"), version_of("src/engine/plan.rs"), "one module, one version");
    }
}
