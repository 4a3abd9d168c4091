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
pub mod netns;
pub mod server;
mod settings;

pub use settings::Settings;

use std::collections::{HashMap, HashSet, VecDeque};
use std::time::{Duration, Instant};

use anyhow::{anyhow, Context, Result};
use doc2ci_crawl::{in_scope, normalize, Scope};
use doc2ci_rows::Page;
use serde::Serialize;
use url::Url;

use crate::config::{CrawlSource, Source};
use crate::engine::Ctx;

use fetch::{Browser, Fetched, Http, Validators};

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

async fn crawl_async(p: &Settings, site: &Site, backend: String, cx: &Ctx<'_>) -> Result<(Vec<Page>, String)> {
    let profile = &site.reach;
    let (wh, ui, label) = (cx.wh, cx.ui, cx.label());
    let _server;
    let (origin, served) = match (&site.serve, &site.url) {
        (Some(dir), _) => {
            let s = server::Server::start(dir, "127.0.0.1:0", None)?;
            let o = Url::parse(&s.origin())?;
            _server = Some(s);
            (o, true)
        }
        (None, Some(u)) => {
            _server = None;
            (Url::parse(u).with_context(|| format!("source `{}`: url", site.source))?, false)
        }
        _ => unreachable!("config checked: serve or url"),
    };
    let resolve = |s: &str| origin.join(s).map_err(|e| anyhow!("source `{}`: bad URL `{s}`: {e}", site.source));

    let robots_client = Http::new(
        p,
        &Scope {
            origin: origin.clone(),
            prefixes: vec!["/".into()],
            exclude: vec![],
            robots: doc2ci_crawl::Robots::allow_all(),
        },
        site.auth.as_ref(),
    )?;
    let robots = robots_client.robots(&origin).await;
    let scope = Scope {
        origin: origin.clone(),
        prefixes: profile.allowed_prefixes.clone(),
        exclude: profile.exclude_paths.clone(),
        robots,
    };
    let http = Http::new(p, &scope, site.auth.as_ref())?;

    // The previous crawl of this partition: pages of a remote site younger than max_age are reused
    // as they are; the others with validators are asked again conditionally (a 304 transfers nothing).
    let mut cache: HashMap<String, Page> = HashMap::new();
    let mut previous: HashMap<String, Page> = HashMap::new();
    // What the previous crawl saw at each URL: whether the HTML changed since dates new examples.
    let mut prior: HashMap<String, Prior> = HashMap::new();
    let now = chrono::Utc::now();
    for pg in wh.read::<Page>(&cx.node.part).unwrap_or_default() {
        if pg.error.is_some() {
            continue;
        }
        if let Some(h) = &pg.html {
            let seen =
                Prior { fetched_at: pg.fetched_at.clone(), html: hash_of(h), changed_after: pg.changed_after.clone() };
            prior.insert(pg.requested_url.clone(), seen);
        }
        let fresh = !served
            && p.max_age_hours > 0.0
            && chrono::NaiveDateTime::parse_from_str(&pg.fetched_at, "%Y-%m-%dT%H:%M:%SZ")
                .map(|t| (now.naive_utc() - t).num_seconds() as f64 / 3600.0 < p.max_age_hours)
                .unwrap_or(false);
        if fresh {
            cache.insert(pg.requested_url.clone(), pg);
        } else if pg.html.is_some() && (pg.etag.is_some() || pg.last_modified.is_some()) {
            previous.insert(pg.requested_url.clone(), pg);
        }
    }

    let mut pages = cx.batches::<Page>()?;
    let resumed = pages.rows().len();

    // The frontier: start URLs, then every checkpointed page's links, minus what is done.
    let mut seen: HashSet<String> = HashSet::new();
    let mut queue: VecDeque<(Url, u32)> = VecDeque::new();
    let mut out_of_scope: HashMap<&'static str, usize> = HashMap::new();
    for s in &profile.start_urls {
        let u = normalize(&resolve(s)?, profile.keep_query);
        if let Some(why) = in_scope(&u, &scope) {
            ui.info(&format!("{}: start URL {u} skipped: {why}", label));
            *out_of_scope.entry(why).or_default() += 1;
            continue;
        }
        if seen.insert(shown(&u, served)) {
            queue.push_back((u, 0));
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
        if profile.sitemap && in_scope(&u, &scope).is_none() && seen.insert(shown(&u, served)) {
            queue.push_back((u, 0));
            from_sitemap += 1;
        }
    }
    if profile.sitemap {
        ui.info(&format!("{}: {from_sitemap} start URLs from {sitemap_url}", label));
    }
    let mut done: HashSet<String> = HashSet::new();
    for pg in pages.rows() {
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
        ui.info(&format!("{}: resuming after {resumed} pages, {} URLs queued", label, queue.len()));
    }

    let mut browser = None;
    if backend == "webdriver" {
        // A crawl killed earlier may have left its browser behind: this run holds the lock, so it is not in use.
        let reaped = fetch::reap_orphans(&wh.meta().join("browser"));
        if reaped > 0 {
            ui.info(&format!("{}: killed {reaped} browser process(es) left by a killed crawl", label));
        }
        let scratch = wh.meta().join("browser").join(crate::warehouse::unique());
        if let Err(why) = fetch::browser_sandbox() {
            ui.info(&format!(
                "{label}: Chromium runs without its sandbox ({why}); pages see no credentials of this environment"
            ));
        }
        let b = Browser::start(p, scratch, &origin).await?;
        match b.unconfined() {
            Some(why) => ui.info(&format!(
                "{label}: Chromium's network is this machine's ({why}): an in-scope page's scripts can reach what it reaches"
            )),
            None => ui.info(&format!("{label}: Chromium reaches {} and nothing else (a network namespace)", origin.origin().ascii_serialization())),
        }
        browser = Some(b);
    }
    let concurrency = if browser.is_some() { 1 } else { p.concurrency };
    // A remote site is asked at most `remote_rate_limit` times a second, and no faster than its
    // robots.txt Crawl-delay; a folder doc2ci serves itself only by `rate_limit`.
    let per_sec = match (served, p.rate_limit > 0.0) {
        (true, _) => p.rate_limit,
        (false, true) => p.rate_limit.min(p.remote_rate_limit),
        (false, false) => p.remote_rate_limit,
    };
    let mut interval = (per_sec > 0.0).then(|| Duration::from_secs_f64(1.0 / per_sec));
    if let Some(d) = scope.robots.crawl_delay.filter(|d| *d > 0.0) {
        interval = Some(interval.unwrap_or_default().max(Duration::from_secs_f64(d)));
    }
    let mut rate = RateLimit { interval, next: Instant::now() };
    let (mut not_modified, mut transferred) = (0usize, 0u64);
    let mut inflight: VecDeque<(Url, u32, Job)> = VecDeque::new();
    let (mut too_deep, mut from_cache) = (0usize, 0usize);
    // URLs pages ended at (redirects, meta refresh): fetched already, skipped when they come up.
    let mut landed_at: HashSet<String> = HashSet::new();
    let frontier_cap = p.max_pages.saturating_mul(50).max(10_000);
    let mut beyond_frontier = 0usize;
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
                inflight.len() < concurrency && pages.rows().len() + inflight.len() < p.max_pages && !queue.is_empty();
            if !front_done && can_start {
                let wait = rate.until_next();
                if !wait.is_zero() && !inflight.is_empty() {
                    tokio::time::sleep(wait.min(Duration::from_millis(5))).await;
                    continue;
                }
                let (u, depth) = queue.pop_front().expect("checked non-empty");
                if landed_at.contains(&shown(&u, served)) {
                    continue;
                }
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
                        etag: c.etag.clone(),
                        last_modified: c.last_modified.clone(),
                        not_modified: false,
                        transferred: 0,
                    };
                    inflight.push_back((u, depth, Job::Ready(f)));
                    continue;
                }
                rate.wait().await;
                let prev = previous.get(&key);
                let job = match (&mut browser, prev) {
                    // Asked conditionally through plain HTTP whichever the backend: unchanged pages
                    // keep the previous crawl's HTML without a browser load.
                    (b, Some(pg)) => {
                        let v = Validators { etag: pg.etag.clone(), last_modified: pg.last_modified.clone() };
                        let f = http.fetch(&u, Some(&v)).await;
                        match b {
                            _ if f.not_modified => Job::Ready(reused(f, pg)),
                            Some(b) => Job::Ready(b.fetch(&u).await),
                            None => Job::Ready(f),
                        }
                    }
                    (Some(b), None) => {
                        let mut f = b.fetch(&u).await;
                        if !served && f.html.is_some() {
                            // One more request to the site: paced like the others.
                            rate.wait().await;
                            let v = http.validators(&u).await;
                            (f.etag, f.last_modified) = (v.etag, v.last_modified);
                        }
                        Job::Ready(f)
                    }
                    (None, None) => {
                        let (h, u2) = (http.clone(), u.clone());
                        Job::Task(tokio::spawn(async move { h.fetch(&u2, None).await }))
                    }
                };
                inflight.push_back((u, depth, job));
                continue;
            }
            let Some((u, depth, job)) = inflight.pop_front() else { break };
            let mut f = match job {
                Job::Ready(f) => f,
                Job::Task(h) => h.await.map_err(|e| anyhow!("fetch task of {u} failed: {e}"))?,
            };
            // Where the page really ended (a browser follows redirects, meta refreshes and script
            // navigation itself): outside the scope, nothing of it is stored or extracted.
            let landed = normalize(&f.final_url, profile.keep_query);
            let off_site = landed.origin() != origin.origin();
            if let Some(why) = in_scope(&landed, &scope) {
                f.error = Some(format!(
                    "ended at {}, outside the crawl's scope ({why}): a redirect, meta refresh or script navigation left it",
                    doc2ci_llm::redact_url(landed.as_str())
                ));
                f.html = None;
            }
            let mut links = Vec::new();
            if let Some(html) = &f.html {
                for l in doc2ci_crawl::links(html, &f.final_url) {
                    let l = normalize(&l, profile.keep_query);
                    if let Some(why) = in_scope(&l, &scope) {
                        *out_of_scope.entry(why).or_default() += 1;
                        continue;
                    }
                    let s = shown(&l, served);
                    // A bounded frontier: a page of a million links (or a site that makes them up)
                    // cannot grow memory without end; what was left out is counted.
                    if seen.len() >= frontier_cap && !seen.contains(&s) {
                        beyond_frontier += 1;
                        continue;
                    }
                    if seen.insert(s.clone()) {
                        links.push(s);
                        queue.push_back((l, depth + 1));
                    }
                }
            }
            // A page that ended on another origin is recorded by its full URL, never as a local path.
            let final_shown =
                if off_site { doc2ci_llm::redact_url(landed.as_str()) } else { shown(&landed, served) };
            // The operator's name for this page: the page is a variant (or a redirect stub) of it.
            // Extraction reads one page per canonical URL, the canonical page itself where it was
            // fetched, so that page is still fetched: a stub of jekyll-redirect-from names its
            // target as canonical and holds none of its content.
            let mut canonical = None;
            if p.canonical {
                if let Some(c) = f.html.as_deref().and_then(|h| doc2ci_crawl::canonical(h, &f.final_url)) {
                    let c = normalize(&c, profile.keep_query);
                    let cs = shown(&c, served);
                    if in_scope(&c, &scope).is_none() && cs != final_shown {
                        if seen.insert(cs.clone()) {
                            // A link of this page, so a resumed crawl queues it again.
                            links.push(cs.clone());
                            queue.push_back((c, depth + 1));
                        }
                        canonical = Some(cs);
                    }
                }
            }
            not_modified += f.not_modified as usize;
            transferred += f.transferred;
            // The browser may end elsewhere (meta refresh): never fetch that URL again either.
            seen.insert(final_shown.clone());
            landed_at.insert(final_shown.clone());
            let requested = shown(&u, served);
            let sitemap_lastmod = lastmods.get(&final_shown).or_else(|| lastmods.get(&requested)).cloned();
            let changed_after = match (prior.get(&requested), &f.html) {
                (Some(pr), Some(h)) if pr.html == hash_of(h) => pr.changed_after.clone(),
                (Some(pr), Some(_)) => Some(pr.fetched_at.clone()),
                _ => None,
            };
            let page = Page {
                service: site.service.clone(),
                source: site.source.clone(),
                seq: pages.rows().len() as u64,
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
                etag: f.etag,
                last_modified: f.last_modified,
                canonical,
                not_modified: f.not_modified,
                transferred: f.transferred,
                sitemap_lastmod,
                changed_after,
            };
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
    let failed = pages.iter().filter(|p| p.error.is_some()).count();
    let mut note = format!("{} pages ({} failed) via {backend} in {secs:.1}s", pages.len(), failed);
    if resumed > 0 {
        note.push_str(&format!(", {resumed} from the checkpoint"));
    }
    if from_cache > 0 {
        note.push_str(&format!(", {from_cache} from the page cache"));
    }
    if not_modified > 0 {
        note.push_str(&format!(", {not_modified} unchanged (304)"));
    }
    note.push_str(&format!(", {transferred} bytes transferred"));
    if !queue.is_empty() {
        note.push_str(&format!("; stopped at max_pages = {} with {} URLs not fetched", p.max_pages, queue.len()));
    }
    if beyond_frontier > 0 {
        note.push_str(&format!("; {beyond_frontier} links not queued: the frontier holds at most {frontier_cap} URLs"));
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
