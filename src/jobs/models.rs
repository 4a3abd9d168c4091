//! models: the declared models' descriptions (`models`), which the statistics group by.

use anyhow::Result;
use doc2ci_rows::ModelRow;
use serde::Serialize;

use super::tables::MODELS;
use crate::config::Config;
use crate::engine::{Ctx, Graph, Job, Node, Output};
use crate::warehouse::Partition;

pub fn declare(cfg: &Config, g: &mut Graph) -> Result<()> {
    let rows = model_rows(cfg);
    g.add(Node::new("models", Partition::new(MODELS, &[]), Models(rows)));
    Ok(())
}

#[derive(Serialize)]
struct Models(Vec<ModelRow>);

impl Job for Models {
    fn run(&self, cx: &Ctx) -> Result<Output> {
        cx.publish(&self.0, None)
    }
}

fn model_rows(cfg: &Config) -> Vec<ModelRow> {
    cfg.models
        .iter()
        .map(|m| ModelRow {
            model: m.name.clone(),
            backend: m.backend().to_string(),
            family: m.family.clone(),
            size_b: m.size_b,
            code: m.code,
            proprietary: m.proprietary,
            base_model: m.base_model.clone(),
            knowledge_cutoff: m.knowledge_cutoff.clone(),
        })
        .collect()
}
