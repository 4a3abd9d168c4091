//! extract: cached pages → `pairs_raw` (description→YAML pairs) and `code_blocks` (every code
//! block met and what became of it: the crawl summary), with the profile's selectors. A change of
//! selectors re-runs only this, never the crawl.

use std::collections::{HashMap, HashSet};

use anyhow::{anyhow, Result};
use doc2ci_rows::{CodeBlock, Page, RawPair};
use serde::Serialize;

use crate::config::Source;
use crate::engine::{Ctx, Graph, Job, Node, Output};
use crate::tables::{CODE_BLOCKS, PAIRS_RAW};
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
        let pages = extracted(&self.source, cx.read(&self.pages)?)?;
        if self.blocks {
            let rows = code_blocks(&self.source, pages);
            let pairs = rows.iter().filter(|b| b.kind == "pair").count();
            cx.publish(&rows, Some(format!("{} code blocks, {pairs} pairs", rows.len())))
        } else {
            let (rows, note) = raw_pairs(&self.source, pages);
            cx.publish(&rows, Some(note))
        }
    }
}

/// Each page with HTML, once per canonical URL (a page reached twice, by a redirect or under
/// another spelling, is read once: the canonical page itself where it was fetched, else the first
/// variant), in fetch order, with what extraction found on it.
fn extracted(src: &Source, mut pages: Vec<Page>) -> Result<Vec<(Page, doc2ci_crawl::Extraction)>> {
    let spec = src.crawl().ok_or_else(|| anyhow!("source `{}` is not a crawl source", src.name))?;
    let compiled = spec.profile.compile().map_err(|e| anyhow!("profile `{}`: {e}", spec.profile_name))?;
    pages.sort_by_key(|p| p.seq);
    let own: HashSet<String> =
        pages.iter().filter(|p| p.html.is_some() && p.canonical.is_none()).map(|p| p.url.clone()).collect();
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    for pg in pages {
        let Some(html) = &pg.html else { continue };
        let key = pg.canonical.clone().unwrap_or_else(|| pg.url.clone());
        if (pg.canonical.is_some() && own.contains(&key)) || !seen.insert(key) {
            continue;
        }
        let e = doc2ci_crawl::extract(html, &compiled);
        out.push((pg, e));
    }
    Ok(out)
}

fn code_blocks(src: &Source, pages: Vec<(Page, doc2ci_crawl::Extraction)>) -> Vec<CodeBlock> {
    let mut out = Vec::new();
    for (pg, e) in pages {
        let block = |title: String, kind: &str, detail: String, first_line: String| CodeBlock {
            service: src.service.clone(),
            source: src.name.clone(),
            url: pg.url.clone(),
            title,
            kind: kind.into(),
            detail,
            first_line,
        };
        for x in e.pairs {
            let first = x.reference.lines().next().unwrap_or_default().to_string();
            out.push(block(x.title, "pair", String::new(), first));
        }
        for s in e.skipped {
            out.push(block(s.title, &s.reason, s.detail, s.first_line));
        }
    }
    out
}

/// Raw pairs, numbered in fetch order.
fn raw_pairs(src: &Source, pages: Vec<(Page, doc2ci_crawl::Extraction)>) -> (Vec<RawPair>, String) {
    let mut out = Vec::new();
    let (mut skipped, mut no_root, mut n_pages) = (HashMap::<String, usize>::new(), 0usize, 0usize);
    for (pg, e) in pages {
        n_pages += 1;
        if e.error.is_some() {
            no_root += 1;
        }
        for s in e.skipped {
            // Per rule: a rule that swallows examples shows in the note.
            let why = match s.reason.as_str() {
                doc2ci_crawl::REMOVED_BY_RULE => format!("{} `{}`", s.reason, s.detail),
                _ => s.reason,
            };
            *skipped.entry(why).or_default() += 1;
        }
        for x in e.pairs {
            out.push(RawPair {
                pair_id: doc2ci_rows::pair_id(&src.service, &x.title, &x.description, &x.reference),
                service: src.service.clone(),
                url: pg.url.clone(),
                title: x.title,
                description: x.description,
                reference: x.reference,
                source: src.name.clone(),
                source_id: format!("{}#{}", pg.url, x.position),
                position: out.len() as u64,
            });
        }
    }
    let mut sk: Vec<String> = skipped.iter().map(|(k, v)| format!("{v} {k}")).collect();
    sk.sort();
    let mut note = format!(
        "{} pairs from {n_pages} pages; skipped code blocks: {}",
        out.len(),
        if sk.is_empty() { "none".into() } else { sk.join(", ") }
    );
    if no_root > 0 {
        let root = src.crawl().map_or("", |c| c.profile.content_root.as_str());
        note.push_str(&format!("; {no_root} pages without the content root `{root}`"));
    }
    (out, note)
}
