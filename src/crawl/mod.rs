//! Crawl sources. Two partitions per source: `crawl` fetches the site into `pages` (raw HTML
//! kept, so extraction never needs the network again), `extract` turns the cached pages into
//! `pairs_raw` with the profile's selectors. A change of removal or YAML selectors re-runs only
//! `extract`; a change of start URLs, prefixes or limits re-crawls.
//!
//! The crawl is breadth-first from the profile's start URLs, in one deterministic order (pages
//! are fetched concurrently but processed in queue order), and checkpointed after every page:
//! the frontier is rebuilt from the checkpointed pages' links, so a killed crawl resumes without
//! fetching a finished page again (only a page whose fetch was under way when it was killed).

pub mod browser;
pub mod fetch;
mod frontier;
pub mod server;
mod settings;

pub use settings::Settings;

use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

use anyhow::{anyhow, Context, Result};
use doc2ci_crawl::{normalize, Scope};
use doc2ci_rows::Page;
use serde::Serialize;
use url::Url;

use crate::config::{CrawlSource, Source};
use crate::engine::Ctx;

use browser::Browser;
use fetch::{Fetched, Http, Validators};
use frontier::{shown, Frontier};

/// A 304 answer: the previous crawl's page, as it was, with the validators the server sent now.
fn reused(f: Fetched, pg: &Page) -> Fetched {
    Fetched {
        status: Some(304),
        content_type: pg.content_type.clone(),
        encoding: pg.encoding.clone(),
        bytes: pg.bytes,
        html: pg.html.clone(),
        etag: f.etag.or_else(|| pg.etag.clone()),
        last_modified: f.last_modified.or_else(|| pg.last_modified.clone()),
        ..f
    }
}

/// The backend a source will really use: `auto` is webdriver when a browser is reachable.
pub fn resolve_backend(p: &Settings, spec: &CrawlSource) -> String {
    match spec.backend.as_deref().unwrap_or(&p.backend) {
        "auto" => {
            if p.webdriver.is_some()
                || (browser::which(&p.chromedriver).is_some()
                    && (p.chromium.is_some()
                        || browser::which("chromium").is_some()
                        || browser::which("chromium-browser").is_some()
                        || browser::which("google-chrome").is_some()))
            {
                "webdriver".into()
            } else {
                "http".into()
            }
        }
        b => b.into(),
    }
}

/// A page of the previous crawl, as far as dating needs it.
struct Prior {
    fetched_at: String,
    html: u64,
    changed_after: Option<String>,
}

/// Compared within one run only (previous HTML against new), so any stable-in-process hash does.
fn hash_of(html: &str) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    html.hash(&mut h);
    h.finish()
}

/// Child sitemaps of an index read, at most: a site's index names a handful.
const MAX_CHILD_SITEMAPS: usize = 16;

/// The site's sitemap entries (loc, lastmod day), following one level of a sitemap index to
/// children on the site's own origin. Absent, unreadable or oversized sitemaps give nothing.
async fn sitemap(client: &Http, url: &Url, resolve: &impl Fn(&str) -> Result<Url>) -> Vec<(String, Option<String>)> {
    let Some(xml) = client.text(url).await else { return Vec::new() };
    let (mut urls, children) = doc2ci_crawl::dates::sitemap_entries(&xml);
    for c in children.iter().take(MAX_CHILD_SITEMAPS) {
        let Ok(mut cu) = Url::parse(c).or_else(|_| resolve(c)) else { continue };
        if cu.origin() != url.origin() {
            // A mirror serves the site's child sitemaps under its own origin, as it does pages.
            let mut r = url.clone();
            r.set_path(cu.path());
            r.set_query(cu.query());
            cu = r;
        }
        if let Some(x) = client.text(&cu).await {
            urls.extend(doc2ci_crawl::dates::sitemap_entries(&x).0);
        }
    }
    urls
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

/// What a crawl reads of its source: the site and which of its URLs are in scope, never the
/// extraction selectors (changing those re-extracts the cached pages; it does not re-crawl).
#[derive(Debug, Clone, Serialize)]
pub struct Site {
    pub source: String,
    pub service: String,
    /// A folder doc2ci serves: its files' content is the crawl's input, not where it lies.
    #[serde(skip)]
    pub serve: Option<std::path::PathBuf>,
    pub url: Option<String>,
    /// Sent to the site by the `http` backend only; never stored or shown.
    #[serde(skip)]
    pub auth: Option<crate::config::Credentials>,
    pub reach: doc2ci_crawl::Reach,
}

impl Site {
    pub fn of(src: &Source) -> Option<Site> {
        let spec = src.crawl()?;
        Some(Site {
            source: src.name.clone(),
            service: src.service.clone(),
            serve: spec.serve.clone(),
            url: spec.url.clone(),
            auth: spec.auth.clone(),
            reach: spec.profile.reach(),
        })
    }
}

/// Fetches the site into page rows (the `pages` partition), resuming a checkpoint.
pub fn crawl(p: &Settings, site: &Site, backend: &str, cx: &Ctx) -> Result<(Vec<Page>, String)> {
    let handle = tokio::runtime::Handle::current();
    handle.block_on(crawl_async(p, site, backend.to_string(), cx))
}

/// The crawl of one source: where it starts, its robots.txt and scope, the previous crawl's pages,
/// the frontier, the browser, the rate policy, then fetch → row → checkpoint until the frontier
/// or `max_pages` ends; each part is its own function below.
async fn crawl_async(p: &Settings, site: &Site, backend: String, cx: &Ctx<'_>) -> Result<(Vec<Page>, String)> {
    let profile = &site.reach;
    let (wh, ui, label) = (cx.wh, cx.ui, cx.label());
    // The server of a served folder lives as long as this crawl.
    let (origin, server) = origin(site)?;
    let served = server.is_some();
    let resolve = |s: &str| origin.join(s).map_err(|e| anyhow!("source `{}`: bad URL `{s}`: {e}", site.source));
    let (robots_client, scope) = scope(p, site, &origin).await?;
    let http = Http::new(p, &scope, site.auth.as_ref())?;
    let cache = PageCache::of(wh.read::<Page>(&cx.node.part).unwrap_or_default(), served, p.max_age_hours);

    let mut pages = cx.batches::<Page>()?;
    let resumed = pages.rows().len();
    // The frontier: start URLs, then every checkpointed page's links, minus what is done.
    let frontier_cap = p.max_pages.saturating_mul(50).max(10_000);
    let mut frontier = Frontier::new(&scope, profile.keep_query, served, frontier_cap);
    for s in &profile.start_urls {
        let u = resolve(s)?;
        if let Err(why) = frontier.start(&u, true) {
            ui.info(&format!("{}: start URL {} skipped: {why}", label, normalize(&u, profile.keep_query)));
        }
    }
    // The sitemap dates pages (`lastmod`) whether or not it also starts the crawl.
    let mut lastmods: HashMap<String, String> = HashMap::new();
    let mut from_sitemap = 0usize;
    let sitemap_url = resolve("/sitemap.xml")?;
    for (loc, lastmod) in sitemap(&robots_client, &sitemap_url, &resolve).await {
        // A sitemap lists the site's own URLs; a mirror or local copy serves them under its origin.
        let Ok(mut u) = Url::parse(&loc).or_else(|_| resolve(&loc)) else { continue };
        if u.origin() != origin.origin() {
            let mut r = origin.clone();
            r.set_path(u.path());
            r.set_query(u.query());
            u = r;
        }
        let u = normalize(&u, profile.keep_query);
        if let Some(d) = lastmod {
            lastmods.insert(shown(&u, served), d);
        }
        if profile.sitemap && frontier.start(&u, false) == Ok(true) {
            from_sitemap += 1;
        }
    }
    if profile.sitemap {
        ui.info(&format!("{}: {from_sitemap} start URLs from {sitemap_url}", label));
    }
    frontier.resume(pages.rows(), resolve)?;
    if resumed > 0 {
        ui.info(&format!("{}: resuming after {resumed} pages, {} URLs queued", label, frontier.queue.len()));
    }

    let here = Here { p, site, backend: &backend, origin: &origin, cache: &cache, lastmods: &lastmods };
    let mut browser = None;
    if backend == "webdriver" {
        browser = Some(start_browser(p, cx, &origin).await?);
    }
    let concurrency = if browser.is_some() { 1 } else { p.concurrency };
    let mut rate = RateLimit { interval: interval(p, served, scope.robots.crawl_delay), next: Instant::now() };
    let mut tally = Tally::default();
    let mut inflight: VecDeque<(Url, u32, Job)> = VecDeque::new();
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
            let can_start = inflight.len() < concurrency
                && pages.rows().len() + inflight.len() < p.max_pages
                && !frontier.queue.is_empty();
            if !front_done && can_start {
                let wait = rate.until_next();
                if !wait.is_zero() && !inflight.is_empty() {
                    tokio::time::sleep(wait.min(Duration::from_millis(5))).await;
                    continue;
                }
                let (u, depth) = frontier.queue.pop_front().expect("checked non-empty");
                if frontier.skip(&u, depth, p.max_depth) {
                    continue;
                }
                let key = shown(&u, served);
                let job = match cache.fresh(&key, &resolve)? {
                    Some(f) => {
                        tally.from_cache += 1;
                        Job::Ready(f)
                    }
                    None => {
                        rate.wait().await;
                        fetch(&u, cache.previous.get(&key), &http, browser.as_mut(), &mut rate, served).await
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
            let landing = Landing { requested: shown(&u, served), depth, seq: pages.rows().len() as u64 };
            let page = here.row(&mut frontier, landing, f);
            tally.not_modified += page.not_modified as usize;
            tally.transferred += page.transferred;
            if let Some(e) = &page.error {
                ui.info(&format!("{}: {}: {e}", label, page.requested_url));
            }
            let n = pages.rows().len() as u64 + 1;
            pages.commit(vec![page], n, 0)?;
        }
        Ok(())
    }
    .await;
    if let Some(b) = browser.take() {
        b.close().await;
    }
    result?;
    let pages = pages.into_rows();
    let secs = t0.elapsed().as_secs_f64();
    let note = tally.note(&pages, &backend, secs, resumed, &frontier, p);
    Ok((pages, note))
}

/// Where the crawl starts: a folder doc2ci serves (its server, held as long as the crawl runs) or
/// the source's URL.
fn origin(site: &Site) -> Result<(Url, Option<server::Server>)> {
    match (&site.serve, &site.url) {
        (Some(dir), _) => {
            let s = server::Server::start(dir, "127.0.0.1:0", None)?;
            Ok((Url::parse(&s.origin())?, Some(s)))
        }
        (None, Some(u)) => Ok((Url::parse(u).with_context(|| format!("source `{}`: url", site.source))?, None)),
        _ => unreachable!("config checked: serve or url"),
    }
}

/// The site's robots.txt, read once with a client that may ask anything of the origin (which
/// also reads the sitemap), and the scope it and the profile give.
async fn scope(p: &Settings, site: &Site, origin: &Url) -> Result<(Http, Scope)> {
    let everything = Scope {
        origin: origin.clone(),
        prefixes: vec!["/".into()],
        exclude: vec![],
        robots: doc2ci_crawl::Robots::allow_all(),
    };
    let client = Http::new(p, &everything, site.auth.as_ref())?;
    let robots = client.robots(origin).await;
    let reach = &site.reach;
    let scope = Scope {
        origin: origin.clone(),
        prefixes: reach.allowed_prefixes.clone(),
        exclude: reach.exclude_paths.clone(),
        robots,
    };
    Ok((client, scope))
}

/// The previous crawl of this partition: pages of a remote site younger than `max_age_hours` are
/// reused as they are; the others with validators are asked again conditionally (a 304 transfers
/// nothing); and what it saw at each URL dates new examples (whether the HTML changed since).
struct PageCache {
    fresh: HashMap<String, Page>,
    previous: HashMap<String, Page>,
    prior: HashMap<String, Prior>,
}

impl PageCache {
    fn of(pages: Vec<Page>, served: bool, max_age_hours: f64) -> PageCache {
        let mut c = PageCache { fresh: HashMap::new(), previous: HashMap::new(), prior: HashMap::new() };
        let now = chrono::Utc::now();
        for pg in pages {
            if pg.error.is_some() {
                continue;
            }
            if let Some(h) = &pg.html {
                let seen = Prior {
                    fetched_at: pg.fetched_at.clone(),
                    html: hash_of(h),
                    changed_after: pg.changed_after.clone(),
                };
                c.prior.insert(pg.requested_url.clone(), seen);
            }
            let fresh = !served
                && max_age_hours > 0.0
                && chrono::NaiveDateTime::parse_from_str(&pg.fetched_at, "%Y-%m-%dT%H:%M:%SZ")
                    .map(|t| (now.naive_utc() - t).num_seconds() as f64 / 3600.0 < max_age_hours)
                    .unwrap_or(false);
            if fresh {
                c.fresh.insert(pg.requested_url.clone(), pg);
            } else if pg.html.is_some() && (pg.etag.is_some() || pg.last_modified.is_some()) {
                c.previous.insert(pg.requested_url.clone(), pg);
            }
        }
        c
    }

    /// The page at `key` as a fetch answer, when the previous crawl's copy is young enough.
    fn fresh(&self, key: &str, resolve: &impl Fn(&str) -> Result<Url>) -> Result<Option<Fetched>> {
        let Some(c) = self.fresh.get(key) else { return Ok(None) };
        Ok(Some(Fetched {
            final_url: resolve(&c.url)?,
            status: c.status,
            content_type: c.content_type.clone(),
            encoding: c.encoding.clone(),
            bytes: c.bytes,
            html: c.html.clone(),
            error: None,
            ms: 0,
            etag: c.etag.clone(),
            last_modified: c.last_modified.clone(),
            not_modified: false,
            transferred: 0,
        }))
    }

    /// Since when the page at `requested` is as it is now: the previous crawl's date when its HTML
    /// changed, what that crawl said when it did not, nothing for a new page.
    fn changed_after(&self, requested: &str, html: Option<&str>) -> Option<String> {
        match (self.prior.get(requested), html) {
            (Some(pr), Some(h)) if pr.html == hash_of(h) => pr.changed_after.clone(),
            (Some(pr), Some(_)) => Some(pr.fetched_at.clone()),
            _ => None,
        }
    }
}

/// Starts the browser for a webdriver crawl, first killing any a killed crawl left behind (this
/// run holds the warehouse's lock, so none is in use), and says how confined it is.
async fn start_browser(p: &Settings, cx: &Ctx<'_>, origin: &Url) -> Result<Browser> {
    let (wh, ui, label) = (cx.wh, cx.ui, cx.label());
    let reaped = browser::reap_orphans(&browser::scratch_root(wh));
    if reaped > 0 {
        ui.info(&format!("{}: killed {reaped} browser process(es) left by a killed crawl", label));
    }
    let scratch = browser::scratch_root(wh).join(crate::warehouse::unique());
    if let Err(why) = browser::browser_sandbox() {
        ui.info(&format!(
            "{label}: Chromium runs without its sandbox ({why}); pages see no credentials of this environment"
        ));
    }
    let b = Browser::start(p, scratch, origin).await?;
    match b.unconfined() {
        Some(why) => ui.info(&format!(
            "{label}: Chromium's network is this machine's ({why}): an in-scope page's scripts can reach what it reaches"
        )),
        None => ui.info(&format!(
            "{label}: Chromium reaches {} and nothing else (a network namespace)",
            origin.origin().ascii_serialization()
        )),
    }
    Ok(b)
}

/// The pause between two requests' starts: a remote site is asked at most `remote_rate_limit`
/// times a second, and no faster than its robots.txt Crawl-delay; a folder doc2ci serves itself
/// only by `rate_limit`. None: no pause.
fn interval(p: &Settings, served: bool, crawl_delay: Option<f64>) -> Option<Duration> {
    let per_sec = match (served, p.rate_limit > 0.0) {
        (true, _) => p.rate_limit,
        (false, true) => p.rate_limit.min(p.remote_rate_limit),
        (false, false) => p.remote_rate_limit,
    };
    let mut interval = (per_sec > 0.0).then(|| Duration::from_secs_f64(1.0 / per_sec));
    if let Some(d) = crawl_delay.filter(|d| *d > 0.0) {
        interval = Some(interval.unwrap_or_default().max(Duration::from_secs_f64(d)));
    }
    interval
}

/// Fetches `u` (its pace already waited for): conditionally through plain HTTP when the previous
/// crawl has it with validators, whichever the backend (an unchanged page keeps its HTML without a
/// browser load); else in the browser, or over HTTP on a task of its own.
async fn fetch(
    u: &Url,
    prev: Option<&Page>,
    http: &Http,
    browser: Option<&mut Browser>,
    rate: &mut RateLimit,
    served: bool,
) -> Job {
    match (browser, prev) {
        (b, Some(pg)) => {
            let v = Validators { etag: pg.etag.clone(), last_modified: pg.last_modified.clone() };
            let f = http.fetch(u, Some(&v)).await;
            match b {
                _ if f.not_modified => Job::Ready(reused(f, pg)),
                Some(b) => Job::Ready(b.fetch(u).await),
                None => Job::Ready(f),
            }
        }
        (Some(b), None) => {
            let mut f = b.fetch(u).await;
            if !served && f.html.is_some() {
                // One more request to the site: paced like the others.
                rate.wait().await;
                let v = http.validators(u).await;
                (f.etag, f.last_modified) = (v.etag, v.last_modified);
            }
            Job::Ready(f)
        }
        (None, None) => {
            let (h, u2) = (http.clone(), u.clone());
            Job::Task(tokio::spawn(async move { h.fetch(&u2, None).await }))
        }
    }
}

/// A fetched URL as the crawl asked for it.
struct Landing {
    requested: String,
    depth: u32,
    seq: u64,
}

/// What every row of one crawl shares: its settings and site, the fetcher, the origin, the previous
/// crawl's pages and the sitemap's dates.
#[derive(Clone, Copy)]
struct Here<'a> {
    p: &'a Settings,
    site: &'a Site,
    backend: &'a str,
    origin: &'a Url,
    cache: &'a PageCache,
    lastmods: &'a HashMap<String, String>,
}

impl Here<'_> {
    /// The `pages` row of a fetch: where the page really ended (outside the scope, nothing of it is
    /// kept), its links and canonical URL handed to the frontier, its dates.
    fn row(&self, frontier: &mut Frontier, at: Landing, mut f: Fetched) -> Page {
        let Here { p, site, backend, origin, cache, lastmods } = *self;
        let keep_query = site.reach.keep_query;
        // Where the page really ended (a browser follows redirects, meta refreshes and script
        // navigation itself): outside the scope, nothing of it is stored or extracted.
        let landed = normalize(&f.final_url, keep_query);
        let off_site = landed.origin() != origin.origin();
        if let Some(why) = frontier.out_of_scope_of(&landed) {
            f.error = Some(format!(
                "ended at {}, outside the crawl's scope ({why}): a redirect, meta refresh or script navigation left it",
                doc2ci_llm::redact_url(landed.as_str())
            ));
            f.html = None;
        }
        let mut links = Vec::new();
        if let Some(html) = &f.html {
            links.extend(doc2ci_crawl::links(html, &f.final_url).iter().filter_map(|l| frontier.link(l, at.depth)));
        }
        // A page that ended on another origin is recorded by its full URL, never as a local path.
        let final_shown = if off_site { doc2ci_llm::redact_url(landed.as_str()) } else { frontier.shown(&landed) };
        // The operator's name for this page: the page is a variant (or a redirect stub) of it.
        let canonical = match f.html.as_deref().filter(|_| p.canonical) {
            Some(h) => doc2ci_crawl::canonical(h, &f.final_url)
                .and_then(|c| frontier.canonical(&c, &final_shown, at.depth, &mut links)),
            None => None,
        };
        frontier.landed(&final_shown);
        let sitemap_lastmod = lastmods.get(&final_shown).or_else(|| lastmods.get(&at.requested)).cloned();
        let changed_after = cache.changed_after(&at.requested, f.html.as_deref());
        Page {
            service: site.service.clone(),
            source: site.source.clone(),
            seq: at.seq,
            requested_url: at.requested,
            url: final_shown,
            depth: at.depth,
            backend: backend.to_string(),
            status: f.status,
            content_type: f.content_type,
            encoding: f.encoding,
            bytes: f.bytes,
            html: f.html,
            links,
            error: f.error,
            fetched_at: crate::warehouse::now(),
            fetch_ms: f.ms,
            etag: f.etag,
            last_modified: f.last_modified,
            canonical,
            not_modified: f.not_modified,
            transferred: f.transferred,
            sitemap_lastmod,
            changed_after,
        }
    }
}

/// What the run note counts beyond the frontier's own.
#[derive(Default)]
struct Tally {
    from_cache: usize,
    not_modified: usize,
    transferred: u64,
}

impl Tally {
    /// The partition's run note: pages, failures, where they came from, and why the crawl stopped
    /// short of anything.
    fn note(&self, pages: &[Page], backend: &str, secs: f64, resumed: usize, f: &Frontier, p: &Settings) -> String {
        let failed = pages.iter().filter(|p| p.error.is_some()).count();
        let mut note = format!("{} pages ({} failed) via {backend} in {secs:.1}s", pages.len(), failed);
        if resumed > 0 {
            note.push_str(&format!(", {resumed} from the checkpoint"));
        }
        if self.from_cache > 0 {
            note.push_str(&format!(", {} from the page cache", self.from_cache));
        }
        if self.not_modified > 0 {
            note.push_str(&format!(", {} unchanged (304)", self.not_modified));
        }
        note.push_str(&format!(", {} bytes transferred", self.transferred));
        if !f.queue.is_empty() {
            note.push_str(&format!("; stopped at max_pages = {} with {} URLs not fetched", p.max_pages, f.queue.len()));
        }
        if f.beyond_cap > 0 {
            note.push_str(&format!("; {} links not queued: the frontier holds at most {} URLs", f.beyond_cap, f.cap));
        }
        if f.too_deep > 0 {
            note.push_str(&format!("; {} URLs beyond max_depth = {}", f.too_deep, p.max_depth));
        }
        let mut oos: Vec<String> = f.out_of_scope.iter().map(|(k, v)| format!("{v} {k}")).collect();
        oos.sort();
        if !oos.is_empty() {
            note.push_str(&format!("; links not followed: {}", oos.join(", ")));
        }
        note
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pace_is_the_slowest_of_the_limits_that_apply() {
        let mut p = Settings { rate_limit: 0.0, remote_rate_limit: 2.0, ..Settings::default() };
        assert_eq!(interval(&p, true, None), None, "a served folder: only rate_limit, here none");
        assert_eq!(interval(&p, false, None), Some(Duration::from_millis(500)));
        assert_eq!(interval(&p, false, Some(3.0)), Some(Duration::from_secs(3)), "robots.txt's Crawl-delay");
        p.rate_limit = 10.0;
        assert_eq!(interval(&p, true, Some(3.0)), Some(Duration::from_secs(3)));
        assert_eq!(interval(&p, false, None), Some(Duration::from_millis(500)), "a remote site: at most 2/s");
        p.rate_limit = 1.0;
        assert_eq!(interval(&p, false, Some(0.0)), Some(Duration::from_secs(1)));
    }

    #[test]
    fn the_page_cache_reuses_young_pages_asks_old_ones_conditionally_and_dates_changes() {
        let at = |hours_ago: i64| {
            (chrono::Utc::now() - chrono::Duration::hours(hours_ago)).format("%Y-%m-%dT%H:%M:%SZ").to_string()
        };
        let page = |url: &str, fetched_at: String, etag: Option<&str>, error: Option<&str>| Page {
            bytes: 4,
            html: Some(format!("<p>{url}</p>")),
            error: error.map(String::from),
            fetched_at,
            etag: etag.map(String::from),
            transferred: 4,
            changed_after: Some("2020-01-01T00:00:00Z".into()),
            ..doc2ci_testkit::page(url)
        };
        let pages = vec![
            page("https://x.example.com/young", at(1), None, None),
            page("https://x.example.com/old", at(48), Some("\"v1\""), None),
            page("https://x.example.com/old-no-etag", at(48), None, None),
            page("https://x.example.com/failed", at(1), None, Some("503")),
        ];
        let c = PageCache::of(pages.clone(), false, 24.0);
        let resolve = |s: &str| Url::parse(s).map_err(anyhow::Error::from);
        let young = c.fresh("https://x.example.com/young", &resolve).unwrap().unwrap();
        assert_eq!((young.transferred, young.html.as_deref()), (0, Some("<p>https://x.example.com/young</p>")));
        assert!(c.fresh("https://x.example.com/old", &resolve).unwrap().is_none());
        assert!(c.previous.contains_key("https://x.example.com/old"));
        assert!(!c.previous.contains_key("https://x.example.com/old-no-etag"), "nothing to ask conditionally");
        assert!(!c.prior.contains_key("https://x.example.com/failed"));
        let same = c.changed_after("https://x.example.com/old", Some("<p>https://x.example.com/old</p>"));
        assert_eq!(same.as_deref(), Some("2020-01-01T00:00:00Z"), "unchanged: the earlier date stands");
        assert_eq!(c.changed_after("https://x.example.com/old", Some("<p>new</p>")), Some(at(48)));
        assert_eq!(c.changed_after("https://x.example.com/new", Some("<p>new</p>")), None);
        // A folder doc2ci serves is never reused by age: it is read again every run.
        assert!(PageCache::of(pages, true, 24.0).fresh.is_empty());
    }
}
