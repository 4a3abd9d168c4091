//! When an example was published, from what a crawl can know: a date the page states, the
//! sitemap's `lastmod`, the `Last-Modified` header, and the crawls that saw it (SPEC §1, the time
//! split of issue 45).
//!
//! Every page date bounds the example from above: the example is on the page as it was last
//! changed, so it was published on or before that day. `published` is therefore the earliest
//! date the evidence allows, and `published_source` says which evidence gave it. A crawl only
//! bounds from below when it compares with an earlier crawl: an example that the previous
//! extraction of the source did not have, on a page whose HTML changed since the previous crawl,
//! appeared after that crawl (`not_before`). A pair is after a model's knowledge cutoff for sure
//! only by `not_before`; by `published` it is after the page's last change, which is what the
//! time-split literature uses where nothing better exists.

use std::collections::HashMap;

use chrono::{DateTime, NaiveDate, NaiveDateTime, Utc};
pub use doc2ci_rows::{earliest, Dated};
use doc2ci_rows::{Page, RawPair};
use scraper::{Html, Selector};

/// The page says when it was last changed (or published): a meta tag, JSON-LD, a `<time>` of
/// its "last updated" line.
pub const STATED: &str = "stated";
/// The `<lastmod>` of the page in the site's sitemap.
pub const SITEMAP: &str = "sitemap";
/// The server's `Last-Modified` header.
pub const LAST_MODIFIED: &str = "last_modified";
/// Nothing else: the day of the first crawl that saw the example.
pub const FIRST_CRAWL: &str = "first_crawl";
/// An imported source's own date column.
pub const SOURCE: &str = "source";

/// The day a date names (UTC), `YYYY-MM-DD`, from the spellings documentation sites use:
/// RFC 3339 and W3C datetimes, HTTP dates, ISO days, and "November 3, 2023" / "3 November 2023".
/// A month or year alone names no day and gives none.
pub fn day(s: &str) -> Option<String> {
    let s = s.trim();
    if s.is_empty() || s.len() > 64 {
        return None;
    }
    let d = DateTime::parse_from_rfc3339(s)
        .map(|t| t.with_timezone(&Utc).date_naive())
        .or_else(|_| DateTime::parse_from_rfc2822(s).map(|t| t.with_timezone(&Utc).date_naive()))
        .or_else(|_| DateTime::parse_from_str(s, "%Y-%m-%dT%H:%M%:z").map(|t| t.with_timezone(&Utc).date_naive()))
        .or_else(|_| DateTime::parse_from_str(s, "%Y-%m-%d %H:%M:%S %z").map(|t| t.with_timezone(&Utc).date_naive()))
        .or_else(|_| NaiveDateTime::parse_from_str(s, "%Y-%m-%dT%H:%M:%S%.f").map(|t| t.date()))
        .or_else(|_| NaiveDateTime::parse_from_str(s, "%Y-%m-%d %H:%M:%S%.f").map(|t| t.date()))
        .or_else(|_| NaiveDate::parse_from_str(s, "%Y-%m-%d"))
        .or_else(|_| NaiveDate::parse_from_str(s, "%B %d, %Y"))
        .or_else(|_| NaiveDate::parse_from_str(s, "%b %d, %Y"))
        .or_else(|_| NaiveDate::parse_from_str(s, "%d %B %Y"))
        .or_else(|_| NaiveDate::parse_from_str(s, "%d %b %Y"))
        .ok()?;
    Some(d.format("%Y-%m-%d").to_string())
}

/// A day is evidence only between the web's first documentation sites and the crawl that read
/// it (a day after it is a clock or a template gone wrong).
fn plausible(d: &str, fetched: &str) -> bool {
    d >= "1995-01-01" && (fetched.len() < 10 || d <= &fetched[..10])
}

/// Meta tags saying when the page changed, then when it was published, in the order trusted.
const STATED_META: &[&str] = &[
    r#"meta[property="article:modified_time"]"#,
    r#"meta[property="og:updated_time"]"#,
    r#"meta[itemprop="dateModified"]"#,
    r#"meta[name="last-modified"]"#,
    r#"meta[name="dcterms.modified"]"#,
    r#"meta[name="DC.date.modified"]"#,
    r#"time[itemprop="dateModified"]"#,
    ".git-revision-date-localized-plugin-date",
    r#"meta[property="article:published_time"]"#,
    r#"meta[itemprop="datePublished"]"#,
    r#"meta[name="dcterms.created"]"#,
    r#"meta[name="date"]"#,
    r#"time[itemprop="datePublished"]"#,
];

/// The date the page states about itself: the last change where it says one, else its
/// publication. Meta tags and `<time>` elements first, then JSON-LD (`dateModified`, then
/// `datePublished`). Unparseable dates are ignored.
pub fn stated(doc: &Html) -> Option<String> {
    for sel in STATED_META {
        let s = Selector::parse(sel).expect("static selector");
        for el in doc.select(&s) {
            let v = el.value();
            let text: String;
            let raw = match v.attr("content").or_else(|| v.attr("datetime")) {
                Some(a) => a,
                None => {
                    text = el.text().collect::<String>();
                    &text
                }
            };
            if let Some(d) = day(raw) {
                return Some(d);
            }
        }
    }
    let ld = Selector::parse(r#"script[type="application/ld+json"]"#).expect("static selector");
    let docs: Vec<serde_json::Value> =
        doc.select(&ld).filter_map(|el| serde_json::from_str(&el.text().collect::<String>()).ok()).collect();
    ["dateModified", "datePublished"].iter().find_map(|k| docs.iter().find_map(|v| json_date(v, k, 0)))
}

/// The first `key` holding a date, depth-first (JSON-LD nests in `@graph` and `mainEntity`).
fn json_date(v: &serde_json::Value, key: &str, depth: usize) -> Option<String> {
    if depth > 8 {
        return None;
    }
    match v {
        serde_json::Value::Object(m) => m
            .get(key)
            .and_then(|d| d.as_str())
            .and_then(day)
            .or_else(|| m.values().find_map(|x| json_date(x, key, depth + 1))),
        serde_json::Value::Array(a) => a.iter().find_map(|x| json_date(x, key, depth + 1)),
        _ => None,
    }
}

/// The `<url>` entries of a sitemap with their `<lastmod>` day, and the `<sitemap>` entries of a
/// sitemap index (their locs; the caller fetches them), in document order.
pub fn sitemap_entries(xml: &str) -> (Vec<(String, Option<String>)>, Vec<String>) {
    let (mut urls, mut children) = (Vec::new(), Vec::new());
    for (tag, is_index) in [("url", false), ("sitemap", true)] {
        let (open, close) = (format!("<{tag}>"), format!("</{tag}>"));
        let mut rest = xml;
        while let Some(a) = rest.find(&open) {
            rest = &rest[a + open.len()..];
            let Some(b) = rest.find(&close) else { break };
            let entry = &rest[..b];
            rest = &rest[b + close.len()..];
            let Some(loc) = element(entry, "loc").map(|l| l.replace("&amp;", "&")).filter(|l| !l.is_empty()) else {
                continue;
            };
            if is_index {
                children.push(loc);
            } else {
                urls.push((loc, element(entry, "lastmod").as_deref().and_then(day)));
            }
        }
    }
    (urls, children)
}

fn element(entry: &str, name: &str) -> Option<String> {
    let (open, close) = (format!("<{name}>"), format!("</{name}>"));
    let a = entry.find(&open)? + open.len();
    let b = entry[a..].find(&close)? + a;
    Some(entry[a..b].trim().to_string())
}

/// The earliest of the page's dates (ties go to the stronger evidence: stated, sitemap,
/// Last-Modified), else the crawl's own day; a date before `not_before` contradicts it and is
/// not used.
pub fn page_date(page: &Page, stated: Option<&str>, not_before: Option<&str>) -> Dated {
    let fetched = &page.fetched_at;
    let candidates = [
        (stated.map(str::to_string), STATED),
        (page.sitemap_lastmod.clone(), SITEMAP),
        (page.last_modified.as_deref().and_then(day), LAST_MODIFIED),
    ];
    let best = candidates
        .into_iter()
        .filter_map(|(d, src)| d.map(|d| (d, src)))
        .filter(|(d, _)| plausible(d, fetched) && not_before.is_none_or(|nb| d.as_str() >= nb))
        .min_by(|a, b| a.0.cmp(&b.0));
    let (published, source) = match best {
        Some((d, s)) => (Some(d), s),
        None => (day(fetched), FIRST_CRAWL),
    };
    Dated {
        published_source: published.as_ref().map(|_| source.to_string()),
        published,
        not_before: not_before.map(str::to_string),
    }
}

/// What the previous extraction of a source knew: the dates of the examples it had. Present or
/// not, it decides whether an example met now is new.
#[derive(Debug, Default)]
pub struct History {
    known: Option<HashMap<String, Dated>>,
}

/// An example's identity across crawls: its reference with whitespace runs collapsed (a page
/// re-rendered with other indentation keeps its examples).
fn key(reference: &str) -> String {
    reference.split_whitespace().collect::<Vec<_>>().join(" ")
}

impl History {
    /// The previous `pairs_raw` rows of the source; an empty history (the first extraction)
    /// makes nothing new.
    pub fn of(previous: &[RawPair]) -> Self {
        if previous.is_empty() {
            return Self::default();
        }
        let mut known = HashMap::new();
        for r in previous {
            let d = r.dated();
            known.entry(key(&r.reference)).and_modify(|k| *k = earliest(k, &d)).or_insert(d);
        }
        Self { known: Some(known) }
    }

    /// The example's dates: an example known before keeps the earlier of its old date and what
    /// the page says now; a new one on a page whose HTML changed since the previous crawl
    /// appeared after that crawl.
    pub fn date(&self, reference: &str, page: &Page, stated: Option<&str>) -> Dated {
        let Some(known) = &self.known else { return page_date(page, stated, None) };
        match known.get(&key(reference)) {
            Some(old) => earliest(old, &page_date(page, stated, old.not_before.as_deref())),
            None => page_date(page, stated, page.changed_after.as_deref().and_then(day).as_deref()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn days_from_the_spellings_sites_use() {
        for (s, want) in [
            ("2024-03-05T23:30:00-05:00", Some("2024-03-06")),
            ("2024-03-05T10:00:00Z", Some("2024-03-05")),
            ("Tue, 05 Mar 2024 10:00:00 GMT", Some("2024-03-05")),
            ("2024-03-05", Some("2024-03-05")),
            ("2024-03-05 10:00:00", Some("2024-03-05")),
            ("2024-03-05T10:00+01:00", Some("2024-03-05")),
            ("November 3, 2023", Some("2023-11-03")),
            ("Nov 3, 2023", Some("2023-11-03")),
            ("3 November 2023", Some("2023-11-03")),
            ("2024-03", None),
            ("yesterday", None),
            ("", None),
        ] {
            assert_eq!(day(s).as_deref(), want, "{s}");
        }
    }

    #[test]
    fn the_stated_date_prefers_the_last_change() {
        let doc = Html::parse_document(
            r#"<html><head><meta property="article:published_time" content="2020-01-02T00:00:00Z">
            <meta property="article:modified_time" content="2023-06-07T00:00:00Z"></head><body></body></html>"#,
        );
        assert_eq!(stated(&doc).as_deref(), Some("2023-06-07"));
        let docusaurus = Html::parse_document(
            r#"<span class="theme-last-updated">Last updated on <b><time datetime="2024-02-29T12:00:00.000Z" itemprop="dateModified">Feb 29, 2024</time></b></span>"#,
        );
        assert_eq!(stated(&docusaurus).as_deref(), Some("2024-02-29"));
        let mkdocs = Html::parse_document(
            r#"<span class="git-revision-date-localized-plugin git-revision-date-localized-plugin-date">November 3, 2023</span>"#,
        );
        assert_eq!(stated(&mkdocs).as_deref(), Some("2023-11-03"));
        let ld = Html::parse_document(
            r#"<script type="application/ld+json">{"@graph":[{"@type":"WebPage","datePublished":"2021-01-01","dateModified":"2022-02-02T00:00:00+00:00"}]}</script>"#,
        );
        assert_eq!(stated(&ld).as_deref(), Some("2022-02-02"));
        let none = Html::parse_document(r#"<meta name="date" content="soon"><p>2024-01-01</p>"#);
        assert_eq!(stated(&none), None);
    }

    #[test]
    fn sitemaps_and_their_indexes() {
        let xml = r#"<urlset><url><loc>https://h.test/a/</loc><lastmod>2024-05-06T07:08:09+00:00</lastmod></url>
            <url><loc>https://h.test/b?x=1&amp;y=2</loc></url></urlset>"#;
        let (urls, children) = sitemap_entries(xml);
        assert_eq!(
            urls,
            [
                ("https://h.test/a/".to_string(), Some("2024-05-06".to_string())),
                ("https://h.test/b?x=1&y=2".into(), None)
            ]
        );
        assert!(children.is_empty());
        let index = "<sitemapindex><sitemap><loc>https://h.test/s1.xml</loc><lastmod>2024-01-01</lastmod></sitemap></sitemapindex>";
        assert_eq!(sitemap_entries(index), (vec![], vec!["https://h.test/s1.xml".to_string()]));
    }

    fn page(fetched: &str, last_modified: Option<&str>, lastmod: Option<&str>, changed_after: Option<&str>) -> Page {
        Page {
            service: "s".into(),
            fetched_at: fetched.into(),
            last_modified: last_modified.map(str::to_string),
            sitemap_lastmod: lastmod.map(str::to_string),
            changed_after: changed_after.map(str::to_string),
            ..doc2ci_testkit::page("/a")
        }
    }

    fn dated(p: &str, src: &str, nb: Option<&str>) -> Dated {
        Dated { published: Some(p.into()), published_source: Some(src.into()), not_before: nb.map(str::to_string) }
    }

    /// The earliest plausible page date wins; a date after the crawl is a broken clock; with no
    /// date at all the crawl's day stands.
    #[test]
    fn the_earliest_page_date_bounds_the_example() {
        let p = page("2026-12-01T00:00:00Z", Some("Wed, 01 Oct 2025 00:00:00 GMT"), Some("2025-03-01"), None);
        assert_eq!(page_date(&p, Some("2025-06-01"), None), dated("2025-03-01", SITEMAP, None));
        assert_eq!(page_date(&p, Some("2031-01-01"), None), dated("2025-03-01", SITEMAP, None));
        let bare = page("2026-12-01T00:00:00Z", None, None, None);
        assert_eq!(page_date(&bare, None, None), dated("2026-12-01", FIRST_CRAWL, None));
    }

    /// A re-crawl: the example known before keeps its first date although the page changed
    /// since; the new one on the changed page is after the previous crawl, and a page date
    /// before that crawl (it cannot be the example's) is not used.
    #[test]
    fn a_recrawl_dates_new_examples_after_the_previous_crawl() {
        let old = RawPair {
            pair_id: "p".into(),
            service: "s".into(),
            url: "/a".into(),
            title: String::new(),
            description: String::new(),
            reference: "on: push\njobs: {}".into(),
            source: "docs".into(),
            source_id: "/a#0".into(),
            position: 0,
            published: Some("2025-03-01".into()),
            published_source: Some(SITEMAP.into()),
            not_before: None,
        };
        let h = History::of(&[old]);
        let p = page("2026-12-01T00:00:00Z", None, Some("2026-11-20"), Some("2026-06-01T00:00:00Z"));
        assert_eq!(h.date("on:  push\njobs: {}", &p, None), dated("2025-03-01", SITEMAP, None));
        assert_eq!(
            h.date("on: pull_request", &p, Some("2026-01-01")),
            dated("2026-11-20", SITEMAP, Some("2026-06-01"))
        );
        let unchanged = page("2026-12-01T00:00:00Z", None, None, None);
        assert_eq!(h.date("on: pull_request", &unchanged, None), dated("2026-12-01", FIRST_CRAWL, None));
        // The first extraction has no history: nothing is new, the earliest page date stands.
        assert_eq!(
            History::default().date("on: pull_request", &p, Some("2026-01-01")),
            dated("2026-01-01", STATED, None)
        );
    }
}
