//! Each distinct text linted once (issue 36): a tool's findings on a text are kept under the hash of
//! (tool, tool version, the code that reads its output, the text), beside the embedding cache in
//! `_doc2ci/cache/lints/`, so a text several models produced, a repair round that changed nothing,
//! a re-run or a new model's duplicate answers cost no tool run. Only findings are kept: a text a
//! tool could not read (a timeout among them) is asked again next time.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use anyhow::Result;
use doc2ci_lint::{Finding, Verdict};

use super::{Limits, Tool};
use crate::warehouse::atomic_write;

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
        let cached = std::fs::read(path(&dir, t)).ok().and_then(|b| serde_json::from_slice::<Vec<Finding>>(&b).ok());
        match cached {
            Some(f) => {
                known.insert(t, Verdict::Findings(f));
            }
            None => todo.push(t),
        }
    }
    let fresh = if todo.is_empty() { Vec::new() } else { (tool.lint)(&todo, limits)? };
    for (t, v) in todo.iter().zip(fresh) {
        if let Verdict::Findings(f) = &v {
            let p = path(&dir, t);
            std::fs::create_dir_all(p.parent().expect("a cache path has a folder"))?;
            // A cache is only a cache: a verdict that cannot be kept is asked again next time.
            let _ = atomic_write(&p, &serde_json::to_vec(f)?);
        }
        known.insert(t, v);
    }
    Ok((texts.iter().map(|t| known[t].clone()).collect(), todo.len()))
}
