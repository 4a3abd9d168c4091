//! Where a text's lint time goes (issue 36, item 1), per tool and service: starting a process
//! bare and inside the lint sandbox, the runtime's and the tool's own start-up, the check itself,
//! the completion wrappers, and the stage's rate on every core. `bench/lint.sh` runs it on texts
//! of the Doc2CI-scale workload:
//!
//!   lint_phases TEXTS.jsonl        (one `{"service": "gitlab-ci", "text": "..."}` per line)
//!
//! Each tool runs as the lint stage runs it (`Tool::lint`: its chunks, its drivers, the sandbox),
//! first on one worker thread so that one process does the work: a run of 1 text and a run of
//! `n` texts give the check (t(n) − t(1)) / (n − 1) and the start-up t(1) − check. Then on every
//! core (one process per core, as the stage does) for texts/s. The lint cache is not used.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use doc2ci::linters::{self, Limits};
use doc2ci_lint::{complete, Completion};
use doc2ci_validate::Service;

/// Texts per service in the one-process run (within every tool's chunk).
const N: usize = 48;

fn main() -> Result<()> {
    let file = std::env::args().nth(1).context("usage: lint_phases TEXTS.jsonl")?;
    let mut by_service: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (i, line) in std::fs::read_to_string(&file).with_context(|| file.clone())?.lines().enumerate() {
        let v: serde_json::Value = serde_json::from_str(line).with_context(|| format!("{file}:{}", i + 1))?;
        let (Some(s), Some(t)) = (v["service"].as_str(), v["text"].as_str()) else {
            anyhow::bail!("{file}:{}: needs `service` and `text`", i + 1);
        };
        by_service.entry(s.to_string()).or_default().push(t.to_string());
    }
    let limits = Limits { per_text: Duration::from_secs(30) };
    let one = rayon::ThreadPoolBuilder::new().num_threads(1).build()?;
    let dir = linters::scratch()?;

    // Process start, bare and confined (the sandbox's own cost), and Node.js's start-up.
    let bare = best(5, || Command::new("true").status().map(|_| ()).map_err(Into::into))?;
    let confined = best(5, || linters::run(Path::new("/bin/true"), &[], &dir.0, None, limits.per_text).map(|_| ()))?;
    let node = linters::install::node();
    let node_start =
        best(5, || linters::run(&node, &["-e".into(), "0".into()], &dir.0, None, limits.per_text).map(|_| ()))?;
    println!("process start: bare {:.1} ms, in the lint sandbox {:.1} ms", ms(bare), ms(confined));
    println!("Node.js start-up in the sandbox (node -e 0): {:.1} ms", ms(node_start));
    println!();
    println!(
        "| service | tool | texts | completed | one process: start-up ms | check ms/text | texts/s | every core: texts/s |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    for (name, texts) in &by_service {
        let service: Service = name.parse().with_context(|| format!("{file}: unknown service `{name}`"))?;
        // What each tool is given: the texts as written, then the completed fragments.
        let t0 = Instant::now();
        let completions: Vec<Completion> = texts.iter().map(|t| complete(service, t)).collect();
        let complete_us = t0.elapsed().as_secs_f64() * 1e6 / texts.len() as f64;
        let mut all: Vec<&str> = texts.iter().map(String::as_str).collect();
        for c in &completions {
            if let Completion::Wrapped(w) = c {
                all.push(&w.text);
            }
        }
        let wrapped = all.len() - texts.len();
        let sample: Vec<&str> = all.iter().copied().take(N).collect();
        for tool in linters::for_service(service) {
            if let Err(why) = linters::probe(tool) {
                println!("| {name} | {} | — | — | cannot run here: {why} | | | |", tool.name);
                continue;
            }
            let lint = |t: &[&str]| (tool.lint)(t, limits).map(|_| ());
            let t1 = one.install(|| best(3, || lint(&sample[..1])))?;
            let tn = one.install(|| best(2, || lint(&sample)))?;
            let check = (tn - t1).as_secs_f64() / (sample.len() - 1) as f64;
            let start = t1.as_secs_f64() - check;
            let s = Instant::now();
            lint(&all)?;
            let rate = all.len() as f64 / s.elapsed().as_secs_f64();
            println!(
                "| {name} | {} | {} | {wrapped} ({:.0} µs each) | {:.1} | {:.2} | {:.1} | {rate:.1} |",
                tool.name,
                texts.len(),
                complete_us,
                start * 1e3,
                check * 1e3,
                1.0 / check.max(1e-9),
            );
        }
        if service.name() == "github-actions" {
            shellcheck(&all, limits, &dir.0)?;
        }
    }
    Ok(())
}

/// actionlint's `shellcheck` rule is a second process over the texts' `run:` scripts (inside
/// actionlint's row above): its own share, one shellcheck over 1 script and over up to 200.
fn shellcheck(texts: &[&str], limits: Limits, dir: &Path) -> Result<()> {
    let exe = std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
        .map(|d| d.join("shellcheck"))
        .find(|p| p.is_file())
        .context("shellcheck is not on PATH")?;
    let scripts: Vec<_> =
        texts.iter().flat_map(|t| doc2ci_lint::shell::scripts(t)).filter(|s| s.shell == "bash").take(200).collect();
    let mut names = Vec::new();
    for (k, s) in scripts.iter().enumerate() {
        let name = format!("s{k}.sh");
        std::fs::write(dir.join(&name), &s.text)?;
        names.push(name);
    }
    let run = |n: usize| {
        let mut args = doc2ci_lint::shell::shellcheck_args("bash");
        args.extend(names[..n].iter().cloned());
        linters::run(&exe, &args, dir, None, limits.per_text * 4).map(|_| ())
    };
    let t1 = best(3, || run(1))?;
    let tn = best(2, || run(names.len()))?;
    let check = (tn - t1).as_secs_f64() / (names.len().max(2) - 1) as f64;
    println!(
        "| github-actions | (actionlint's shellcheck rule) | {} scripts of {} texts | | {:.1} | {:.2} per script | {:.1} scripts/s | |",
        names.len(),
        texts.len(),
        (t1.as_secs_f64() - check) * 1e3,
        check * 1e3,
        1.0 / check.max(1e-9),
    );
    Ok(())
}

/// The shortest of `n` runs: the least disturbed by the rest of the machine.
fn best(n: usize, mut f: impl FnMut() -> Result<()>) -> Result<Duration> {
    let mut min = Duration::MAX;
    for _ in 0..n {
        let s = Instant::now();
        f()?;
        min = min.min(s.elapsed());
    }
    Ok(min)
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}
