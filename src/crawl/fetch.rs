//! Fetching a page over plain HTTP (reqwest), and what both fetchers return ([`Fetched`]): the
//! browser (`browser.rs`) answers in the same shape with the same bounds.

use std::time::{Duration, Instant};

use anyhow::Result;
use doc2ci_crawl::{in_scope, Scope};
use url::Url;

use super::Settings;

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
    pub etag: Option<String>,
    pub last_modified: Option<String>,
    /// 304 to a conditional request: the caller keeps the HTML it had.
    pub not_modified: bool,
    /// Body bytes received over the network.
    pub transferred: u64,
}

/// What a previous crawl learnt about a page, for a conditional re-fetch.
#[derive(Debug, Clone, Default)]
pub struct Validators {
    pub etag: Option<String>,
    pub last_modified: Option<String>,
}

impl Fetched {
    pub(super) fn failed(url: &Url, error: String, t0: Instant) -> Fetched {
        Fetched {
            final_url: url.clone(),
            status: None,
            content_type: None,
            encoding: None,
            bytes: 0,
            html: None,
            error: Some(error),
            ms: t0.elapsed().as_millis() as u64,
            etag: None,
            last_modified: None,
            not_modified: false,
            transferred: 0,
        }
    }
}

/// One failed attempt: the message, whether another attempt may help, and how long the server
/// asked us to wait first (`Retry-After` on a 429 or 503).
struct Retry {
    msg: String,
    again: bool,
    after: Option<Duration>,
}

/// `Retry-After` as seconds or an HTTP date, from now.
fn retry_after(h: &reqwest::header::HeaderMap) -> Option<Duration> {
    let v = h.get(reqwest::header::RETRY_AFTER)?.to_str().ok()?.trim();
    if let Ok(s) = v.parse::<f64>() {
        // Clamped before it becomes a duration (`1e20` would overflow one); a day is already
        // beyond any `max_retry_after_secs`, so the page fails as "exceeds" either way.
        return (s.is_finite() && s >= 0.0).then(|| Duration::from_secs_f64(s.min(86_400.0)));
    }
    let when = chrono::DateTime::parse_from_rfc2822(v).ok()?;
    let secs = (when.with_timezone(&chrono::Utc) - chrono::Utc::now()).num_milliseconds();
    Some(Duration::from_millis(secs.max(0) as u64))
}

/// A request's time limit, the browser's page loads' too.
pub(super) fn secs(p: &Settings) -> Duration {
    Duration::from_secs_f64(p.timeout_secs)
}

/// HTTP client with bounded redirects that never leave the crawl's scope.
#[derive(Clone)]
pub struct Http {
    client: reqwest::Client,
    params: Settings,
    /// The site's credentials (from its URL), sent with every request to it.
    auth: Option<crate::config::Credentials>,
}

/// The most of a robots.txt read (Google reads 500 KiB).
const MAX_ROBOTS_BYTES: usize = 500 << 10;

impl Http {
    pub fn new(params: &Settings, scope: &Scope, auth: Option<&crate::config::Credentials>) -> Result<Http> {
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
        Ok(Http { client, params: params.clone(), auth: auth.cloned() })
    }

    /// A request to the site, with its credentials when it has some (a redirect leaves the
    /// site's scope only as an error, and reqwest drops the header on a cross-origin hop anyway).
    fn request(&self, method: reqwest::Method, url: &Url) -> reqwest::RequestBuilder {
        let rq = self.client.request(method, url.clone());
        match &self.auth {
            Some(a) => rq.basic_auth(&a.user, a.password.as_ref()),
            None => rq,
        }
    }

    /// A page's validators from a HEAD request: what a later crawl sends to be told 304 Not
    /// Modified (the browser does not expose response headers to the page).
    pub async fn validators(&self, url: &Url) -> Validators {
        match self.request(reqwest::Method::HEAD, url).send().await {
            Ok(r) if r.status().is_success() => {
                let h = |k| {
                    r.headers().get(k).and_then(|v: &reqwest::header::HeaderValue| v.to_str().ok()).map(str::to_string)
                };
                Validators { etag: h(reqwest::header::ETAG), last_modified: h(reqwest::header::LAST_MODIFIED) }
            }
            _ => Validators::default(),
        }
    }

    /// A small text resource (sitemap.xml), or None when it is absent or too large.
    pub async fn text(&self, url: &Url) -> Option<String> {
        let r = self.request(reqwest::Method::GET, url).send().await.ok()?;
        if !r.status().is_success() || r.content_length().is_some_and(|l| l > self.params.max_page_bytes) {
            return None;
        }
        // Read by chunks: a server that sends no length (or lies about it) stops at the cap.
        let mut r = r;
        let mut b = Vec::new();
        while let Some(c) = r.chunk().await.ok()? {
            b.extend_from_slice(&c);
            if b.len() as u64 > self.params.max_page_bytes {
                return None;
            }
        }
        Some(String::from_utf8_lossy(&b).into_owned())
    }

    /// robots.txt of the origin; absent or unreadable means everything is allowed.
    pub async fn robots(&self, origin: &Url) -> doc2ci_crawl::Robots {
        let Ok(u) = origin.join("/robots.txt") else { return doc2ci_crawl::Robots::allow_all() };
        match self.request(reqwest::Method::GET, &u).send().await {
            Ok(mut r) if r.status().is_success() => {
                // Read up to the cap; what lies beyond it is not obeyed (as Google does).
                let mut buf = Vec::new();
                while let Ok(Some(c)) = r.chunk().await {
                    buf.extend_from_slice(&c);
                    if buf.len() >= MAX_ROBOTS_BYTES {
                        buf.truncate(MAX_ROBOTS_BYTES);
                        break;
                    }
                }
                doc2ci_crawl::Robots::parse(&String::from_utf8_lossy(&buf))
            }
            _ => doc2ci_crawl::Robots::allow_all(),
        }
    }

    pub async fn fetch(&self, url: &Url, validators: Option<&Validators>) -> Fetched {
        let t0 = Instant::now();
        let mut last = None;
        let mut wait = Duration::ZERO;
        for attempt in 0..=self.params.retries {
            if attempt > 0 {
                // Exponential backoff, or longer when the server said how long (429/503 Retry-After).
                tokio::time::sleep(wait.max(Duration::from_millis(200 << attempt.min(5)))).await;
            }
            match self.once(url, t0, validators).await {
                Ok(f) => return f,
                Err(r) => {
                    last = Some(r.msg);
                    if !r.again {
                        break;
                    }
                    wait = r.after.unwrap_or_default();
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
    async fn once(
        &self,
        url: &Url,
        t0: Instant,
        validators: Option<&Validators>,
    ) -> std::result::Result<Fetched, Retry> {
        let mut rq = self.request(reqwest::Method::GET, url);
        if let Some(v) = validators {
            if let Some(e) = &v.etag {
                rq = rq.header(reqwest::header::IF_NONE_MATCH, e);
            }
            if let Some(m) = &v.last_modified {
                rq = rq.header(reqwest::header::IF_MODIFIED_SINCE, m);
            }
        }
        let resp = rq.send().await.map_err(|e| {
            let (msg, again) = describe(url, &e, self.params.timeout_secs);
            Retry { msg, again, after: None }
        })?;
        let status = resp.status();
        let final_url = resp.url().clone();
        let header =
            |k: reqwest::header::HeaderName| resp.headers().get(k).and_then(|v| v.to_str().ok()).map(str::to_string);
        let ctype = header(reqwest::header::CONTENT_TYPE);
        let (etag, last_modified) = (header(reqwest::header::ETAG), header(reqwest::header::LAST_MODIFIED));
        if status.as_u16() == 429 || status.is_server_error() {
            let after = retry_after(resp.headers());
            let max = Duration::from_secs_f64(self.params.max_retry_after_secs);
            if let Some(a) = after.filter(|a| *a > max) {
                return Err(Retry {
                    msg: format!("{url}: HTTP {status}, Retry-After {}s exceeds max_retry_after_secs", a.as_secs()),
                    again: false,
                    after: None,
                });
            }
            return Err(Retry { msg: format!("{url}: HTTP {status}"), again: true, after });
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
            etag,
            last_modified,
            not_modified: false,
            transferred: 0,
        };
        if status == reqwest::StatusCode::NOT_MODIFIED && validators.is_some() {
            f.not_modified = true;
            f.ms = t0.elapsed().as_millis() as u64;
            return Ok(f);
        }
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
                        f.transferred = body.len() as u64;
                        f.error = Some(format!(
                            "page too large: more than max_page_bytes = {max} bytes (stopped reading at {})",
                            body.len()
                        ));
                        f.ms = t0.elapsed().as_millis() as u64;
                        return Ok(f);
                    }
                }
                Ok(None) => break,
                Err(e) => {
                    let (msg, again) = describe(url, &e, self.params.timeout_secs);
                    return Err(Retry { msg, again, after: None });
                }
            }
        }
        let (html, enc) = doc2ci_crawl::decode_page(&body, ctype.as_deref());
        f.bytes = body.len() as u64;
        f.transferred = body.len() as u64;
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

#[cfg(test)]
mod tests {
    use super::retry_after;
    use std::time::Duration;

    /// Issue 30: a `Retry-After` no duration can hold is clamped (it panicked the re-fetch path).
    #[test]
    fn an_absurd_retry_after_is_clamped_not_a_panic() {
        let h = |v: &'static str| {
            reqwest::header::HeaderMap::from_iter([(
                reqwest::header::RETRY_AFTER,
                reqwest::header::HeaderValue::from_static(v),
            )])
        };
        assert_eq!(retry_after(&h("1e20")), Some(Duration::from_secs(86_400)));
        assert_eq!(retry_after(&h("inf")), None);
        assert_eq!(retry_after(&h("-3")), None);
        assert_eq!(retry_after(&h("2.5")), Some(Duration::from_millis(2500)));
    }
}
