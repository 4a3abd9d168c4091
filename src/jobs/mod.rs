//! The study's jobs, one file per stage, in data-flow order. Each file declares its nodes (what
//! a partition reads, its parameters, its code version) and runs one partition; the engine
//! (`crate::engine`) only sees the [`Job`](crate::engine::Job) interface.
//!
//! A new stage is one file here plus one line in [`declare`] and, when it takes settings, one
//! line in [`SECTIONS`]: its `[stages.NAME]` type is declared in its file (or in the module it
//! calls, when that module reads the settings too: `crawl`, `generation`).

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
use tables::{GENERATIONS, PAIRS};

pub use dedupe::Settings as DedupeSettings;
pub use generate::{error_verdict, export_finetune, export_requests, request_errors, PROMPT_VERSION};
pub use report::Settings as ReportSettings;

/// Every `[stages.NAME]` section, by the type that reads it.
pub const SECTIONS: &[SectionType] = &[
    SectionType::of::<import::Settings>(),
    SectionType::of::<dedupe::Settings>(),
    SectionType::of::<validate::Settings>(),
    SectionType::of::<score::Settings>(),
    SectionType::of::<lint::Settings>(),
    SectionType::of::<crate::crawl::Settings>(),
    SectionType::of::<crate::generation::Settings>(),
    SectionType::of::<repair::Settings>(),
    SectionType::of::<contamination::Settings>(),
    SectionType::of::<stats::Settings>(),
    SectionType::of::<report::Settings>(),
];

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
        if !SECTIONS.iter().any(|s| s.name == name) {
            let known: Vec<_> = SECTIONS.iter().map(|s| s.name).collect();
            bail!("{}:{line}: `stages.{name}`: unknown stage (one of {})", cfg.file.display(), known.join(", "));
        }
    }
    for s in SECTIONS {
        (s.read)(cfg)?;
    }
    // validate, score and lint know the registry's services; any other name would silently get no
    // rows (a typo hiding a whole service's results), so it is an error while either stage is on.
    let on = Quality::of(cfg)?;
    if on.validate.0.enabled || on.score.0.enabled || on.lint.enabled {
        if let Some(svc) = cfg.services.iter().find(|s| s.name.parse::<Service>().is_err()) {
            let known: Vec<&str> = Service::all().map(Service::name).collect();
            bail!(
                "{}:{}: `services.name`: unknown service `{}`: validate, score and lint know {} (another \
                 name needs [stages.validate], [stages.score] and [stages.lint] enabled = false)",
                cfg.file.display(),
                svc.line,
                svc.name,
                known.join(", ")
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

/// The settings of the three stages that check every generations partition.
struct Quality {
    validate: validate::Settings,
    score: score::Settings,
    lint: lint::Settings,
}

impl Quality {
    fn of(cfg: &Config) -> Result<Quality> {
        Ok(Quality { validate: cfg.section()?, score: cfg.section()?, lint: cfg.section()? })
    }
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

/// validate, lint and score: each service's references, then per generations partition its
/// validations, lints and scores (the order stats reads them in).
fn quality(cfg: &Config, g: &mut Graph) -> Result<()> {
    let on = Quality::of(cfg)?;
    let (validate, score, lint) = (on.validate.0.enabled, on.score.0.enabled, on.lint.enabled);
    for d in g.all(PAIRS.name) {
        let name = g.part(d).get("service").unwrap_or_default().to_string();
        // A service outside the four has no schema and no metrics context: nothing to check.
        let Ok(service) = name.parse::<Service>() else { continue };
        if validate {
            validate::add_references(g, service, d)?;
        }
        if lint {
            lint::add_references(&on.lint, g, service, d);
        }
        let gens: Vec<usize> =
            g.all(GENERATIONS.name).into_iter().filter(|&i| g.part(i).get("service") == Some(&name)).collect();
        for gi in gens {
            if validate {
                validate::add(g, service, gi)?;
            }
            if lint {
                lint::add(&on.lint, g, service, gi);
            }
            if score {
                score::add(g, d, gi)?;
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
