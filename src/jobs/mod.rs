//! The study's jobs, one file per stage, in data-flow order. Each file declares its nodes (what
//! a partition reads, its parameters, its code version) and runs one partition; the engine
//! (`crate::engine`) only sees the [`Job`](crate::engine::Job) interface.
//!
//! A new stage is one file here plus one line in [`declare`].

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
#[cfg(test)]
mod tests;
mod validate;

use anyhow::{anyhow, Result};

use crate::config::{Config, SourceKind};
use doc2ci_validate::Service;

use crate::engine::{Graph, Pipeline};
use crate::tables::{GENERATIONS, PAIRS};

pub use generate::{export_finetune, export_requests, PROMPT_VERSION};

/// Every node of the study, each stage adding to what the earlier ones declared.
pub fn declare(cfg: &Config) -> Result<Graph> {
    let mut g = Graph { nodes: Vec::new(), tables: crate::tables::TABLES };
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
    let (validate, score, lint) = (cfg.stages.validate.enabled, cfg.stages.score.enabled, cfg.stages.lint.enabled);
    for d in g.all(PAIRS.name) {
        let name = g.part(d).get("service").unwrap_or_default().to_string();
        // A service outside the four has no schema and no metrics context: nothing to check.
        let Ok(service) = name.parse::<Service>() else { continue };
        if validate {
            validate::add_references(g, service, d)?;
        }
        if lint {
            lint::add_references(cfg, g, service, d);
        }
        let gens: Vec<usize> =
            g.all(GENERATIONS.name).into_iter().filter(|&i| g.part(i).get("service") == Some(&name)).collect();
        for gi in gens {
            if validate {
                validate::add(g, service, gi)?;
            }
            if lint {
                lint::add(cfg, g, service, gi);
            }
            if score {
                score::add(g, d, gi)?;
            }
        }
    }
    Ok(())
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
