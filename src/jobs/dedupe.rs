//! dedupe: every `pairs_raw` partition of a service → `pairs/service=…`, one copy of each pair,
//! each flagged when its description leaks its reference.

use std::collections::HashSet;

use anyhow::Result;
use doc2ci_rows::RawPair;
use serde::{Deserialize, Serialize};

use super::tables::{PAIRS, PAIRS_RAW};
use crate::config::{Config, Section};
use crate::engine::{Ctx, Graph, Job, Node, Output};
use crate::warehouse::Partition;

/// `[stages.dedupe]`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Settings {
    #[serde(default)]
    pub mode: doc2ci_dedupe::Mode,
    /// Ask models for pairs whose description contains their reference (flagged in `pairs.leak`).
    #[serde(default)]
    pub keep_leaks: bool,
}

impl Section for Settings {
    const NAME: &'static str = "dedupe";
}

pub fn declare(cfg: &Config, g: &mut Graph) -> Result<()> {
    let settings: Settings = cfg.section()?;
    for svc in &cfg.services {
        let deps: Vec<usize> =
            g.all(PAIRS_RAW.name).into_iter().filter(|&i| g.part(i).get("service") == Some(&svc.name)).collect();
        if deps.is_empty() {
            continue;
        }
        let job = Dedupe {
            service: svc.name.clone(),
            inputs: deps.iter().map(|&d| g.part(d).clone()).collect(),
            params: settings.clone(),
        };
        g.add(Node::new("dedupe", Partition::new(PAIRS, &[&svc.name]), job).deps(deps));
    }
    Ok(())
}

#[derive(Serialize)]
struct Dedupe {
    service: String,
    #[serde(skip)]
    inputs: Vec<Partition>,
    params: Settings,
}

impl Job for Dedupe {
    fn run(&self, cx: &Ctx) -> Result<Output> {
        let mut raw: Vec<RawPair> = Vec::new();
        for p in &self.inputs {
            raw.extend(cx.read::<RawPair>(p)?);
        }
        let pairs = doc2ci_dedupe::dedupe(&raw, self.params.mode);
        let distinct: HashSet<(String, String)> = pairs
            .iter()
            .map(|p| (doc2ci_rows::collapse_ws(&p.title), doc2ci_rows::collapse_ws(&p.description)))
            .collect();
        let leaks = pairs.iter().filter(|p| p.leak.is_some()).count();
        let note = format!(
            "{}: {} raw → {} kept, {} copies dropped, {} distinct title+description, {leaks} leaking their reference{}",
            self.service,
            raw.len(),
            pairs.len(),
            raw.len() - pairs.len(),
            distinct.len(),
            if leaks > 0 && !self.params.keep_leaks {
                " (not asked: [stages.dedupe] keep_leaks = true asks them)"
            } else {
                ""
            }
        );
        cx.publish(&pairs, Some(note))
    }
}
