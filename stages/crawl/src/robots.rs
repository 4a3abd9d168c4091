//! robots.txt (RFC 9309): the group for our user agent, else `*`; longest matching rule wins,
//! `Allow` on a tie; `*` and `$` patterns.

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Robots {
    /// (allow, pattern) of the group that applies to us.
    rules: Vec<(bool, String)>,
    /// The group's `Crawl-delay` in seconds (not in RFC 9309, but what operators write to be asked
    /// less often; a polite crawler honours it).
    pub crawl_delay: Option<f64>,
}

pub const USER_AGENT: &str = "doc2ci";

impl Robots {
    /// An absent or unreadable robots.txt allows everything.
    pub fn allow_all() -> Robots {
        Robots::default()
    }

    pub fn parse(text: &str) -> Robots {
        // Groups: consecutive user-agent lines, then rules.
        let mut groups: Vec<(Vec<String>, Vec<(bool, String)>, Option<f64>)> = Vec::new();
        let mut in_agents = false;
        for line in text.lines() {
            let line = line.split('#').next().unwrap_or("").trim();
            let Some((k, v)) = line.split_once(':') else { continue };
            let (k, v) = (k.trim().to_ascii_lowercase(), v.trim().to_string());
            match k.as_str() {
                "user-agent" => {
                    if !in_agents {
                        groups.push((Vec::new(), Vec::new(), None));
                        in_agents = true;
                    }
                    groups.last_mut().unwrap().0.push(v.to_ascii_lowercase());
                }
                "allow" | "disallow" => {
                    in_agents = false;
                    if let Some(g) = groups.last_mut() {
                        if !v.is_empty() {
                            g.1.push((k == "allow", v));
                        }
                    }
                }
                "crawl-delay" => {
                    in_agents = false;
                    if let (Some(g), Ok(d)) = (groups.last_mut(), v.parse::<f64>()) {
                        if d.is_finite() && d >= 0.0 {
                            // Bounded: a robots.txt asking for an hour between pages would stall a crawl.
                            g.2 = Some(d.min(60.0));
                        }
                    }
                }
                _ => {}
            }
        }
        let ours = groups.iter().find(|g| g.0.iter().any(|a| a != "*" && USER_AGENT.starts_with(a.as_str())));
        let any = groups.iter().find(|g| g.0.iter().any(|a| a == "*"));
        let g = ours.or(any);
        Robots { rules: g.map(|g| g.1.clone()).unwrap_or_default(), crawl_delay: g.and_then(|g| g.2) }
    }

    pub fn allows(&self, path: &str) -> bool {
        let mut best: Option<(usize, bool)> = None;
        for (allow, pat) in &self.rules {
            if matches(pat, path) {
                let len = pat.len();
                match best {
                    Some((l, a)) if l > len || (l == len && a) => {}
                    _ => best = Some((len, *allow)),
                }
            }
        }
        best.is_none_or(|(_, a)| a)
    }
}

fn matches(pat: &str, path: &str) -> bool {
    let (pat, anchored) = match pat.strip_suffix('$') {
        Some(p) => (p, true),
        None => (pat, false),
    };
    let parts: Vec<&str> = pat.split('*').collect();
    let mut pos = 0;
    for (i, part) in parts.iter().enumerate() {
        if i == 0 {
            if !path.starts_with(part) {
                return false;
            }
            pos = part.len();
        } else {
            match path[pos..].find(part) {
                Some(at) => pos += at + part.len(),
                None => return false,
            }
        }
    }
    !anchored || pos == path.len() || (parts.len() > 1 && parts.last().is_some_and(|l| path.ends_with(l)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_and_longest_match() {
        let r = Robots::parse("User-agent: other\nDisallow: /\n\nUser-agent: *\nDisallow: /private/\nDisallow: /a/drafts/\nAllow: /a/drafts/ok.html\nDisallow: /*.pdf$\n");
        assert!(r.allows("/a/index.html"));
        assert!(!r.allows("/private/x.html"));
        assert!(!r.allows("/a/drafts/x.html"));
        assert!(r.allows("/a/drafts/ok.html"));
        assert!(!r.allows("/a/b.pdf"));
        assert!(r.allows("/a/b.pdf.html"));
        let ours = Robots::parse("User-agent: *\nDisallow: /\n\nUser-agent: doc2ci\nDisallow: /x/\n");
        assert!(ours.allows("/y") && !ours.allows("/x/1"));
        assert!(Robots::parse("").allows("/anything"));
        let d = Robots::parse("User-agent: *\nCrawl-delay: 2.5\nDisallow: /p/\n\nUser-agent: doc2ci\nCrawl-delay: 4\n");
        assert_eq!(d.crawl_delay, Some(4.0));
        assert_eq!(Robots::parse("User-agent: *\nCrawl-delay: 7200\n").crawl_delay, Some(60.0));
        assert_eq!(Robots::parse("User-agent: *\nDisallow: /x\n").crawl_delay, None);
    }
}
