//! CircleCI's own config parser (`@circleci/circleci-config-parser` 0.10.0-alpha.3, the parser of
//! CircleCI's config SDK and of its visual editor), run by `tools/node/circleci.cjs` over a batch
//! in one process. It resolves orbs from CircleCI's registry, which an offline check cannot reach:
//! a text that imports orbs is not judged (the row says so); neither is one the parser crashes on.
//! Known limits of this parser (its findings stand as the tool's): it does not know the `when` /
//! `unless` steps of 2.1.

use std::time::Duration;

use anyhow::Result;
use doc2ci_lint::{read, Verdict};

use super::{install, Limits, Tool};

pub const TOOL: Tool = Tool { name: "circleci-config-parser", kind: "validator", probe, lint };

fn probe() -> Result<String, String> {
    install::node_ready()?;
    Ok("0.10.0-alpha.3".into())
}

fn lint(texts: &[&str], limits: Limits) -> Result<Vec<Verdict>> {
    let (orbs, plain): (Vec<usize>, Vec<usize>) =
        (0..texts.len()).partition(|&i| doc2ci_lint::wrap::imports_orbs(texts[i]));
    let asked: Vec<&str> = plain.iter().map(|&i| texts[i]).collect();
    let answers = super::per_core("circleci-config-parser", &asked, limits, batch)?;
    let mut out: Vec<Option<Verdict>> = vec![None; texts.len()];
    for i in orbs {
        out[i] = Some(Verdict::Unreadable(
            "imports orbs, whose definitions only CircleCI's orb registry has (not judged offline)".into(),
        ));
    }
    for (i, v) in plain.into_iter().zip(answers) {
        out[i] = Some(v);
    }
    Ok(out.into_iter().map(|v| v.expect("every text has a verdict")).collect())
}

fn batch(texts: &[&str], budget: Duration) -> Result<Vec<Verdict>> {
    Ok(super::node_driver("circleci-config-parser", "circleci.cjs", texts, budget)?
        .iter()
        .map(read::circleci)
        .collect())
}
