//! crawl: a documentation site → `pages` (raw HTML kept, so extraction never needs the network
//! again). The fetching itself (browser, HTTP, politeness, the loopback server) is in
//! `crate::crawl`; this file declares the partition and what re-crawls it.

use anyhow::Result;
use serde::Serialize;

use super::tables::PAGES;
use crate::config::Config;
use crate::engine::{Ctx, Graph, Job, Node, Output};
use crate::warehouse::Partition;

/// The crawl node of source `source`, then its extract nodes.
pub fn declare(cfg: &Config, source: usize, g: &mut Graph) -> Result<()> {
    let s = &cfg.sources[source];
    let spec = s.crawl().expect("a crawl source");
    let params: crate::crawl::Settings = cfg.section()?;
    // Remote sites are re-crawled once their pages are older than max_age.
    let epoch = match &spec.url {
        Some(_) => doc2ci_crawl::rows::recrawl_window(chrono::Utc::now().timestamp(), params.max_age_hours),
        None => 0,
    };
    let backend = crate::crawl::resolve_backend(&params, spec);
    let site = crate::crawl::Site::of(s).expect("a crawl source");
    let job = Crawl { site, params, backend, epoch };
    let pages = g.add(
        Node::new("crawl", Partition::new(PAGES, &[&s.service, &s.name]), job)
            .files(spec.serve.as_deref().map(crate::crawl::server::served_files).transpose()?.unwrap_or_default()),
    );
    super::extract::declare(s, pages, g);
    Ok(())
}

/// The site, the part of its profile the crawl reads, and every crawl setting.
#[derive(Serialize)]
struct Crawl {
    site: crate::crawl::Site,
    params: crate::crawl::Settings,
    backend: String,
    /// Which `max_age_hours` window this is: a remote site is fetched again in the next one.
    epoch: i64,
}

impl Job for Crawl {
    fn run(&self, cx: &Ctx) -> Result<Output> {
        let (pages, note) = crate::crawl::crawl(&self.params, &self.site, &self.backend, cx)?;
        cx.publish(&pages, Some(note))
    }
}
