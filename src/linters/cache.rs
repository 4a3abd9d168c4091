//! Each distinct text linted once (issue 36): a tool's findings on a text are kept under the hash of
//! (tool, tool version, the code that reads its output, the text), beside the embedding cache in
//! `_doc2ci/cache/lints/`, so a text several models produced, a repair round that changed nothing,
//! a re-run or a new model's duplicate answers cost no tool run. Findings are kept, and so is a
//! tool's own "cannot read this" (zizmor on a fragment, CircleCI's orbs); a timeout or a crash is
//! asked again.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use anyhow::Result;
use doc2ci_lint::{Finding, Verdict};

use super::{Limits, Tool};
use crate::warehouse::atomic_write;

/// A kept verdict.
#[derive(serde::Serialize, serde::Deserialize)]
enum Kept {
    Findings(Vec<Finding>),
    Unreadable(String),
}

/// Unreadable verdicts that are the tool's word on the text itself, the same on every run (zizmor
/// on what is not a workflow, CircleCI's orbs); any other (a timeout, a crash) is asked again.
const ABOUT_THE_TEXT: &[&str] = &["zizmor could not read it", "zizmor could not load it", "imports orbs"];

/// The cache folder of one tool at one version and one version of the code that judges its output.
fn folder(root: &Path, tool: &Tool, version: &str) -> PathBuf {
    let code = crate::code::version_of(file!());
    let key = blake3::hash(format!("{}\n{version}\n{code}", tool.name).as_bytes()).to_hex();
    root.join(format!("{}-{}", tool.name, &key[..16]))
}

fn path(dir: &Path, text: &str) -> PathBuf {
    let h = blake3::hash(text.as_bytes()).to_hex();
    dir.join(&h[..2]).join(format!("{h}.json"))
}

/// The tool's verdicts on `texts` (in order): cached findings where there are some, the tool run
/// once on each other distinct text. Also how many distinct texts the tool was run on.
pub fn lint(root: &Path, tool: &Tool, version: &str, texts: &[&str], limits: Limits) -> Result<(Vec<Verdict>, usize)> {
    let dir = folder(root, tool, version);
    let mut known: HashMap<&str, Verdict> = HashMap::new();
    let (mut todo, mut queued): (Vec<&str>, std::collections::HashSet<&str>) = Default::default();
    for t in texts {
        // Each distinct text is looked up once, and queued once (in the order tools batch in).
        if known.contains_key(t) || !queued.insert(t) {
            continue;
        }
        match std::fs::read(path(&dir, t)).ok().and_then(|b| serde_json::from_slice::<Kept>(&b).ok()) {
            Some(Kept::Findings(f)) => {
                known.insert(t, Verdict::Findings(f));
            }
            Some(Kept::Unreadable(why)) => {
                known.insert(t, Verdict::Unreadable(why));
            }
            None => todo.push(t),
        }
    }
    let fresh = if todo.is_empty() { Vec::new() } else { (tool.lint)(&todo, limits)? };
    for (t, v) in todo.iter().zip(fresh) {
        let kept = match &v {
            Verdict::Findings(f) => Some(Kept::Findings(f.clone())),
            // What depends on the moment (a timeout, a crash) is not the tool's verdict on the text.
            Verdict::Unreadable(why) if ABOUT_THE_TEXT.iter().any(|m| why.contains(m)) => {
                Some(Kept::Unreadable(why.clone()))
            }
            Verdict::Unreadable(_) => None,
        };
        if let Some(k) = kept {
            let p = path(&dir, t);
            std::fs::create_dir_all(p.parent().expect("a cache path has a folder"))?;
            // A cache is only a cache: a verdict that cannot be kept is asked again next time.
            let _ = atomic_write(&p, &serde_json::to_vec(&k)?);
        }
        known.insert(t, v);
    }
    Ok((texts.iter().map(|t| known[t].clone()).collect(), todo.len()))
}
