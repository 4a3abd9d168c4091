//! Each tool's output read into [`Finding`]s. A tool whose output cannot be read is an error
//! naming the tool (never a silent pass).

use std::collections::HashSet;

use serde_json::Value as Json;

use crate::{shell, Finding, Verdict};

fn num(v: &Json, key: &str) -> Option<u32> {
    v.get(key).and_then(Json::as_u64).and_then(|n| u32::try_from(n).ok())
}

fn text(v: &Json, key: &str) -> String {
    v.get(key).and_then(Json::as_str).unwrap_or_default().to_string()
}

/// actionlint's JSON findings (`[{message, line, column, kind}]`).
pub fn actionlint(out: &str) -> Result<Vec<Finding>, String> {
    let v: Json = serde_json::from_str(out).map_err(|e| format!("actionlint: unreadable output ({e})"))?;
    let items = v.as_array().ok_or("actionlint: output is not a list")?;
    Ok(items
        .iter()
        .map(|f| Finding {
            rule: text(f, "kind"),
            severity: "error".into(),
            line: num(f, "line"),
            column: num(f, "column"),
            message: text(f, "message"),
        })
        .collect())
}

/// One shellcheck comment (`-f json`), with the file it is about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShellComment {
    pub file: String,
    pub line: i64,
    pub column: i64,
    pub level: String,
    pub code: u64,
    pub message: String,
}

/// shellcheck's `-f json` output over several files.
pub fn shellcheck(out: &str) -> Result<Vec<ShellComment>, String> {
    let v: Json = serde_json::from_str(out).map_err(|e| format!("shellcheck: unreadable output ({e})"))?;
    let items = v.as_array().ok_or("shellcheck: output is not a list")?;
    Ok(items
        .iter()
        .map(|c| ShellComment {
            file: text(c, "file"),
            line: c.get("line").and_then(Json::as_i64).unwrap_or(0),
            column: c.get("column").and_then(Json::as_i64).unwrap_or(0),
            level: text(c, "level"),
            code: c.get("code").and_then(Json::as_u64).unwrap_or(0),
            message: text(c, "message"),
        })
        .collect())
}

/// A shellcheck comment on `script`, as actionlint reports it (at the `run:` key).
pub fn shell_finding(script: &shell::Script, c: &ShellComment) -> Finding {
    Finding {
        rule: format!("shellcheck:SC{}", c.code),
        severity: c.level.clone(),
        line: Some(script.line),
        column: Some(script.column),
        message: shell::message(c.code, &c.level, c.line, c.column, &c.message),
    }
}

/// zizmor's `--format json` findings, each with the input path it is about (its primary location;
/// zizmor counts rows and columns from 0).
pub fn zizmor(out: &str) -> Result<Vec<(String, Finding)>, String> {
    let v: Json = serde_json::from_str(out).map_err(|e| format!("zizmor: unreadable output ({e})"))?;
    let items = v.as_array().ok_or("zizmor: output is not a list")?;
    let mut found = Vec::with_capacity(items.len());
    for f in items {
        let locations = f.get("locations").and_then(Json::as_array).map(Vec::as_slice).unwrap_or_default();
        let primary = locations
            .iter()
            .find(|l| l.pointer("/symbolic/kind").and_then(Json::as_str) == Some("Primary"))
            .or(locations.first());
        let Some(loc) = primary else { continue };
        let path = loc.pointer("/symbolic/key/Local/verbatim_path").and_then(Json::as_str).unwrap_or_default();
        let start = loc.pointer("/concrete/location/start_point");
        let pos = |k: &str| start.and_then(|s| s.get(k)).and_then(Json::as_u64).map(|n| n as u32 + 1);
        let annotation = loc.pointer("/symbolic/annotation").and_then(Json::as_str).unwrap_or_default();
        let desc = text(f, "desc");
        found.push((
            path.to_string(),
            Finding {
                rule: text(f, "ident"),
                severity: f.pointer("/determinations/severity").and_then(Json::as_str).unwrap_or_default().into(),
                line: pos("row"),
                column: pos("column"),
                message: if annotation.is_empty() { desc } else { format!("{desc}: {annotation}") },
            },
        ));
    }
    Ok(found)
}

/// The inputs zizmor audited (its `completed <path>` log lines); the others it could not parse.
pub fn zizmor_audited(log: &str) -> HashSet<String> {
    log.lines().filter_map(|l| l.split_once("completed ").map(|(_, p)| p.trim().to_string())).collect()
}

/// The input a fatal zizmor run names (`error: failed to load file://w3.yml as workflow`) and the
/// innermost cause it gives; `None` when it names none (e.g. its only input did not parse).
pub fn zizmor_fatal(log: &str) -> Option<(String, String)> {
    let path = log.lines().find_map(|l| {
        l.strip_prefix("error: failed to load file://").and_then(|r| r.split_once(" as ")).map(|(p, _)| p.to_string())
    });
    let why = log
        .lines()
        .skip_while(|l| !l.starts_with("Caused by:"))
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .last()
        .map(|l| l.trim().split_once(": ").map_or(l.trim(), |(_, w)| w).to_string())
        .unwrap_or_else(|| "no audit was performed".into());
    Some((path?, why))
}

/// gitlab-ci-local's lines that are about its sandbox, not the configuration.
fn gitlab_noise(line: &str) -> bool {
    let l = line.trim();
    l.is_empty()
        || l.starts_with("Using fallback")
        || l.contains("ERR_ACCESS_DENIED")
        || l.contains("Access to this API has been restricted")
        || l.starts_with("Unable to retrieve default remote branch")
        || l.starts_with("parsing and downloads finished")
        || l.starts_with("json schema validated")
        || l.starts_with("(node:")
        || l.starts_with("(Use `node")
}

/// gitlab-ci-local `--list`: it stops at the first problem, so a failing file has one finding.
pub fn gitlab_ci_local(success: bool, output: &str) -> Verdict {
    if success {
        return Verdict::Findings(Vec::new());
    }
    let lines: Vec<&str> = output.lines().filter(|l| !gitlab_noise(l)).collect();
    let Some(first) = lines.first() else {
        return Verdict::Unreadable("gitlab-ci-local failed and said nothing".into());
    };
    let first = first.trim();
    let (rule, mut line, mut column) = (gitlab_rule(first), None, None);
    let message = if first.starts_with("Error attempting to evaluate") {
        lines.iter().take(4).map(|l| l.trim()).collect::<Vec<_>>().join(" ")
    } else {
        first.to_string()
    };
    // js-yaml: "YAMLException: <what> (line:column)".
    if rule == "yaml" {
        if let Some((l, c)) =
            first.rsplit_once('(').and_then(|(_, p)| p.strip_suffix(')')).and_then(|p| p.split_once(':'))
        {
            line = l.parse().ok();
            column = c.parse().ok();
        }
    }
    Verdict::Findings(vec![Finding { rule: rule.into(), severity: "error".into(), line, column, message }])
}

fn gitlab_rule(msg: &str) -> &'static str {
    let has = |s: &str| msg.contains(s);
    if msg.starts_with("YAMLException") {
        "yaml"
    } else if has(" not found for ") && msg.starts_with("stage:") {
        "stage-not-found"
    } else if msg.starts_with("needs:") && has("could not be found") {
        "needs-not-found"
    } else if has("is unspecified, used by") {
        "extends-not-found"
    } else if has("must have script specified") {
        "script-missing"
    } else if msg.starts_with("Error attempting to evaluate") {
        "rules"
    } else if has("could not be fetched") || has("not found in") && has("include") {
        "include-unavailable"
    } else if msg.starts_with("TypeError") || msg.starts_with("Error:") || msg.starts_with("RangeError") {
        "tool-error"
    } else if has(" must ") || has(" should ") || has(" is not ") || has(" cannot ") {
        "schema"
    } else {
        "gitlab-ci-local"
    }
}

/// The circleci-config-parser driver's line for one file: `{"ok":true}`, `{"error":"…"}` (the
/// config is rejected) or `{"crash":"…"}` (the parser failed: the text is not judged).
pub fn circleci(out: &Json) -> Verdict {
    if out.get("ok").and_then(Json::as_bool) == Some(true) {
        return Verdict::Findings(Vec::new());
    }
    if let Some(crash) = out.get("crash").and_then(Json::as_str) {
        return Verdict::Unreadable(format!("circleci-config-parser failed on this text: {crash}"));
    }
    let err = text(out, "error");
    // "Error while parsing - config/job:build/steps\nUnknown native command: chekout"
    let (rule, message) = match err.strip_prefix("Error while parsing - ") {
        Some(rest) => {
            let (path, what) = rest.split_once('\n').unwrap_or((rest, ""));
            let rule: Vec<&str> = path.split('/').map(|c| c.split(':').next().unwrap_or(c)).collect();
            (rule.join("/"), format!("{} ({path})", what.trim()))
        }
        None => ("tool-error".to_string(), err.lines().next().unwrap_or("").to_string()),
    };
    Verdict::Findings(vec![Finding { rule, severity: "error".into(), line: None, column: None, message }])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn actionlint_findings() {
        let f =
            actionlint(r#"[{"message":"job \"a\" needs job \"x\"","line":3,"column":3,"kind":"job-needs"}]"#).unwrap();
        assert_eq!((f[0].rule.as_str(), f[0].line, f[0].column), ("job-needs", Some(3), Some(3)));
        assert!(actionlint("not json").unwrap_err().starts_with("actionlint:"));
    }

    #[test]
    fn gitlab_first_problem() {
        let out = "Using fallback git user.name\n  Command failed with ERR_ACCESS_DENIED: git\nneeds: [nope] for test could not be found\n";
        let Verdict::Findings(f) = gitlab_ci_local(false, out) else { panic!() };
        assert_eq!(
            (f[0].rule.as_str(), f[0].message.as_str()),
            ("needs-not-found", "needs: [nope] for test could not be found")
        );
        let Verdict::Findings(f) = gitlab_ci_local(false, "YAMLException: unexpected end of the stream (2:1)\n") else {
            panic!()
        };
        assert_eq!((f[0].rule.as_str(), f[0].line, f[0].column), ("yaml", Some(2), Some(1)));
        assert_eq!(gitlab_ci_local(true, "anything"), Verdict::Findings(vec![]));
        assert!(matches!(gitlab_ci_local(false, "Using fallback x\n"), Verdict::Unreadable(_)));
    }

    #[test]
    fn circleci_paths_become_rules() {
        let v = serde_json::json!({"error": "Error while parsing - config/workflow:main/workflow_job:deploy\nJob deploy not found in config"});
        let Verdict::Findings(f) = circleci(&v) else { panic!() };
        assert_eq!(f[0].rule, "config/workflow/workflow_job");
        assert_eq!(f[0].message, "Job deploy not found in config (config/workflow:main/workflow_job:deploy)");
        assert_eq!(circleci(&serde_json::json!({"ok": true})), Verdict::Findings(vec![]));
        assert!(matches!(circleci(&serde_json::json!({"crash": "TypeError"})), Verdict::Unreadable(_)));
    }

    #[test]
    fn zizmor_primary_locations() {
        let out = r#"[{"ident":"artipacked","desc":"credential persistence","determinations":{"severity":"Medium"},
          "locations":[{"symbolic":{"key":{"Local":{"verbatim_path":"a.yml"}},"annotation":"does not set persist-credentials","kind":"Primary"},
          "concrete":{"location":{"start_point":{"row":5,"column":8}}}}]}]"#;
        let f = zizmor(out).unwrap();
        assert_eq!(f[0].0, "a.yml");
        assert_eq!((f[0].1.line, f[0].1.column, f[0].1.severity.as_str()), (Some(6), Some(9), "Medium"));
        let log = "fatal: no audit was performed\nerror: failed to load file://w0.yml as workflow\n\nCaused by:\n    0: failed to load\n    2: jobs: data did not match any variant\n\nStack backtrace:\n";
        assert_eq!(zizmor_fatal(log), Some(("w0.yml".into(), "jobs: data did not match any variant".into())));
        assert_eq!(zizmor_fatal("fatal: no audit was performed\n"), None);
        let audited = zizmor_audited(" INFO audit: zizmor: 🌈 completed a.yml\n WARN failed to parse input\n");
        assert!(audited.contains("a.yml") && audited.len() == 1);
    }
}
