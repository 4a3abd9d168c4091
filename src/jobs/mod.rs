//! The study's jobs, one file per stage, in data-flow order. Each file declares its nodes (what
//! a partition reads, its parameters, its code version) and runs one partition; the engine
//! (`crate::engine`) only sees the [`Job`](crate::engine::Job) interface.
//!
//! A new stage is one file here plus one line in [`declare`] and, when it takes settings, one
//! line in [`SECTIONS`]: its `[stages.NAME]` type is declared in its file (or in the module it
//! calls, when that module reads the settings too: `crawl`, `generation`). A new per-output check
//! is one file here and one line in [`CHECKS`], which carries its settings too.

mod contamination;
mod crawl;
mod dedupe;
mod extract;
mod generate;
mod import;
mod lint;
mod models;
mod repair;
mod report;
mod score;
mod stats;
pub mod tables;
#[cfg(test)]
mod tests;
mod validate;

use std::path::Path;

use anyhow::{anyhow, bail, Result};
use serde::{Deserialize, Serialize};

use crate::config::{Config, Section, SourceKind};
use doc2ci_validate::Service;

use crate::engine::{Graph, Pipeline};
use crate::warehouse::TableDef;
use tables::{GENERATIONS, PAIRS};

pub use dedupe::Settings as DedupeSettings;
pub use generate::{error_verdict, export_finetune, export_requests, request_errors, PROMPT_VERSION};
pub use report::Settings as ReportSettings;

/// The `[stages.NAME]` sections of the stages that are not per-output checks, by the type that
/// reads it; [`sections`] adds the checks'.
const SECTIONS: &[SectionType] = &[
    SectionType::of::<import::Settings>(),
    SectionType::of::<dedupe::Settings>(),
    SectionType::of::<crate::crawl::Settings>(),
    SectionType::of::<crate::generation::Settings>(),
    SectionType::of::<repair::Settings>(),
    SectionType::of::<contamination::Settings>(),
    SectionType::of::<stats::Settings>(),
    SectionType::of::<report::Settings>(),
];

/// Every `[stages.NAME]` section: the stages', then each check's.
pub fn sections() -> impl Iterator<Item = &'static SectionType> {
    SECTIONS.iter().chain(CHECKS.iter().map(|c| &c.settings))
}

/// The per-output checks, in the order their nodes are declared (and stats reads them): each
/// reads every answer of every generations partition, repair rounds included, and writes one
/// partition beside it. [`quality`], repair's rounds and stats' inputs iterate this list, so a
/// new check is its crate, its job file (its settings and its [`Check`]) and one line here.
const CHECKS: &[Check] = &[validate::CHECK, lint::CHECK, score::CHECK];

/// What the study needs to know of a per-output check.
pub struct Check {
    /// Its `[stages.NAME]` section (its name is the check's).
    settings: SectionType,
    /// The table it writes, one partition per generations partition.
    table: TableDef,
    /// Whether the study runs it.
    on: fn(&Config) -> Result<bool>,
    /// Declares the check of each reference of one service's pairs partition, when it checks them.
    references: Option<fn(&Config, &mut Graph, Service, usize) -> Result<()>>,
    /// Declares the check of one generations partition (any round); returns its node.
    add: fn(&Config, &mut Graph, Answers) -> Result<usize>,
    /// The name a repair round's `feedback` gives its findings, when a round can quote them.
    feedback: Option<&'static str>,
    /// Whether stats (and the report) read its rows.
    stats: bool,
}

/// The generations partition a check is declared for.
#[derive(Clone, Copy)]
pub struct Answers {
    service: Service,
    /// The service's pairs partition (the references).
    pairs: usize,
    generations: usize,
}

/// The checks the study runs, in [`CHECKS`]' order.
fn checks_on(cfg: &Config) -> Result<Vec<&'static Check>> {
    let mut on = Vec::new();
    for c in CHECKS {
        if (c.on)(cfg)? {
            on.push(c);
        }
    }
    Ok(on)
}

/// One section's type, erased: read (and checked) as written, or its defaults.
pub struct SectionType {
    pub name: &'static str,
    pub read: fn(&Config) -> Result<serde_json::Value>,
    pub defaults: fn() -> serde_json::Value,
}

impl SectionType {
    const fn of<T: Section>() -> SectionType {
        fn read<T: Section>(cfg: &Config) -> Result<serde_json::Value> {
            Ok(serde_json::to_value(cfg.section::<T>()?)?)
        }
        fn defaults<T: Section>() -> serde_json::Value {
            serde_json::to_value(T::default()).expect("settings serialise")
        }
        SectionType { name: T::NAME, read: read::<T>, defaults: defaults::<T> }
    }
}

/// The study's config with every stage's section read and checked: a typo in any of them fails
/// every command before it runs, not the stage that reads it.
pub fn load(file: &Path) -> Result<Config> {
    let cfg = Config::load(file)?;
    check(&cfg)?;
    Ok(cfg)
}

/// [`load`]'s checks, for a config parsed from text.
pub fn check(cfg: &Config) -> Result<()> {
    for (name, line) in &cfg.stages.written {
        if !sections().any(|s| s.name == name) {
            let known: Vec<_> = sections().map(|s| s.name).collect();
            bail!("{}:{line}: `stages.{name}`: unknown stage (one of {})", cfg.file.display(), known.join(", "));
        }
    }
    for s in sections() {
        (s.read)(cfg)?;
    }
    // The checks know the registry's services; any other name would silently get no rows (a typo
    // hiding a whole service's results), so it is an error while any check is on.
    let on = checks_on(cfg)?;
    if !on.is_empty() {
        if let Some(svc) = cfg.services.iter().find(|s| s.name.parse::<Service>().is_err()) {
            let known: Vec<&str> = Service::all().map(Service::name).collect();
            let names: Vec<&str> = on.iter().map(|c| c.settings.name).collect();
            let off: Vec<String> = on.iter().map(|c| format!("[stages.{}]", c.settings.name)).collect();
            bail!(
                "{}:{}: `services.name`: unknown service `{}`: {} know {} (another name needs {} \
                 enabled = false)",
                cfg.file.display(),
                svc.line,
                svc.name,
                names.join(", "),
                known.join(", "),
                off.join(", ")
            );
        }
    }
    Ok(())
}

/// `enabled` alone: what validate and score take (a study of pairs alone, or without assets,
/// turns them off).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Switch {
    #[serde(default = "yes")]
    pub enabled: bool,
}

impl Default for Switch {
    fn default() -> Self {
        Self { enabled: true }
    }
}

fn yes() -> bool {
    true
}

/// Every node of the study, each stage adding to what the earlier ones declared.
pub fn declare(cfg: &Config) -> Result<Graph> {
    let mut g = Graph { nodes: Vec::new(), tables: tables::TABLES };
    // Sources in their declared order: dedupe keeps the first copy of a pair.
    for (i, s) in cfg.sources.iter().enumerate() {
        match &s.kind {
            SourceKind::Crawl(_) => crawl::declare(cfg, i, &mut g)?,
            SourceKind::Import(_) => import::declare_pairs(cfg, i, &mut g)?,
        }
    }
    for add in [
        dedupe::declare,
        models::declare,
        import::declare_outputs,
        generate::declare,
        quality,
        repair::declare,
        contamination::declare,
        stats::declare,
        report::declare,
    ] {
        add(cfg, &mut g)?;
    }
    Ok(g)
}

/// The checks: each service's references, then per generations partition each check in
/// [`CHECKS`]' order (the order stats reads them in).
fn quality(cfg: &Config, g: &mut Graph) -> Result<()> {
    let on = checks_on(cfg)?;
    for d in g.all(PAIRS.name) {
        let name = g.part(d).get("service").unwrap_or_default().to_string();
        // A service outside the registry has no schema and no metrics context: nothing to check.
        let Ok(service) = name.parse::<Service>() else { continue };
        for c in &on {
            if let Some(references) = c.references {
                references(cfg, g, service, d)?;
            }
        }
        let gens: Vec<usize> =
            g.all(GENERATIONS.name).into_iter().filter(|&i| g.part(i).get("service") == Some(&name)).collect();
        for generations in gens {
            for c in &on {
                (c.add)(cfg, g, Answers { service, pairs: d, generations })?;
            }
        }
    }
    Ok(())
}

/// The answers of a generations partition, for the stages that check them: an errored request
/// is nobody's output (issue 44), so it gets no validation, lint or score row and is in no n.
fn answers(cx: &crate::engine::Ctx, p: &crate::warehouse::Partition) -> Result<Vec<doc2ci_rows::Generation>> {
    Ok(cx.read::<doc2ci_rows::Generation>(p)?.into_iter().filter(|g| g.error.is_none()).collect())
}

/// The study as the engine runs it.
pub fn pipeline(cfg: &Config) -> Result<Pipeline> {
    Pipeline::new(declare(cfg)?, &cfg.warehouse, cfg.threads, &cfg.file)
}

/// A service in a job's parameters: by its name.
fn service_name<S: serde::Serializer>(s: &Service, ser: S) -> Result<S::Ok, S::Error> {
    ser.serialize_str(s.name())
}

/// An asset that stands in a cache key by its pinned hash (checked by `doc2ci setup`).
fn pin(rel: &str) -> Result<(String, String)> {
    let h =
        crate::assets::pinned_sha256(rel).ok_or_else(|| anyhow!("internal: {rel} is not in the asset manifests"))?;
    Ok((rel.to_string(), h))
}
