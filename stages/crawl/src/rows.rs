//! Crawled pages → the rows of `pairs_raw` and `code_blocks`: which copy of a page is read (the
//! canonical choice), what each extracted pair and skipped block becomes, and the extract note;
//! and when a remote site is due for a new crawl. The extract job reads pages and publishes
//! rows; every rule between the two is here.

use std::collections::{HashMap, HashSet};

use doc2ci_rows::{CodeBlock, Page, RawPair};

use crate::dates::History;
use crate::{extract, Compiled, Extraction, REMOVED_BY_RULE};

/// Which crawl source the rows come from.
#[derive(Debug, Clone, Copy)]
pub struct Origin<'a> {
    pub service: &'a str,
    pub source: &'a str,
}

/// Each page with HTML, once per canonical URL (a page reached twice, by a redirect or under
/// another spelling, is read once: the canonical page itself where it was fetched, else the first
/// variant), in fetch order, with what extraction found on it.
pub fn extracted(mut pages: Vec<Page>, profile: &Compiled) -> Vec<(Page, Extraction)> {
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
        let e = extract(html, profile);
        out.push((pg, e));
    }
    out
}

/// Every code block met, a pair or the reason it is none: the crawl summary.
pub fn code_blocks(from: Origin, pages: Vec<(Page, Extraction)>) -> Vec<CodeBlock> {
    let mut out = Vec::new();
    for (pg, e) in pages {
        let block = |title: String, kind: &str, detail: String, first_line: String| CodeBlock {
            service: from.service.to_string(),
            source: from.source.to_string(),
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

/// Raw pairs, numbered in fetch order, and a note of what was skipped and why (`content_root`:
/// the profile's, named when pages lacked it).
/// Each pair is dated from its page and the source's `history` (the previous extraction).
pub fn raw_pairs(
    from: Origin,
    content_root: &str,
    pages: Vec<(Page, Extraction)>,
    history: &History,
) -> (Vec<RawPair>, String) {
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
                REMOVED_BY_RULE => format!("{} `{}`", s.reason, s.detail),
                _ => s.reason,
            };
            *skipped.entry(why).or_default() += 1;
        }
        for x in e.pairs {
            let dated = history.date(&x.reference, &pg, e.stated.as_deref());
            out.push(RawPair {
                pair_id: doc2ci_rows::pair_id(from.service, &x.title, &x.description, &x.reference),
                service: from.service.to_string(),
                url: pg.url.clone(),
                title: x.title,
                description: x.description,
                reference: x.reference,
                source: from.source.to_string(),
                source_id: format!("{}#{}", pg.url, x.position),
                position: out.len() as u64,
                published: dated.published,
                published_source: dated.published_source,
                not_before: dated.not_before,
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
        note.push_str(&format!("; {no_root} pages without the content root `{content_root}`"));
    }
    let mut by: std::collections::BTreeMap<&str, usize> = Default::default();
    for r in &out {
        *by.entry(r.published_source.as_deref().unwrap_or("undated")).or_default() += 1;
    }
    if !by.is_empty() {
        let parts: Vec<String> = by.iter().map(|(k, v)| format!("{v} {k}")).collect();
        note.push_str(&format!("; dated by {}", parts.join(", ")));
    }
    let new = out.iter().filter(|r| r.not_before.is_some()).count();
    if new > 0 {
        note.push_str(&format!("; {new} new since an earlier crawl"));
    }
    (out, note)
}

/// Which `max_age_hours` window `now` (seconds since the epoch) falls in: a remote site's crawl
/// key holds it, so its pages are fetched again once they are older than `max_age_hours`
/// (0 or less: never; a served folder is re-crawled when its files change instead).
pub fn recrawl_window(now: i64, max_age_hours: f64) -> i64 {
    if max_age_hours > 0.0 {
        (now as f64 / 3600.0 / max_age_hours).floor() as i64
    } else {
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn page(seq: u64, url: &str, canonical: Option<&str>) -> Page {
        Page {
            seq,
            html: Some(format!("<main><h2>{url}</h2><p>Run it.</p></main>")),
            canonical: canonical.map(str::to_string),
            ..doc2ci_testkit::page(url)
        }
    }

    /// A page fetched itself wins over a variant that names it canonical, whatever the order; two
    /// variants of a page never fetched are read once, the first.
    #[test]
    fn each_canonical_page_is_read_once() {
        let profile = crate::builtin("github-docs").unwrap().compile().unwrap();
        let pages = vec![
            page(2, "/a?x=1", Some("/a")),
            page(1, "/a", None),
            page(3, "/b?x=1", Some("/b")),
            page(4, "/b?x=2", Some("/b")),
        ];
        let urls: Vec<String> = extracted(pages, &profile).into_iter().map(|(p, _)| p.url).collect();
        assert_eq!(urls, ["/a", "/b?x=1"]);
    }

    #[test]
    fn the_recrawl_window_turns_over_every_max_age() {
        assert_eq!(recrawl_window(1_000_000, 0.0), 0);
        let h = 3600;
        assert_eq!(recrawl_window(10 * h, 24.0), recrawl_window(23 * h, 24.0));
        assert_ne!(recrawl_window(23 * h, 24.0), recrawl_window(25 * h, 24.0));
    }
}
