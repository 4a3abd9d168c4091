//! `[stages.crawl]`: politeness, limits and browser settings of every crawl source. The
//! fetchers read them, so the type is the crawler's; the crawl job serialises it whole into its
//! key (any change re-crawls).

use anyhow::Result;
use serde::{Deserialize, Serialize};

use crate::config::{Config, Place, Section, CRAWL_BACKENDS};

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Settings {
    /// `webdriver`, `http` or `auto` (webdriver when a browser is available, else http);
    /// a source's own `backend` wins.
    pub backend: String,
    /// A running WebDriver server to use instead of starting `chromedriver`.
    pub webdriver: Option<String>,
    pub chromedriver: String,
    /// The Chromium binary (default: whatever chromedriver finds).
    pub chromium: Option<String>,
    pub max_pages: usize,
    /// Links followed from a start URL.
    pub max_depth: u32,
    /// Requests in flight at once on the site's host (`http`; one browser tab for `webdriver`).
    pub concurrency: usize,
    /// Requests started per second on the host; 0 = no limit.
    pub rate_limit: f64,
    /// Per request (`http`) or page load (`webdriver`).
    pub timeout_secs: f64,
    /// Extra attempts after a timeout, a connection error or a 5xx answer.
    pub retries: u32,
    pub max_redirects: usize,
    /// Larger pages are recorded as too large, without their HTML.
    pub max_page_bytes: u64,
    /// Cached pages of a remote site younger than this are not fetched again.
    pub max_age_hours: f64,
    pub user_agent: String,
    /// Requests started per second on a remote site (a `url` source), whatever `rate_limit` says:
    /// what a site operator accepts from a crawler. robots.txt's `Crawl-delay` slows it further.
    pub remote_rate_limit: f64,
    /// Follow `<link rel="canonical">`: a page whose canonical URL was fetched already is recorded
    /// as its duplicate, without HTML, and the canonical URL is never queued again.
    pub canonical: bool,
    /// Longest `Retry-After` honoured on a 429/503 before the attempt counts as failed.
    pub max_retry_after_secs: f64,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            backend: "auto".into(),
            webdriver: None,
            chromedriver: "chromedriver".into(),
            chromium: None,
            max_pages: 1000,
            max_depth: 20,
            concurrency: 4,
            rate_limit: 10.0,
            timeout_secs: 30.0,
            retries: 2,
            max_redirects: 5,
            max_page_bytes: 5 << 20,
            max_age_hours: 168.0,
            // Identifies the crawler to site operators; robots.txt groups for `doc2ci` apply.
            user_agent: concat!("doc2ci/", env!("CARGO_PKG_VERSION"), " (documentation benchmark crawler)").into(),
            remote_rate_limit: 2.0,
            canonical: true,
            max_retry_after_secs: 120.0,
        }
    }
}

impl Section for Settings {
    const NAME: &'static str = "crawl";

    fn check(&self, at: &Place, _: &Config) -> Result<()> {
        if !CRAWL_BACKENDS.contains(&self.backend.as_str()) {
            at.fail_at(
                "backend",
                format!("unknown backend `{}` (one of {})", self.backend, CRAWL_BACKENDS.join(", ")),
            )?;
        }
        let positive = [
            ("max_pages", self.max_pages > 0),
            ("concurrency", self.concurrency > 0),
            ("timeout_secs", self.timeout_secs > 0.0),
            ("max_page_bytes", self.max_page_bytes > 0),
            ("remote_rate_limit", self.remote_rate_limit > 0.0),
        ];
        if let Some((key, _)) = positive.iter().find(|(_, ok)| !ok) {
            at.fail_at(key, "must be above 0")?;
        }
        for (key, v) in [("rate_limit", self.rate_limit), ("max_retry_after_secs", self.max_retry_after_secs)] {
            if !(v >= 0.0) {
                at.fail_at(key, "must not be negative")?;
            }
        }
        Ok(())
    }
}
