//! The two ways of fetching a page: plain HTTP (reqwest) and a real browser (Chromium through
//! chromedriver, driven by fantoccini), behind one `fetch`.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use doc2ci_crawl::{in_scope, Scope};
use serde_json::{json, Value};
use url::Url;

use crate::config::CrawlParams;

/// What one fetch produced (success or failure: a failure is recorded, not fatal).
#[derive(Debug, Clone)]
pub struct Fetched {
    pub final_url: Url,
    pub status: Option<u32>,
    pub content_type: Option<String>,
    pub encoding: Option<String>,
    pub bytes: u64,
    pub html: Option<String>,
    pub error: Option<String>,
    pub ms: u64,
}

impl Fetched {
    fn failed(url: &Url, error: String, t0: Instant) -> Fetched {
        Fetched {
            final_url: url.clone(),
            status: None,
            content_type: None,
            encoding: None,
            bytes: 0,
            html: None,
            error: Some(error),
            ms: t0.elapsed().as_millis() as u64,
        }
    }
}

fn secs(p: &CrawlParams) -> Duration {
    Duration::from_secs_f64(p.timeout_secs)
}

/// HTTP client with bounded redirects that never leave the crawl's scope.
#[derive(Clone)]
pub struct Http {
    client: reqwest::Client,
    params: CrawlParams,
}

impl Http {
    pub fn new(params: &CrawlParams, scope: &Scope) -> Result<Http> {
        let max = params.max_redirects;
        let scope2 = scope.clone();
        let policy = reqwest::redirect::Policy::custom(move |attempt| {
            if attempt.previous().len() > max {
                let e = format!("more than max_redirects = {max} redirects from {}", attempt.previous()[0]);
                return attempt.error(e);
            }
            if let Some(why) = in_scope(attempt.url(), &scope2) {
                let e = format!("redirect to {} not followed: {why}", attempt.url());
                return attempt.error(e);
            }
            attempt.follow()
        });
        let client = reqwest::Client::builder()
            .user_agent(params.user_agent.clone())
            .timeout(secs(params))
            .connect_timeout(secs(params))
            .redirect(policy)
            .build()?;
        Ok(Http { client, params: params.clone() })
    }

    /// robots.txt of the origin; absent or unreadable means everything is allowed.
    pub async fn robots(&self, origin: &Url) -> doc2ci_crawl::Robots {
        let Ok(u) = origin.join("/robots.txt") else { return doc2ci_crawl::Robots::allow_all() };
        match self.client.get(u).send().await {
            Ok(r) if r.status().is_success() => match r.text().await {
                Ok(t) => doc2ci_crawl::Robots::parse(&t),
                Err(_) => doc2ci_crawl::Robots::allow_all(),
            },
            _ => doc2ci_crawl::Robots::allow_all(),
        }
    }

    pub async fn fetch(&self, url: &Url) -> Fetched {
        let t0 = Instant::now();
        let mut last = None;
        for attempt in 0..=self.params.retries {
            if attempt > 0 {
                tokio::time::sleep(Duration::from_millis(200 << attempt.min(5))).await;
            }
            match self.once(url, t0).await {
                Ok(f) => return f,
                Err((e, retry)) => {
                    last = Some(e);
                    if !retry {
                        break;
                    }
                }
            }
        }
        let attempts = self.params.retries + 1;
        let e = last.unwrap_or_default();
        Fetched::failed(
            url,
            if e.contains("attempt") { e } else { format!("{e} (gave up after {attempts} attempt(s))") },
            t0,
        )
    }

    /// One attempt; the error says whether another attempt may help.
    async fn once(&self, url: &Url, t0: Instant) -> std::result::Result<Fetched, (String, bool)> {
        let resp =
            self.client.get(url.clone()).send().await.map_err(|e| describe(url, &e, self.params.timeout_secs))?;
        let status = resp.status();
        let final_url = resp.url().clone();
        let ctype = resp.headers().get(reqwest::header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).map(str::to_string);
        if status.is_server_error() {
            return Err((format!("{url}: HTTP {status}"), true));
        }
        let mut f = Fetched {
            final_url,
            status: Some(status.as_u16() as u32),
            content_type: ctype.clone(),
            encoding: None,
            bytes: 0,
            html: None,
            error: None,
            ms: 0,
        };
        if !status.is_success() {
            f.error = Some(format!("HTTP {status}"));
            f.ms = t0.elapsed().as_millis() as u64;
            return Ok(f);
        }
        let max = self.params.max_page_bytes;
        if let Some(len) = resp.content_length().filter(|l| *l > max) {
            f.bytes = len;
            f.error = Some(format!("page too large: Content-Length {len} bytes exceeds max_page_bytes = {max}"));
            f.ms = t0.elapsed().as_millis() as u64;
            return Ok(f);
        }
        let mut resp = resp;
        let mut body: Vec<u8> = Vec::new();
        loop {
            match resp.chunk().await {
                Ok(Some(c)) => {
                    body.extend_from_slice(&c);
                    if body.len() as u64 > max {
                        f.bytes = body.len() as u64;
                        f.error = Some(format!(
                            "page too large: more than max_page_bytes = {max} bytes (stopped reading at {})",
                            body.len()
                        ));
                        f.ms = t0.elapsed().as_millis() as u64;
                        return Ok(f);
                    }
                }
                Ok(None) => break,
                Err(e) => return Err(describe(url, &e, self.params.timeout_secs)),
            }
        }
        let (html, enc) = doc2ci_crawl::decode_page(&body, ctype.as_deref());
        f.bytes = body.len() as u64;
        f.html = Some(html);
        f.encoding = Some(enc.to_string());
        f.ms = t0.elapsed().as_millis() as u64;
        Ok(f)
    }
}

fn describe(url: &Url, e: &reqwest::Error, timeout: f64) -> (String, bool) {
    if e.is_redirect() {
        // The policy's own message (limit, or a target out of scope) is in the source chain.
        let mut msg = e.to_string();
        let mut src = std::error::Error::source(e);
        while let Some(s) = src {
            msg = s.to_string();
            src = s.source();
        }
        return (format!("{url}: {msg}"), false);
    }
    if e.is_timeout() {
        return (format!("{url}: timed out after {timeout}s"), true);
    }
    let mut msg = e.to_string();
    if let Some(s) = std::error::Error::source(e) {
        msg = format!("{msg}: {s}");
    }
    (format!("{url}: {msg}"), e.is_connect() || e.is_request() || e.is_body())
}

/// Headless Chromium through WebDriver: one tab, pages read from the live DOM.
pub struct Browser {
    client: Option<fantoccini::Client>,
    driver: Option<tokio::process::Child>,
    webdriver_url: String,
    profile_dir: PathBuf,
    params: CrawlParams,
}

/// Is a program on PATH (or at this path)?
pub fn which(program: &str) -> Option<PathBuf> {
    if program.contains('/') {
        let p = PathBuf::from(program);
        return p.is_file().then_some(p);
    }
    std::env::var_os("PATH")
        .and_then(|paths| std::env::split_paths(&paths).map(|d| d.join(program)).find(|p| p.is_file()))
}

fn free_port() -> Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

const CHROMIUM_FLAGS: &[&str] = &[
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-dev-shm-usage",
];

impl Browser {
    /// Starts chromedriver on a free loopback port (or uses `params.webdriver`) and opens a
    /// session with a fresh Chromium profile under `scratch`.
    pub async fn start(params: &CrawlParams, scratch: PathBuf) -> Result<Browser> {
        let (driver, webdriver_url) = match &params.webdriver {
            Some(u) => (None, u.clone()),
            None => {
                let exe = which(&params.chromedriver).ok_or_else(|| anyhow!("webdriver backend: `{}` not found (install the chromium and chromium-driver packages, or set stages.crawl.chromedriver / webdriver)", params.chromedriver))?;
                let port = free_port()?;
                let child = tokio::process::Command::new(&exe)
                    .arg(format!("--port={port}"))
                    .arg("--allowed-ips=127.0.0.1")
                    .stdin(Stdio::null())
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .kill_on_drop(true)
                    .spawn()
                    .with_context(|| format!("cannot start {}", exe.display()))?;
                (Some(child), format!("http://127.0.0.1:{port}"))
            }
        };
        let mut b = Browser { client: None, driver, webdriver_url, profile_dir: scratch, params: params.clone() };
        b.session().await?;
        Ok(b)
    }

    async fn session(&mut self) -> Result<()> {
        if let Some(c) = self.client.take() {
            let _ = tokio::time::timeout(Duration::from_secs(5), c.close()).await;
        }
        let _ = std::fs::remove_dir_all(&self.profile_dir);
        std::fs::create_dir_all(&self.profile_dir)?;
        let mut args: Vec<String> = CHROMIUM_FLAGS.iter().map(|s| s.to_string()).collect();
        args.push(format!("--user-data-dir={}", self.profile_dir.display()));
        args.push(format!("--user-agent={}", self.params.user_agent));
        let mut opts = json!({ "args": args });
        if let Some(bin) = &self.params.chromium {
            opts["binary"] = json!(bin);
        }
        let mut caps = serde_json::Map::new();
        caps.insert("goog:chromeOptions".into(), opts);
        caps.insert("pageLoadStrategy".into(), json!("normal"));
        let deadline = Instant::now() + Duration::from_secs(30);
        let client = loop {
            let conn = hyper_util::client::legacy::connect::HttpConnector::new();
            match fantoccini::ClientBuilder::new(conn).capabilities(caps.clone()).connect(&self.webdriver_url).await {
                Ok(c) => break c,
                // chromedriver needs a moment before it listens.
                Err(e)
                    if Instant::now() < deadline
                        && self.driver.is_some()
                        && !matches!(e, fantoccini::error::NewSessionError::SessionNotCreated(_)) =>
                {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                Err(e) => bail!("cannot open a WebDriver session at {}: {e}", self.webdriver_url),
            }
        };
        let t = secs(&self.params);
        client
            .update_timeouts(fantoccini::wd::TimeoutConfiguration::new(Some(t), Some(t), Some(Duration::ZERO)))
            .await
            .map_err(|e| anyhow!("WebDriver timeouts: {e}"))?;
        self.client = Some(client);
        Ok(())
    }

    pub async fn fetch(&mut self, url: &Url) -> Fetched {
        let t0 = Instant::now();
        let mut last = String::new();
        for attempt in 0..=self.params.retries {
            match self.once(url, t0).await {
                Ok(f) => return f,
                Err(e) => {
                    last = e;
                    // A load that timed out may still be running: a new session is the sure way out.
                    if let Err(e) = self.session().await {
                        return Fetched::failed(
                            url,
                            format!("{last}; and the browser could not be restarted: {e}"),
                            t0,
                        );
                    }
                    if attempt == self.params.retries {
                        break;
                    }
                }
            }
        }
        Fetched::failed(url, format!("{last} (gave up after {} attempt(s))", self.params.retries + 1), t0)
    }

    async fn once(&mut self, url: &Url, t0: Instant) -> std::result::Result<Fetched, String> {
        let c = self.client.as_ref().ok_or("no browser session")?;
        // WebDriver's own timeout should fire first; this one guards against a wedged driver.
        let guard = secs(&self.params) + Duration::from_secs(10);
        match tokio::time::timeout(guard, c.goto(url.as_str())).await {
            Err(_) => return Err(format!("{url}: page load did not finish within {}s", self.params.timeout_secs)),
            Ok(Err(e)) => {
                let m = e.to_string();
                if m.to_lowercase().contains("timeout") {
                    return Err(format!("{url}: page load timed out after {}s", self.params.timeout_secs));
                }
                return Err(format!("{url}: {m}"));
            }
            Ok(Ok(())) => {}
        }
        // URL, status and DOM read in one script, so a meta refresh cannot slip between them.
        let script = "const max = arguments[0];
            const nav = performance.getEntriesByType('navigation')[0];
            const h = document.documentElement ? document.documentElement.outerHTML : '';
            const dt = document.doctype ? '<!DOCTYPE ' + document.doctype.name + '>' : '';
            return {url: document.URL, status: nav && nav.responseStatus ? nav.responseStatus : null,
                    len: h.length, html: h.length > max ? null : dt + h,
                    ctype: document.contentType, charset: document.characterSet};";
        let v = tokio::time::timeout(guard, c.execute(script, vec![json!(self.params.max_page_bytes)]))
            .await
            .map_err(|_| format!("{url}: reading the DOM timed out"))?
            .map_err(|e| format!("{url}: reading the DOM: {e}"))?;
        let final_url = v["url"].as_str().and_then(|u| Url::parse(u).ok()).unwrap_or_else(|| url.clone());
        let status = v["status"].as_u64().map(|s| s as u32);
        let len = v["len"].as_u64().unwrap_or(0);
        let mut f = Fetched {
            final_url,
            status,
            content_type: v["ctype"].as_str().map(str::to_string),
            encoding: v["charset"].as_str().map(str::to_string),
            bytes: len,
            html: None,
            error: None,
            ms: 0,
        };
        match &v["html"] {
            Value::String(h) => {
                f.bytes = h.len() as u64;
                f.html = Some(h.clone());
            }
            _ => {
                f.error = Some(format!(
                    "page too large: {len} characters exceeds max_page_bytes = {}",
                    self.params.max_page_bytes
                ))
            }
        }
        if let Some(s) = status.filter(|s| *s >= 400) {
            f.error = Some(format!("HTTP {s}"));
            f.html = None;
        }
        f.ms = t0.elapsed().as_millis() as u64;
        Ok(f)
    }

    pub async fn close(mut self) {
        if let Some(c) = self.client.take() {
            let _ = tokio::time::timeout(Duration::from_secs(5), c.close()).await;
        }
        if let Some(mut d) = self.driver.take() {
            let _ = d.kill().await;
        }
        let _ = std::fs::remove_dir_all(&self.profile_dir);
    }
}
