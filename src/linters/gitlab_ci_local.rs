//! gitlab-ci-local 4.65.1 (GitLab CI), the offline checker that expands a pipeline as GitLab does
//! (`include`, `extends`, `needs`, `rules`, stages, its JSON Schema) and lists the jobs without
//! running one (`--list`). It evaluates `rules: if` as JavaScript, so model text reaches an
//! `eval`: it runs only confined (Node.js's permission model: no process, no file outside its
//! scratch folder) and offline (its own network namespace), or not at all.

use std::time::Duration;

use anyhow::{anyhow, Result};
use doc2ci_lint::{read, Verdict};
use doc2ci_validate::Service;
use rayon::prelude::*;

use super::{install, sandbox, Limits, Tool};

pub const TOOL: Tool = Tool { name: "gitlab-ci-local", service: Service::GitlabCi, kind: "validator", probe, lint };

fn probe() -> Result<String, String> {
    install::node_ready()?;
    if !sandbox::netns() {
        return Err("gitlab-ci-local would fetch remote includes, and this machine gives no network namespace \
                    (`unshare --net --map-root-user` failed): not run"
            .into());
    }
    Ok("4.65.1".into())
}

fn lint(texts: &[&str], limits: Limits) -> Result<Vec<Verdict>> {
    // It reads `.gitlab-ci.yml` from its working folder: one process per text, both cores busy.
    texts.par_iter().map(|t| one(t, limits.per_text)).collect()
}

fn one(text: &str, budget: Duration) -> Result<Verdict> {
    let tools = install::node_ready().map_err(|e| anyhow!(e))?;
    let dir = sandbox::Scratch::new("gitlab")?;
    std::fs::write(dir.0.join(".gitlab-ci.yml"), text)?;
    let script = tools.join("node_modules/gitlab-ci-local/src/index.js");
    let mut args = install::node_args(&tools, &dir.0, &script);
    // `rules: changes` asks git what changed; with no repository, every path counts as changed.
    args.extend(["--list".to_string(), "--no-evaluate-rule-changes".to_string()]);
    let ran = sandbox::run(&install::node(), &args, &dir.0, None, budget)?;
    if ran.status.is_none() {
        return Ok(Verdict::Unreadable(format!("gitlab-ci-local did not finish within {} s", budget.as_secs())));
    }
    Ok(read::gitlab_ci_local(ran.success(), &format!("{}\n{}", ran.stdout, ran.stderr)))
}
