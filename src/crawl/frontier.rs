//! The crawl's frontier: which URLs are queued, seen, landed on or left out and why. Pure: the
//! crawl hands it URLs (start URLs, sitemap entries, a checkpoint's links, a page's links and its
//! canonical URL) and it decides, breadth-first and in one deterministic order.

use std::collections::{HashMap, HashSet, VecDeque};

use doc2ci_crawl::{in_scope, normalize, Scope};
use url::Url;

/// A URL as rows record it: served folders have no stable origin (the port changes per run), so
/// their pages are recorded by path; remote sites by full URL.
pub(super) fn shown(u: &Url, served: bool) -> String {
    if served {
        match u.query() {
            Some(q) => format!("{}?{q}", u.path()),
            None => u.path().to_string(),
        }
    } else {
        u.to_string()
    }
}

pub(super) struct Frontier<'s> {
    scope: &'s Scope,
    keep_query: bool,
    served: bool,
    /// Every URL queued or fetched (as [`shown`]).
    seen: HashSet<String>,
    pub(super) queue: VecDeque<(Url, u32)>,
    /// URLs pages ended at (redirects, meta refresh): fetched already, skipped when they come up.
    landed_at: HashSet<String>,
    /// At most this many URLs are ever seen: a page of a million links (or a site that makes them
    /// up) cannot grow memory without end; what was left out is counted.
    pub(super) cap: usize,
    pub(super) beyond_cap: usize,
    pub(super) too_deep: usize,
    /// Links not followed, by why.
    pub(super) out_of_scope: HashMap<&'static str, usize>,
}

impl<'s> Frontier<'s> {
    pub(super) fn new(scope: &'s Scope, keep_query: bool, served: bool, cap: usize) -> Frontier<'s> {
        Frontier {
            scope,
            keep_query,
            served,
            seen: HashSet::new(),
            queue: VecDeque::new(),
            landed_at: HashSet::new(),
            cap,
            beyond_cap: 0,
            too_deep: 0,
            out_of_scope: HashMap::new(),
        }
    }

    pub(super) fn shown(&self, u: &Url) -> String {
        shown(u, self.served)
    }

    /// Why `u` is outside the crawl's scope, if it is.
    pub(super) fn out_of_scope_of(&self, u: &Url) -> Option<&'static str> {
        in_scope(u, self.scope)
    }

    /// Queues a start URL (or a sitemap's, `count` false: it is counted by the sitemap); why it
    /// is out of scope otherwise.
    pub(super) fn start(&mut self, u: &Url, count: bool) -> Result<bool, &'static str> {
        let u = normalize(u, self.keep_query);
        if let Some(why) = in_scope(&u, self.scope) {
            if count {
                *self.out_of_scope.entry(why).or_default() += 1;
            }
            return Err(why);
        }
        let fresh = self.seen.insert(self.shown(&u));
        if fresh {
            self.queue.push_back((u, 0));
        }
        Ok(fresh)
    }

    /// Rebuilds the frontier of a killed crawl from its checkpointed pages: their links are
    /// queued, and what they fetched (asked for or landed on) is never fetched again.
    pub(super) fn resume<'p>(
        &mut self,
        pages: impl IntoIterator<Item = &'p doc2ci_rows::Page>,
        resolve: impl Fn(&str) -> anyhow::Result<Url>,
    ) -> anyhow::Result<()> {
        let mut done: HashSet<String> = HashSet::new();
        for pg in pages {
            done.insert(pg.requested_url.clone());
            done.insert(pg.url.clone());
            for l in &pg.links {
                if self.seen.insert(l.clone()) {
                    self.queue.push_back((resolve(l)?, pg.depth + 1));
                }
            }
        }
        let served = self.served;
        self.queue.retain(|(u, _)| !done.contains(&shown(u, served)));
        Ok(())
    }

    /// Whether a URL taken from the queue is not to be fetched: a page already landed there, or it
    /// is deeper than `max_depth` (counted).
    pub(super) fn skip(&mut self, u: &Url, depth: u32, max_depth: u32) -> bool {
        if self.landed_at.contains(&self.shown(u)) {
            return true;
        }
        if depth > max_depth {
            self.too_deep += 1;
            return true;
        }
        false
    }

    /// A link of a page at `depth`: queued when in scope, within the cap and new; its shown form
    /// when queued (the page's `links`, from which a resumed crawl rebuilds the frontier).
    pub(super) fn link(&mut self, l: &Url, depth: u32) -> Option<String> {
        let l = normalize(l, self.keep_query);
        if let Some(why) = in_scope(&l, self.scope) {
            *self.out_of_scope.entry(why).or_default() += 1;
            return None;
        }
        let s = self.shown(&l);
        if self.seen.len() >= self.cap && !self.seen.contains(&s) {
            self.beyond_cap += 1;
            return None;
        }
        if !self.seen.insert(s.clone()) {
            return None;
        }
        self.queue.push_back((l, depth + 1));
        Some(s)
    }

    /// The page's canonical URL `c` when in scope and not where it landed (its shown form). A new
    /// one is queued and pushed to the page's `links`, so a resumed crawl queues it again.
    /// Extraction reads one page per canonical URL, the canonical page itself where it was
    /// fetched, so that page is still fetched: a stub of jekyll-redirect-from names its target as
    /// canonical and holds none of its content.
    pub(super) fn canonical(&mut self, c: &Url, landed: &str, depth: u32, links: &mut Vec<String>) -> Option<String> {
        let c = normalize(c, self.keep_query);
        let cs = self.shown(&c);
        if in_scope(&c, self.scope).is_some() || cs == landed {
            return None;
        }
        if self.seen.insert(cs.clone()) {
            links.push(cs.clone());
            self.queue.push_back((c, depth + 1));
        }
        Some(cs)
    }

    /// Where a fetched page ended (a browser may end elsewhere: meta refresh): never fetched again.
    pub(super) fn landed(&mut self, shown: &str) {
        self.seen.insert(shown.to_string());
        self.landed_at.insert(shown.to_string());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scope() -> Scope {
        Scope {
            origin: Url::parse("https://docs.example.com/").unwrap(),
            prefixes: vec!["/user/".into()],
            exclude: vec!["/user/old/".into()],
            robots: doc2ci_crawl::Robots::allow_all(),
        }
    }

    fn url(s: &str) -> Url {
        Url::parse(&format!("https://docs.example.com{s}")).unwrap()
    }

    #[test]
    fn links_are_queued_once_in_scope_and_within_the_cap() {
        let sc = scope();
        let mut f = Frontier::new(&sc, false, true, 3);
        assert_eq!(f.start(&url("/user/a/"), true), Ok(true));
        assert_eq!(f.start(&url("/user/a/?ref=nav"), true), Ok(false), "queries are dropped: one page");
        assert!(f.start(&url("/blog/"), true).is_err());
        assert_eq!(f.link(&url("/user/b/"), 0).as_deref(), Some("/user/b/"));
        assert_eq!(f.link(&url("/user/b/"), 0), None, "seen");
        assert_eq!(f.link(&url("/user/old/x/"), 0), None, "excluded");
        assert_eq!(f.link(&url("/user/c/"), 1).as_deref(), Some("/user/c/"));
        assert_eq!(f.link(&url("/user/d/"), 1), None, "the cap of 3 is reached");
        assert_eq!((f.beyond_cap, f.out_of_scope.values().sum::<usize>()), (1, 2));
        let q: Vec<(String, u32)> = f.queue.iter().map(|(u, d)| (u.path().to_string(), *d)).collect();
        assert_eq!(q, [("/user/a/".into(), 0), ("/user/b/".into(), 1), ("/user/c/".into(), 2)]);
    }

    #[test]
    fn landed_and_too_deep_urls_are_skipped_and_canonical_urls_queued() {
        let sc = scope();
        let mut f = Frontier::new(&sc, false, false, 100);
        f.landed(url("/user/a/").as_str());
        assert!(f.skip(&url("/user/a/"), 0, 5));
        assert!(f.skip(&url("/user/b/"), 6, 5));
        assert!(!f.skip(&url("/user/b/"), 5, 5));
        assert_eq!(f.too_deep, 1);
        let mut links = Vec::new();
        let here = url("/user/stub/").to_string();
        assert_eq!(f.canonical(&url("/user/stub/"), &here, 0, &mut links), None, "itself");
        assert_eq!(f.canonical(&url("/blog/x/"), &here, 0, &mut links), None, "out of scope");
        let c = f.canonical(&url("/user/target/"), &here, 0, &mut links);
        assert_eq!(c.as_deref(), Some("https://docs.example.com/user/target/"));
        assert_eq!(links, [c.clone().unwrap()]);
        assert_eq!(f.canonical(&url("/user/target/"), &here, 0, &mut links), c, "named again, queued once");
        assert_eq!(f.queue.len(), 1);
    }

    #[test]
    fn a_resumed_frontier_holds_the_checkpoint_s_links_minus_what_it_fetched() {
        let sc = scope();
        let mut f = Frontier::new(&sc, false, true, 100);
        f.start(&url("/user/a/"), true).unwrap();
        let page = |req: &str, at: &str, links: &[&str]| doc2ci_rows::Page {
            url: at.into(),
            links: links.iter().map(|s| s.to_string()).collect(),
            ..doc2ci_testkit::page(req)
        };
        let pages = [page("/user/a/", "/user/a/", &["/user/b/", "/user/c/"]), page("/user/b/", "/user/b2/", &[])];
        f.resume(&pages, |s| Ok(url(s))).unwrap();
        let q: Vec<&str> = f.queue.iter().map(|(u, _)| u.path()).collect();
        assert_eq!(q, ["/user/c/"]);
    }
}
