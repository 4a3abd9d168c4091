//! Crawl sources. Two partitions per source: `crawl` fetches the site into `pages` (raw HTML
//! kept, so extraction never needs the network again), `extract` turns the cached pages into
//! `pairs_raw` with the profile's selectors. A change of removal or YAML selectors re-runs only
//! `extract`; a change of start URLs, prefixes or limits re-crawls.
//!
//! The crawl is breadth-first from the profile's start URLs, in one deterministic order (pages
//! are fetched concurrently but processed in queue order), and checkpointed after every page:
//! the frontier is rebuilt from the checkpointed pages' links, so a killed crawl resumes without
//! fetching a finished page again (only a page whose fetch was under way when it was killed).

pub mod fetch;
pub mod server;

use std::collections::{HashMap, HashSet, VecDeque};
use std::time::{Duration, Instant};

use anyhow::{anyhow, Context, Result};
use doc2ci_crawl::{in_scope, normalize, Scope};
use doc2ci_rows::{Page, RawPair};
use url::Url;

use crate::config::{Config, CrawlSource, Source};
use crate::engine::Node;
use crate::ui::Ui;
use crate::warehouse::{Partition, Warehouse};

use fetch::{Browser, Fetched, Http};

/// The backend a source will really use: `auto` is webdriver when a browser is reachable.
pub fn resolve_backend(cfg: &Config, spec: &CrawlSource) -> String {
    match spec.backend.as_str() {
        "auto" => {
            let p = &cfg.stages.crawl;
            if p.webdriver.is_some()
                || (fetch::which(&p.chromedriver).is_some()
                    && (p.chromium.is_some()
                        || fetch::which("chromium").is_some()
                        || fetch::which("chromium-browser").is_some()
                        || fetch::which("google-chrome").is_some()))
            {
                "webdriver".into()
            } else {
                "http".into()
            }
        }
        b => b.into(),
    }
}

/// Served folders have no stable origin (the port changes per run): their pages are recorded
/// by path, remote sites by full URL.
fn shown(u: &Url, served: bool) -> String {
    if served {
        match u.query() {
            Some(q) => format!("{}?{q}", u.path()),
            None => u.path().to_string(),
        }
    } else {
        u.to_string()
    }
}

struct RateLimit {
    interval: Option<Duration>,
    next: Instant,
}

impl RateLimit {
    fn until_next(&self) -> Duration {
        match self.interval {
            Some(_) => self.next.saturating_duration_since(Instant::now()),
            None => Duration::ZERO,
        }
    }

    async fn wait(&mut self) {
        let Some(iv) = self.interval else { return };
        let now = Instant::now();
        if self.next > now {
            tokio::time::sleep(self.next - now).await;
        }
        self.next = self.next.max(now) + iv;
    }
}

enum Job {
    Ready(Fetched),
    Task(tokio::task::JoinHandle<Fetched>),
}

/// Fetches the source's site into page rows (the `pages` partition), resuming a checkpoint.
pub fn crawl(
    cfg: &Config,
    src: &Source,
    wh: &Warehouse,
    node: &Node,
    key: &str,
    ui: &Ui,
) -> Result<(Vec<Page>, String)> {
    let handle = tokio::runtime::Handle::current();
    handle.block_on(crawl_async(cfg, src, wh, node, key, ui))
}

async fn crawl_async(
    cfg: &Config,
    src: &Source,
    wh: &Warehouse,
    node: &Node,
    key: &str,
    ui: &Ui,
) -> Result<(Vec<Page>, String)> {
    let spec = src.crawl.as_ref().ok_or_else(|| anyhow!("source `{}` is not a crawl source", src.name))?;
    let p = &cfg.stages.crawl;
    let profile = &spec.profile;
    let backend = resolve_backend(cfg, spec);
    let _server;
    let (origin, served) = match (&spec.serve, &spec.url) {
        (Some(dir), _) => {
            let s = server::Server::start(dir, "127.0.0.1:0", None)?;
            let o = Url::parse(&s.origin())?;
            _server = Some(s);
            (o, true)
        }
        (None, Some(u)) => {
            _server = None;
            (Url::parse(u).with_context(|| format!("source `{}`: url", src.name))?, false)
        }
        _ => unreachable!("config checked: serve or url"),
    };
    let resolve = |s: &str| origin.join(s).map_err(|e| anyhow!("source `{}`: bad URL `{s}`: {e}", src.name));

    let robots_client = Http::new(
        p,
        &Scope { origin: origin.clone(), prefixes: vec!["/".into()], robots: doc2ci_crawl::Robots::allow_all() },
    )?;
    let robots = robots_client.robots(&origin).await;
    let scope = Scope { origin: origin.clone(), prefixes: profile.allowed_prefixes.clone(), robots };
    let http = Http::new(p, &scope)?;

    // Pages of a previous crawl of a remote site, younger than max_age: not fetched again.
    let mut cache: HashMap<String, Page> = HashMap::new();
    if !served && p.max_age_hours > 0.0 {
        let now = chrono::Utc::now();
        for pg in wh.read::<Page>(&node.part).unwrap_or_default() {
            let fresh = chrono::NaiveDateTime::parse_from_str(&pg.fetched_at, "%Y-%m-%dT%H:%M:%SZ")
                .map(|t| (now.naive_utc() - t).num_seconds() as f64 / 3600.0 < p.max_age_hours)
                .unwrap_or(false);
            if fresh && pg.error.is_none() {
                cache.insert(pg.requested_url.clone(), pg);
            }
        }
    }

    let ckpt = wh.checkpoint(&node.part, key);
    let (mut pages, _, _, _) = ckpt.resume::<Page>()?;
    let resumed = pages.len();

    // The frontier: start URLs, then every checkpointed page's links, minus what is done.
    let mut seen: HashSet<String> = HashSet::new();
    let mut queue: VecDeque<(Url, u32)> = VecDeque::new();
    let mut out_of_scope: HashMap<&'static str, usize> = HashMap::new();
    for s in &profile.start_urls {
        let u = normalize(&resolve(s)?, profile.keep_query);
        if let Some(why) = in_scope(&u, &scope) {
            ui.info(&format!("{}: start URL {u} skipped: {why}", node.label()));
            *out_of_scope.entry(why).or_default() += 1;
            continue;
        }
        if seen.insert(shown(&u, served)) {
            queue.push_back((u, 0));
        }
    }
    let mut done: HashSet<String> = HashSet::new();
    for pg in &pages {
        done.insert(pg.requested_url.clone());
        done.insert(pg.url.clone());
        for l in &pg.links {
            if seen.insert(l.clone()) {
                queue.push_back((resolve(l)?, pg.depth + 1));
            }
        }
    }
    queue.retain(|(u, _)| !done.contains(&shown(u, served)));
    if resumed > 0 {
        ui.info(&format!("{}: resuming after {resumed} pages, {} URLs queued", node.label(), queue.len()));
    }

    let mut browser = None;
    if backend == "webdriver" {
        let scratch = wh.meta().join("browser").join(crate::warehouse::unique());
        browser = Some(Browser::start(p, scratch).await?);
    }
    let concurrency = if browser.is_some() { 1 } else { p.concurrency };
    let mut rate = RateLimit {
        interval: (p.rate_limit > 0.0).then(|| Duration::from_secs_f64(1.0 / p.rate_limit)),
        next: Instant::now(),
    };
    let mut inflight: VecDeque<(Url, u32, Job)> = VecDeque::new();
    let (mut too_deep, mut from_cache) = (0usize, 0usize);
    let t0 = Instant::now();
    let result: Result<()> = async {
        loop {
            // Finished fetches are processed (and checkpointed) first, in queue order, so a page
            // that was answered is never left uncommitted while the crawler waits for a slot.
            let front_done = match inflight.front() {
                Some((_, _, Job::Ready(_))) => true,
                Some((_, _, Job::Task(h))) => h.is_finished(),
                None => false,
            };
            let can_start =
                inflight.len() < concurrency && pages.len() + inflight.len() < p.max_pages && !queue.is_empty();
            if !front_done && can_start {
                let wait = rate.until_next();
                if !wait.is_zero() && !inflight.is_empty() {
                    tokio::time::sleep(wait.min(Duration::from_millis(5))).await;
                    continue;
                }
                let (u, depth) = queue.pop_front().expect("checked non-empty");
                if depth > p.max_depth {
                    too_deep += 1;
                    continue;
                }
                let key = shown(&u, served);
                if let Some(c) = cache.get(&key) {
                    from_cache += 1;
                    let f = Fetched {
                        final_url: resolve(&c.url)?,
                        status: c.status,
                        content_type: c.content_type.clone(),
                        encoding: c.encoding.clone(),
                        bytes: c.bytes,
                        html: c.html.clone(),
                        error: None,
                        ms: 0,
                    };
                    inflight.push_back((u, depth, Job::Ready(f)));
                    continue;
                }
                rate.wait().await;
                let job = match &mut browser {
                    Some(b) => Job::Ready(b.fetch(&u).await),
                    None => {
                        let (h, u2) = (http.clone(), u.clone());
                        Job::Task(tokio::spawn(async move { h.fetch(&u2).await }))
                    }
                };
                inflight.push_back((u, depth, job));
                continue;
            }
            let Some((u, depth, job)) = inflight.pop_front() else { break };
            let f = match job {
                Job::Ready(f) => f,
                Job::Task(h) => h.await.map_err(|e| anyhow!("fetch task of {u} failed: {e}"))?,
            };
            let mut links = Vec::new();
            if let Some(html) = &f.html {
                for l in doc2ci_crawl::links(html, &f.final_url) {
                    let l = normalize(&l, profile.keep_query);
                    if let Some(why) = in_scope(&l, &scope) {
                        *out_of_scope.entry(why).or_default() += 1;
                        continue;
                    }
                    let s = shown(&l, served);
                    if seen.insert(s.clone()) {
                        links.push(s);
                        queue.push_back((l, depth + 1));
                    }
                }
            }
            let final_shown = shown(&normalize(&f.final_url, profile.keep_query), served);
            // The browser may end elsewhere (meta refresh): never fetch that URL again either.
            seen.insert(final_shown.clone());
            queue.retain(|(q, _)| shown(q, served) != final_shown);
            let page = Page {
                service: src.service.clone(),
                source: src.name.clone(),
                seq: pages.len() as u64,
                requested_url: shown(&u, served),
                url: final_shown,
                depth,
                backend: backend.clone(),
                status: f.status,
                content_type: f.content_type,
                encoding: f.encoding,
                bytes: f.bytes,
                html: f.html,
                links,
                error: f.error,
                fetched_at: crate::warehouse::now(),
                fetch_ms: f.ms,
            };
            if let Some(e) = &page.error {
                ui.info(&format!("{}: {}: {e}", node.label(), page.requested_url));
            }
            ckpt.commit(pages.len() + 1, pages.len() as u64 + 1, 0, std::slice::from_ref(&page))?;
            pages.push(page);
        }
        Ok(())
    }
    .await;
    if let Some(b) = browser.take() {
        b.close().await;
    }
    result?;
    let secs = t0.elapsed().as_secs_f64();
    let failed = pages.iter().filter(|p| p.error.is_some()).count();
    let mut note = format!("{} pages ({} failed) via {backend} in {secs:.1}s", pages.len(), failed);
    if resumed > 0 {
        note.push_str(&format!(", {resumed} from the checkpoint"));
    }
    if from_cache > 0 {
        note.push_str(&format!(", {from_cache} from the page cache"));
    }
    if !queue.is_empty() {
        note.push_str(&format!("; stopped at max_pages = {} with {} URLs not fetched", p.max_pages, queue.len()));
    }
    if too_deep > 0 {
        note.push_str(&format!("; {too_deep} URLs beyond max_depth = {}", p.max_depth));
    }
    let mut oos: Vec<String> = out_of_scope.iter().map(|(k, v)| format!("{v} {k}")).collect();
    oos.sort();
    if !oos.is_empty() {
        note.push_str(&format!("; links not followed: {}", oos.join(", ")));
    }
    Ok((pages, note))
}

/// Cached pages → raw pairs, numbered in fetch order; a page reached twice (a redirect to a
/// page already fetched) is extracted once.
pub fn extract(src: &Source, wh: &Warehouse, pages_part: &Partition) -> Result<(Vec<RawPair>, String)> {
    let spec = src.crawl.as_ref().ok_or_else(|| anyhow!("source `{}` is not a crawl source", src.name))?;
    let compiled = spec.profile.compile().map_err(|e| anyhow!("profile `{}`: {e}", spec.profile_name))?;
    let mut pages: Vec<Page> = wh.read(pages_part)?;
    pages.sort_by_key(|p| p.seq);
    let mut out = Vec::new();
    let mut seen = HashSet::new();
    let (mut skipped, mut no_root, mut n_pages) = (HashMap::<String, usize>::new(), 0usize, 0usize);
    for pg in &pages {
        let Some(html) = &pg.html else { continue };
        if !seen.insert(pg.url.clone()) {
            continue;
        }
        n_pages += 1;
        let e = doc2ci_crawl::extract(html, &compiled);
        if e.error.is_some() {
            no_root += 1;
        }
        for s in e.skipped {
            *skipped.entry(s.reason).or_default() += 1;
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
        note.push_str(&format!("; {no_root} pages without the content root `{}`", spec.profile.content_root));
    }
    Ok((out, note))
}
