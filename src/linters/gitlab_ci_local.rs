//! gitlab-ci-local 4.65.1 (GitLab CI), the offline checker that expands a pipeline as GitLab does
//! (`include`, `extends`, `needs`, `rules`, stages, its JSON Schema) and lists the jobs without
//! running one (`--list`). It evaluates `rules: if` as JavaScript, so model text reaches an
//! `eval`: it runs only confined (Node.js's permission model: no process, no file outside its
//! scratch folder) and offline (its own network namespace), or not at all.
//!
//! It runs as a library in doc2ci's driver (`tools/node/gitlab.mjs`): one process per core checks
//! a chunk of texts one after another, each in a folder of its own, with the JSON Schema compiled
//! once instead of once per text (most of a text's time as a command). A chunk that fails or runs
//! out of time is checked again one text per process ([`super::chunked`]), so a hostile text costs
//! only its own verdict. `bench/lint_gitlab.py` compares it with one command per text.

use std::time::Duration;

use anyhow::Result;
use doc2ci_lint::{read, Verdict};

use super::{install, Limits, Tool};

pub const TOOL: Tool = Tool { name: "gitlab-ci-local", kind: "validator", probe, lint };

fn probe() -> Result<String, String> {
    install::node_ready()?;
    if !crate::sandbox::offline_available() {
        return Err("gitlab-ci-local would fetch remote includes, and this machine gives no network namespace \
                    (`unshare --net --map-root-user` failed): not run"
            .into());
    }
    Ok("4.65.1".into())
}

fn lint(texts: &[&str], limits: Limits) -> Result<Vec<Verdict>> {
    super::per_core("gitlab-ci-local", texts, limits, batch)
}

fn batch(texts: &[&str], budget: Duration) -> Result<Vec<Verdict>> {
    super::node_driver("gitlab-ci-local", "gitlab.mjs", texts, budget)?
        .iter()
        .map(|a| {
            let ok = a.get("ok").and_then(|v| v.as_bool());
            let output = a.get("output").and_then(|v| v.as_str());
            match (ok, output) {
                (Some(ok), Some(output)) => Ok(read::gitlab_ci_local(ok, output)),
                _ => anyhow::bail!("gitlab-ci-local: an answer without `ok` and `output`"),
            }
        })
        .collect()
}

/// The command line on one text in a scratch folder of its own: how the stage ran the tool before
/// the driver, kept as the driver's peer (the test that their verdicts are the same).
#[cfg(test)]
pub(super) fn one_process(text: &str, budget: Duration) -> Result<Verdict> {
    let tools = install::node_ready().map_err(|e| anyhow::anyhow!(e))?;
    let dir = super::scratch()?;
    std::fs::write(dir.0.join(".gitlab-ci.yml"), text)?;
    let script = tools.join("node_modules/gitlab-ci-local/src/index.js");
    let mut args = install::node_args(&tools, &dir.0, &script);
    // `rules: changes` asks git what changed; with no repository, every path counts as changed.
    args.extend(["--list".to_string(), "--no-evaluate-rule-changes".to_string()]);
    let ran = super::run(&install::node(), &args, &dir.0, None, budget)?;
    if ran.status.is_none() {
        return Ok(Verdict::Unreadable(format!("gitlab-ci-local did not finish within {} s", budget.as_secs())));
    }
    Ok(read::gitlab_ci_local(ran.success(), &format!("{}\n{}", ran.stdout, ran.stderr)))
}
