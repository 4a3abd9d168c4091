//! score: every metric of `stages/score`'s registry for each answer (not an errored request)
//! against its pair's reference (`scores`, one partition per generations partition, repair rounds included). The
//! embeddings come from the shared, content-addressed embedding cache. Declared by
//! [`super::quality`] and by repair, per generations partition (a [`super::Check`]).

use anyhow::Result;
use doc2ci_rows::{Generation, Pair};
use serde::{Deserialize, Serialize};

use super::tables::SCORES;
use crate::config::Section;
use crate::engine::{Ctx, Graph, Job, Node, Output};
use crate::resources;
use crate::warehouse::Partition;

/// `[stages.score]`: on or off.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Settings(pub super::Switch);

impl Section for Settings {
    const NAME: &'static str = "score";
}

pub const CHECK: super::Check = super::Check {
    settings: super::SectionType::of::<Settings>(),
    table: SCORES,
    on: |cfg| Ok(cfg.section::<Settings>()?.0.enabled),
    references: None,
    add: |_, g, at| add(g, at.pairs, at.generations),
    feedback: None,
    stats: true,
};

/// The scores partition of one generations partition (any round) against the pairs of `dedupe`.
pub fn add(g: &mut Graph, dedupe: usize, gen: usize) -> Result<usize> {
    let gp = g.part(gen).clone();
    let model = gp.get("model").unwrap_or_default().to_string();
    let part = gp.sibling(SCORES);
    let job = Score { pairs: g.part(dedupe).clone(), generations: gp };
    Ok(g.add(
        Node::new("score", part, job)
            .deps(vec![dedupe, gen])
            .pinned(vec![super::pin(resources::EMBED_MODEL)?, super::pin(resources::EMBED_TOKENIZER)?])
            .model(&model),
    ))
}

#[derive(Serialize)]
struct Score {
    #[serde(skip)]
    pairs: Partition,
    #[serde(skip)]
    generations: Partition,
}

impl Job for Score {
    fn run(&self, cx: &Ctx) -> Result<Output> {
        let pairs: Vec<Pair> = cx.read(&self.pairs)?;
        let gens: Vec<Generation> = super::answers(cx, &self.generations)?;
        let (rows, embedded) = doc2ci_score::score_all(&pairs, &gens, |texts| resources::embed(cx.wh, texts))?;
        // One column per registered metric: the row type alone cannot say which.
        let template = doc2ci_rows::Score::template(doc2ci_score::metric_infos());
        cx.publish_like(&rows, &template, Some(format!("{embedded} new texts embedded")))
    }
}
