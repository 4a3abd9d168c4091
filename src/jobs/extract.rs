//! extract: cached pages → `pairs_raw` (description→YAML pairs) and `code_blocks` (every code
//! block met and what became of it: the crawl summary), with the profile's selectors. A change of
//! selectors re-runs only this, never the crawl. The partition's previous rows are its history:
//! an example they lack, met on a page that changed since, is dated after the previous crawl.

use anyhow::{anyhow, Result};
use doc2ci_crawl::dates::History;
use doc2ci_crawl::rows::{code_blocks, extracted, raw_pairs, Origin};
use doc2ci_rows::RawPair;
use serde::Serialize;

use super::tables::{CODE_BLOCKS, PAIRS_RAW};
use crate::config::Source;
use crate::engine::{Ctx, Graph, Job, Node, Output};
use crate::warehouse::Partition;

pub fn declare(s: &Source, pages: usize, g: &mut Graph) {
    let pages_part = g.part(pages).clone();
    for (table, blocks) in [(PAIRS_RAW, false), (CODE_BLOCKS, true)] {
        let job = Extract { source: s.clone(), pages: pages_part.clone(), blocks };
        g.add(Node::new("extract", Partition::new(table, &[&s.service, &s.name]), job).deps(vec![pages]));
    }
}

/// The source with its whole profile: what extraction keeps depends on every selector of it.
#[derive(Serialize)]
struct Extract {
    source: Source,
    #[serde(skip)]
    pages: Partition,
    /// `code_blocks` rather than `pairs_raw`.
    blocks: bool,
}

impl Job for Extract {
    fn run(&self, cx: &Ctx) -> Result<Output> {
        let src = &self.source;
        let spec = src.crawl().ok_or_else(|| anyhow!("source `{}` is not a crawl source", src.name))?;
        let compiled = spec.profile.compile().map_err(|e| anyhow!("profile `{}`: {e}", spec.profile_name))?;
        let pages = extracted(cx.read(&self.pages)?, &compiled);
        let from = Origin { service: &src.service, source: &src.name };
        if self.blocks {
            let rows = code_blocks(from, pages);
            let pairs = rows.iter().filter(|b| b.kind == "pair").count();
            cx.publish(&rows, Some(format!("{} code blocks, {pairs} pairs", rows.len())))
        } else {
            // The previous extraction is the crawl history: what it had is not new now.
            let previous: Vec<RawPair> = cx.wh.read(&cx.node.part).unwrap_or_default();
            let history = History::of(&previous);
            let (rows, note) = raw_pairs(from, spec.profile.content_root.as_str(), pages, &history);
            cx.publish(&rows, Some(note))
        }
    }
}
