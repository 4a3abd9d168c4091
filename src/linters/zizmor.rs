//! zizmor 1.32.0 (GitHub Actions security audits), from its PyPI wheel pinned in
//! `tools/manifest.toml`, offline (`--offline`: the audits that need GitHub's API are off) with the
//! default persona: template injection, excessive permissions, unpinned actions, credential
//! persistence and the rest of its offline audits.

use std::time::Duration;

use anyhow::{bail, Result};
use doc2ci_lint::{read, Verdict};

use super::{Limits, Tool};

pub const TOOL: Tool = Tool { name: "zizmor", kind: "audit", probe, lint };

const ASSET: &str = "tools/zizmor";

fn probe() -> Result<String, String> {
    crate::assets::require(ASSET).map_err(|e| format!("{e:#}"))?;
    Ok("1.32.0".into())
}

fn lint(texts: &[&str], limits: Limits) -> Result<Vec<Verdict>> {
    super::per_core("zizmor", texts, limits, batch)
}

/// zizmor skips an input that does not parse or validate as a workflow, but stops the whole run on
/// one that validates and still fails to load ("failed to load file://X as workflow"): that input
/// is set aside with zizmor's reason and the rest run again.
fn batch(texts: &[&str], budget: Duration) -> Result<Vec<Verdict>> {
    let exe = crate::assets::require(ASSET)?;
    let dir = super::scratch()?;
    let names: Vec<String> = (0..texts.len()).map(|i| format!("w{i}.yml")).collect();
    for (name, t) in names.iter().zip(texts) {
        std::fs::write(dir.0.join(name), t)?;
    }
    let mut out: Vec<Option<Verdict>> = vec![None; texts.len()];
    loop {
        let left: Vec<usize> = (0..texts.len()).filter(|&i| out[i].is_none()).collect();
        if left.is_empty() {
            break;
        }
        let mut args: Vec<String> =
            ["--offline", "--no-config", "--no-progress", "--color", "never", "--format", "json"]
                .map(String::from)
                .to_vec();
        args.extend(left.iter().map(|&i| names[i].clone()));
        let ran = super::run(&exe, &args, &dir.0, None, budget)?;
        if ran.status.is_none() || ran.truncated {
            bail!("zizmor did not finish");
        }
        let found = match read::zizmor(&ran.stdout) {
            Ok(found) => found,
            Err(e) => {
                let fatal = read::zizmor_fatal(&ran.stderr);
                let named = fatal.as_ref().and_then(|(failed, _)| left.iter().find(|&&i| names[i] == *failed));
                match (named, fatal) {
                    (Some(&i), Some((_, why))) => {
                        out[i] = Some(Verdict::Unreadable(format!("zizmor could not load it: {why}")))
                    }
                    // Nothing was audited: the only input did not parse.
                    _ if left.len() == 1 => out[left[0]] = Some(Verdict::Unreadable(unparsed())),
                    _ => bail!("{e} ({})", ran.stderr.lines().find(|l| l.starts_with("error")).unwrap_or("")),
                }
                continue;
            }
        };
        let audited = read::zizmor_audited(&ran.stderr);
        for &i in &left {
            out[i] = Some(if audited.contains(&names[i]) {
                Verdict::Findings(Vec::new())
            } else {
                Verdict::Unreadable(unparsed())
            });
        }
        for (path, f) in found {
            if let Some(i) = names.iter().position(|n| *n == path) {
                if let Some(Verdict::Findings(v)) = &mut out[i] {
                    v.push(f);
                }
            }
        }
    }
    Ok(out.into_iter().map(|v| v.expect("every input has a verdict")).collect())
}

fn unparsed() -> String {
    "zizmor could not read it as a workflow (it audits only what parses and validates)".into()
}
