//! A service's JSON Schema as its lint validator, for the service whose file names `schema`:
//! Travis CI, where no offline validator exists beyond its schema (travis-yml, Travis's own
//! parser, is a Ruby gem this project cannot install from the registries it uses, and the
//! `travis lint` command asks Travis's API). The rows say so with `tool = "schema"`: the same
//! schema as validate, made fragment-aware by the completion rules.

use anyhow::Result;
use doc2ci_lint::{Finding, Verdict};
use doc2ci_validate::Service;

use super::{Limits, Tool};

pub const TOOL: Tool = Tool { name: "schema", kind: "validator", probe, lint };

fn service() -> Service {
    super::service_of(TOOL.name)
}

fn probe() -> Result<String, String> {
    let service = service();
    let asset = crate::resources::schema_asset(service);
    let sha =
        crate::assets::pinned_sha256(&asset).ok_or_else(|| format!("no pinned {} schema", service.def().display))?;
    crate::resources::validator().map_err(|e| format!("{e:#}"))?;
    Ok(format!("{service} schema {}", &sha[..12]))
}

fn lint(texts: &[&str], _limits: Limits) -> Result<Vec<Verdict>> {
    let (v, service) = (crate::resources::validator()?, service());
    texts
        .iter()
        .map(|t| {
            let r = v.validate(service, t)?;
            let rule = if r.parse_ok { "schema" } else { "parse" };
            Ok(Verdict::Findings(
                r.errors
                    .into_iter()
                    .map(|message| Finding {
                        rule: rule.into(),
                        severity: "error".into(),
                        line: None,
                        column: None,
                        message,
                    })
                    .collect(),
            ))
        })
        .collect()
}
