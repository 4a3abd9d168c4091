//! HTML → pairs, as the Doc2CI study's crawler turned documentation sections into pairs.

use scraper::{ElementRef, Html, Selector};
use serde::{Deserialize, Serialize};
use url::Url;

use crate::Compiled;

/// One YAML example that loads as a mapping or sequence.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Extracted {
    pub title: String,
    pub description: String,
    pub reference: String,
    /// Index among the page's pairs.
    pub position: u64,
}

/// A code block that did not become a pair, and why. No YAML block of a page is dropped in
/// silence: one inside an element the profile removes, a hidden one, or one outside the content
/// root is a `Skipped` too.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Skipped {
    pub title: String,
    /// `not yaml`, `yaml scalar` or `yaml parse error` (the golden notes' words);
    /// `removed by profile rule` (the rule in `detail`), `hidden` or `outside the content root`.
    pub reason: String,
    pub detail: String,
    pub first_line: String,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Extraction {
    pub pairs: Vec<Extracted>,
    pub skipped: Vec<Skipped>,
    /// Set when the page has no content root (nothing is extracted then).
    pub error: Option<String>,
    /// The date the page states about itself ([`crate::dates::stated`]).
    pub stated: Option<String>,
}

struct Heading {
    level: u8,
    text: String,
    prose: Vec<String>,
}

/// Runs of whitespace collapsed to one space, trimmed.
fn collapse(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Trailing spaces of each line and blank lines at both ends dropped; inner lines kept verbatim.
fn normalize_reference(s: &str) -> String {
    let lines: Vec<&str> = s.split('\n').map(str::trim_end).collect();
    let start = lines.iter().position(|l| !l.is_empty()).unwrap_or(lines.len());
    let end = lines.iter().rposition(|l| !l.is_empty()).map_or(start, |e| e + 1);
    lines[start..end.max(start)].join("\n")
}

fn first_line(s: &str) -> String {
    s.split('\n').find(|l| !l.trim().is_empty()).map(|l| l.trim_end().to_string()).unwrap_or_default()
}

/// `hidden`, or an inline style that says `display:none` (a print-only or A/B-test block).
fn is_hidden(el: ElementRef) -> bool {
    let v = el.value();
    if v.attr("hidden").is_some() {
        return true;
    }
    v.attr("style").is_some_and(|s| s.replace(' ', "").to_ascii_lowercase().contains("display:none"))
}

/// A code block's language, for the skip report: `language-x` or `data-lang` on it, inside it or above it.
fn block_lang(el: ElementRef) -> String {
    let own = |e: ElementRef| -> Option<String> {
        for c in e.value().classes() {
            if let Some(l) = c.strip_prefix("language-") {
                return Some(l.to_string());
            }
        }
        e.value().attr("data-lang").map(str::to_string)
    };
    let mut it = std::iter::once(el).chain(el.descendants().filter_map(ElementRef::wrap));
    if let Some(l) = it.find_map(own) {
        return l;
    }
    for a in el.ancestors().filter_map(ElementRef::wrap) {
        if let Some(l) = own(a) {
            return l;
        }
    }
    el.value().classes().next().unwrap_or("?").to_string()
}

fn heading_level(name: &str) -> Option<u8> {
    match name {
        "h1" => Some(1),
        "h2" => Some(2),
        "h3" => Some(3),
        "h4" => Some(4),
        "h5" => Some(5),
        "h6" => Some(6),
        _ => None,
    }
}

struct Walker<'a> {
    p: &'a Compiled,
    stack: Vec<Heading>,
    out: Extraction,
    /// Markup deeper than [`MAX_DEPTH`] was met (said once per page).
    too_deep: bool,
}

/// Elements whose text is never part of an enclosing prose block: other blocks (walked on their own),
/// lists and tables (their items and cells are blocks or chrome), code, and what is not text at all.
fn block_level(name: &str) -> bool {
    matches!(
        name,
        "pre"
            | "ul"
            | "ol"
            | "dl"
            | "table"
            | "script"
            | "style"
            | "template"
            | "h1"
            | "h2"
            | "h3"
            | "h4"
            | "h5"
            | "h6"
    )
}

/// Reasons of YAML blocks that never reach the walk's YAML branch.
pub const REMOVED_BY_RULE: &str = "removed by profile rule";
pub const HIDDEN: &str = "hidden";
pub const OUTSIDE_ROOT: &str = "outside the content root";
pub const TOO_DEEP: &str = "nested too deep";

/// How deep the extraction reads (Chromium's parser nests no deeper either): a page nested
/// 10,000 `<div>`s deep overflowed the stack and killed the whole run.
pub const MAX_DEPTH: usize = 512;

impl Walker<'_> {
    /// Hidden (unless a tab panel the profile keeps: every panel is an example) or removed by the profile.
    fn removed(&self, el: ElementRef) -> bool {
        let hidden = is_hidden(el) && !self.p.keep.as_ref().is_some_and(|s| s.matches(&el));
        hidden || self.p.remove.as_ref().is_some_and(|s| s.matches(&el))
    }

    /// Why a removed element went: the first `remove` rule that matches it, else hidden.
    fn removal(&self, el: ElementRef) -> (&'static str, String) {
        match self.p.remove_rules.iter().find(|(_, s)| s.matches(&el)) {
            Some((rule, _)) => (REMOVED_BY_RULE, rule.clone()),
            None => (HIDDEN, String::new()),
        }
    }

    /// Every YAML block in `el`'s subtree (`el` included), outermost only, as skipped for `reason`.
    fn skip_yaml_in(&mut self, el: ElementRef, reason: &str, detail: &str) {
        for y in yaml_blocks_in(self.p, el) {
            let text = self.block_text(y);
            let title = self.title();
            self.out.skipped.push(Skipped {
                title,
                reason: reason.into(),
                detail: detail.into(),
                first_line: first_line(&text),
            });
        }
    }

    fn is_code(&self, el: ElementRef) -> bool {
        self.p.yaml.matches(&el) || self.p.code.as_ref().is_some_and(|c| c.matches(&el))
    }

    /// A block's own text (issue 11): its text nodes and those of inline descendants (inline code,
    /// links, emphasis), but not nested prose blocks (they are blocks of their own), code blocks, lists,
    /// tables, or removed elements. Taking the whole subtree put a step's YAML into its own description.
    fn own_text(&self, el: ElementRef) -> String {
        let mut s = String::new();
        self.push_own_text(el, &mut s, 0);
        collapse(&s)
    }

    fn push_own_text(&self, el: ElementRef, out: &mut String, depth: usize) {
        if depth > MAX_DEPTH {
            return;
        }
        for child in el.children() {
            if let Some(t) = child.value().as_text() {
                out.push_str(t);
                continue;
            }
            let Some(c) = ElementRef::wrap(child) else { continue };
            let name = c.value().name();
            if name == "br" {
                out.push(' ');
                continue;
            }
            if self.removed(c) {
                // Gone as if never there: an inline icon removed from "the plus icon (<svg>)" leaves
                // "()", as a reader of the text sees it (GitLab's real pages).
                continue;
            }
            if block_level(name) || self.is_code(c) || self.p.prose.matches(&c) {
                // Keeps the words on either side of a skipped block apart.
                out.push(' ');
                continue;
            }
            self.push_own_text(c, out, depth + 1);
        }
    }

    /// A code block's or heading's text: everything but removed descendants (callout markers in code,
    /// badges in headings), verbatim.
    fn block_text(&self, el: ElementRef) -> String {
        let mut s = String::new();
        self.push_block_text(el, &mut s, 0);
        s
    }

    fn push_block_text(&self, el: ElementRef, out: &mut String, depth: usize) {
        if depth > MAX_DEPTH {
            return;
        }
        for child in el.children() {
            if let Some(t) = child.value().as_text() {
                out.push_str(t);
            } else if let Some(c) = ElementRef::wrap(child) {
                if !self.removed(c) && !matches!(c.value().name(), "script" | "style" | "template") {
                    self.push_block_text(c, out, depth + 1);
                }
            }
        }
    }

    fn title(&self) -> String {
        self.stack.iter().map(|h| h.text.as_str()).collect::<Vec<_>>().join(" - ")
    }

    /// The prose of every open heading in document order, each block once.
    fn description(&self) -> String {
        let mut seen = std::collections::HashSet::new();
        let mut parts: Vec<&str> = Vec::new();
        for h in &self.stack {
            for p in &h.prose {
                if seen.insert(p.as_str()) {
                    parts.push(p);
                }
            }
        }
        if parts.is_empty() {
            ".".into()
        } else {
            parts.join(" ")
        }
    }

    fn walk(&mut self, node: ElementRef, depth: usize) {
        if depth > MAX_DEPTH {
            if !std::mem::replace(&mut self.too_deep, true) {
                let title = self.title();
                self.out.skipped.push(Skipped {
                    title,
                    reason: TOO_DEEP.into(),
                    detail: format!("elements nested over {MAX_DEPTH} deep are not read"),
                    first_line: String::new(),
                });
            }
            return;
        }
        for child in node.children().filter_map(ElementRef::wrap) {
            if self.removed(child) {
                let (reason, rule) = self.removal(child);
                self.skip_yaml_in(child, reason, &rule);
                continue;
            }
            let name = child.value().name();
            if matches!(name, "script" | "style" | "template") {
                continue;
            }
            if let Some(level) = heading_level(name) {
                while self.stack.last().is_some_and(|h| h.level >= level) {
                    self.stack.pop();
                }
                self.stack.push(Heading { level, text: collapse(&self.block_text(child)), prose: Vec::new() });
                continue;
            }
            if self.p.yaml.matches(&child) {
                let text = self.block_text(child);
                let title = self.title();
                match crate::yaml_collection(&text) {
                    Ok(true) => {
                        let position = self.out.pairs.len() as u64;
                        let description = self.description();
                        self.out.pairs.push(Extracted {
                            title,
                            description,
                            reference: normalize_reference(&text),
                            position,
                        });
                    }
                    Ok(false) => self.out.skipped.push(Skipped {
                        title,
                        reason: "yaml scalar".into(),
                        detail: String::new(),
                        first_line: first_line(&text),
                    }),
                    Err(e) => self.out.skipped.push(Skipped {
                        title,
                        reason: "yaml parse error".into(),
                        detail: e,
                        first_line: first_line(&text),
                    }),
                }
                continue;
            }
            if let Some(code) = &self.p.code {
                if code.matches(&child) {
                    let has_yaml =
                        child.descendants().skip(1).filter_map(ElementRef::wrap).any(|d| self.p.yaml.matches(&d));
                    if !has_yaml {
                        let text = self.block_text(child);
                        self.out.skipped.push(Skipped {
                            title: self.title(),
                            reason: "not yaml".into(),
                            detail: block_lang(child),
                            first_line: first_line(&text),
                        });
                        continue;
                    }
                }
            }
            if self.p.prose.matches(&child) {
                let prose = self.own_text(child);
                if !prose.is_empty() {
                    if let Some(h) = self.stack.last_mut() {
                        h.prose.push(prose);
                    }
                }
            }
            self.walk(child, depth + 1);
        }
    }
}

/// The pairs and skipped code blocks of one page (issue 4 §3, `peers/docsite.py`'s `extract`):
/// hidden elements and the profile's removal selectors are dropped; the content root is walked
/// in document order with a stack of open headings (a heading closes those of the same or a
/// deeper level); each prose block (`p`, `li`, `dt`, `dd` by default) contributes its own text
/// (see [`Walker::own_text`]) to the innermost open heading; a YAML block's
/// title is the open headings joined by " - " and its description the prose of every open
/// heading so far, each text once, joined by one space ("." when there is none).
pub fn extract(html: &str, p: &Compiled) -> Extraction {
    match parse(html) {
        Ok(doc) => Extraction { stated: crate::dates::stated(&doc), ..extract_doc(&doc, p) },
        Err(e) => Extraction { error: Some(e), ..Default::default() },
    }
}

/// Elements nested deeper than this make a page unparsed: the HTML parser's scope checks walk its
/// stack of open elements at every tag, so its time grows with the square of the depth (a page of
/// 50,000 nested `<div>`s took 8 s, 200,000 took 161 s). Documentation nests a few dozen deep.
pub const MAX_PARSE_DEPTH: usize = 1024;

/// The document, unless its markup nests deeper than [`MAX_PARSE_DEPTH`] (measured by a linear
/// scan before parsing: start and end tags of elements no other tag closes implicitly).
fn parse(html: &str) -> Result<Html, String> {
    match nesting_depth(html) {
        d if d > MAX_PARSE_DEPTH => {
            Err(format!("markup nested {d} elements deep (over {MAX_PARSE_DEPTH}): not parsed"))
        }
        _ => Ok(Html::parse_document(html)),
    }
}

/// An upper estimate of how deep `html` nests: comments and the text of raw-text elements are
/// skipped; void elements, self-closed tags and elements closed implicitly (`p`, `li`, `td`, …)
/// do not count.
pub fn nesting_depth(html: &str) -> usize {
    const FLAT: &[&str] = &[
        "area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr", "p",
        "li", "dt", "dd", "option", "optgroup", "tr", "td", "th", "tbody", "thead", "tfoot", "colgroup", "caption",
        "rb", "rt", "rtc", "rp", "param", "keygen",
    ];
    let b = html.as_bytes();
    let (mut i, mut depth, mut max) = (0usize, 0usize, 0usize);
    while let Some(off) = b[i..].iter().position(|&c| c == b'<') {
        i += off + 1;
        if b[i..].starts_with(b"!--") {
            i = html[i..].find("-->").map_or(b.len(), |e| i + e + 3);
            continue;
        }
        let close = b.get(i) == Some(&b'/');
        let start = i + usize::from(close);
        let end = start + b[start..].iter().take_while(|c| c.is_ascii_alphanumeric()).count();
        if end == start || !b[start].is_ascii_alphabetic() {
            continue;
        }
        let name = &b[start..end];
        let flat = FLAT.iter().any(|f| f.as_bytes().eq_ignore_ascii_case(name));
        let gt = b[end..].iter().position(|&c| c == b'>').map_or(b.len(), |g| end + g);
        if close {
            if !flat {
                depth = depth.saturating_sub(1);
            }
        } else if !(flat || gt > end && b[gt - 1] == b'/') {
            depth += 1;
            max = max.max(depth);
            const RAW: &[&str] = &["script", "style", "textarea", "title", "xmp", "plaintext"];
            if RAW.iter().any(|r| r.as_bytes().eq_ignore_ascii_case(name)) {
                // Raw text up to its end tag (a script's `"<div>"` strings are not markup), found
                // without copying the rest of the page.
                let mut j = gt.min(b.len());
                i = loop {
                    match b[j..].iter().position(|&c| c == b'<') {
                        None => break b.len(),
                        Some(o) => {
                            let k = j + o;
                            let tag = b.get(k + 2..k + 2 + name.len());
                            if b.get(k + 1) == Some(&b'/') && tag.is_some_and(|t| t.eq_ignore_ascii_case(name)) {
                                break k;
                            }
                            j = k + 1;
                        }
                    }
                };
                continue;
            }
        }
        i = gt.min(b.len());
    }
    max
}

fn extract_doc(doc: &Html, p: &Compiled) -> Extraction {
    let mut w = Walker { p, stack: Vec::new(), out: Extraction::default(), too_deep: false };
    let root = p.content_root.iter().find_map(|s| doc.select(s).next());
    match root {
        Some(root) => w.walk(root, 0),
        None => w.out.error = Some(format!("content root `{}` not found", p.profile.content_root)),
    }
    // YAML blocks elsewhere on the page (a sidebar's, a page without the root) are counted too.
    let inside: std::collections::HashSet<_> = root.iter().flat_map(|r| r.descendants()).map(|n| n.id()).collect();
    let detail = if root.is_some() { String::new() } else { "the page has no content root".to_string() };
    for y in yaml_blocks_in(p, doc.root_element()) {
        if !inside.contains(&y.id()) {
            let text = w.block_text(y);
            w.out.skipped.push(Skipped {
                title: String::new(),
                reason: OUTSIDE_ROOT.into(),
                detail: detail.clone(),
                first_line: first_line(&text),
            });
        }
    }
    w.out
}

/// The YAML blocks of `el`'s subtree (`el` included), without those nested in another one.
fn yaml_blocks_in<'a>(p: &Compiled, el: ElementRef<'a>) -> Vec<ElementRef<'a>> {
    let mut out = Vec::new();
    let mut stack = vec![el];
    while let Some(e) = stack.pop() {
        if p.yaml.matches(&e) {
            out.push(e);
            continue;
        }
        let kids: Vec<ElementRef> = e.children().filter_map(ElementRef::wrap).collect();
        stack.extend(kids.into_iter().rev());
    }
    out
}

/// The page's `<link rel="canonical">` resolved against `base`: the URL its operator calls this
/// page, so variants of one page (`?platform=`, `/index.html`) collapse before they are fetched again.
pub fn canonical(html: &str, base: &Url) -> Option<Url> {
    let doc = parse(html).ok()?;
    let sel = Selector::parse("link[rel][href]").expect("static selector");
    doc.select(&sel)
        .find(|l| {
            l.value()
                .attr("rel")
                .is_some_and(|r| r.split_ascii_whitespace().any(|t| t.eq_ignore_ascii_case("canonical")))
        })
        .and_then(|l| base.join(l.value().attr("href")?.trim()).ok())
}

/// Every link of the page (the whole page: navigation and sidebars lead to more documentation)
/// resolved against `base`: `a[href]` and `<meta http-equiv="refresh">` targets.
pub fn links(html: &str, base: &Url) -> Vec<Url> {
    let Ok(doc) = parse(html) else { return Vec::new() };
    let sel = Selector::parse("a[href], meta[http-equiv]").expect("static selector");
    let mut out = Vec::new();
    // A `<base href>` would change resolution; honour it like a browser does.
    let base = Selector::parse("base[href]")
        .ok()
        .and_then(|s| doc.select(&s).next().and_then(|b| b.value().attr("href")).and_then(|h| base.join(h).ok()))
        .unwrap_or_else(|| base.clone());
    for el in doc.select(&sel) {
        let target = if el.value().name() == "meta" {
            if !el.value().attr("http-equiv").is_some_and(|v| v.eq_ignore_ascii_case("refresh")) {
                continue;
            }
            let content = el.value().attr("content").unwrap_or_default();
            let lower = content.to_ascii_lowercase();
            let Some(at) = lower.find("url=") else { continue };
            content[at + 4..].trim().trim_matches(|c| c == '\'' || c == '"').to_string()
        } else {
            el.value().attr("href").unwrap_or_default().trim().to_string()
        };
        if let Ok(u) = base.join(&target) {
            out.push(u);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Profile;

    fn profile() -> Compiled {
        Profile {
            service: None,
            start_urls: vec!["/".into()],
            allowed_prefixes: vec!["/".into()],
            exclude_paths: vec![],
            keep_query: false,
            sitemap: false,
            content_root: "main".into(),
            remove: vec!["nav".into(), "table".into()],
            yaml_blocks: vec!["pre > code.language-yaml".into()],
            code_blocks: vec!["pre".into()],
            prose_blocks: crate::default_prose_blocks(),
            keep_hidden: vec![],
        }
        .compile()
        .unwrap()
    }

    /// Found by the extraction fuzz (a stray `</div>` closed `.docs-content` early): a list of
    /// roots is tried in its order, so `main` around `.docs-content` is only the fallback.
    #[test]
    fn content_root_alternatives_are_tried_in_order() {
        let p = Profile { content_root: ".docs-content, [data-x=\"a,b\"], main".into(), ..profile().profile }
            .compile()
            .unwrap();
        assert_eq!(p.content_root.len(), 3);
        let yaml = |t: &str| format!("<pre><code class=\"language-yaml\">{t}: 1</code></pre>");
        let html = format!(
            "<main><div class=\"docs-content\"><h1>T</h1>{}</div><h2>Outside</h2>{}</main>",
            yaml("inside"),
            yaml("outside")
        );
        let refs: Vec<String> = extract(&html, &p).pairs.into_iter().map(|x| x.reference).collect();
        assert_eq!(refs, vec!["inside: 1"]);
        let html = format!("<main><h1>T</h1>{}</main>", yaml("fallback"));
        let refs: Vec<String> = extract(&html, &p).pairs.into_iter().map(|x| x.reference).collect();
        assert_eq!(refs, vec!["fallback: 1"]);
    }

    /// Issue 31: a page nested 10,000 `<div>`s deep overflowed the stack (the whole run died);
    /// 200,000 took minutes to parse. Deep markup is now an error of that page, found in linear
    /// time, and markup under the bound is read to [`MAX_DEPTH`] without recursion past it.
    #[test]
    fn deep_nesting_is_an_error_of_the_page_not_a_crash_or_a_stall() {
        let base = Url::parse("https://docs.example.com/x").unwrap();
        for n in [10_000usize, 200_000] {
            let html = format!("<main><h1>T</h1>{}<a href=\"/y\">y</a></main>", "<div>".repeat(n));
            let t = std::time::Instant::now();
            let e = extract(&html, &profile());
            assert!(
                e.error.as_deref().is_some_and(|m| m.contains(&format!("nested {} elements deep", n + 2))),
                "{:?}",
                e.error
            );
            assert!(links(&html, &base).is_empty() && canonical(&html, &base).is_none());
            assert!(t.elapsed() < std::time::Duration::from_secs(1), "{n}: {:?}", t.elapsed());
        }
        let yaml = "<pre><code class=\"language-yaml\">a: 1</code></pre>";
        let html =
            format!("<main><h1>T</h1>{}{yaml}</main><script>'{}'</script>", "<div>".repeat(1000), "<div>".repeat(5000));
        assert_eq!(nesting_depth(&html), 1003);
        let e = extract(&html, &profile());
        assert!(e.pairs.is_empty() && e.skipped.iter().any(|s| s.reason == TOO_DEEP), "{:?}", e.skipped);
        let flat = format!("<main><h1>T</h1>{}{yaml}</main>", "<p>x<li>y<br><img src=a>".repeat(5000));
        assert_eq!(extract(&flat, &profile()).pairs.len(), 1, "implied end tags do not count");
    }

    #[test]
    fn heading_stack_and_description() {
        let html = r#"<main><h1>Top</h1><p>Intro <code>on</code>  text.</p>
            <h2>A</h2><p>About A.</p><ul><li>item</li></ul>
            <pre><code class="language-yaml">a: 1
</code></pre>
            <h3>A.1</h3><p>About A.</p><p>Deeper.</p>
            <pre><code class="language-yaml">- x</code></pre>
            <h2>B</h2><nav><h2>Contents</h2><p>toc</p></nav><table><tr><td><p>cell</p></td></tr></table>
            <pre><code class="language-yaml">plain scalar</code></pre>
            <pre><code class="language-shell">echo hi</code></pre>
            <pre><code class="language-yaml">b: [</code></pre>
            <div hidden><pre><code class="language-yaml">h: 1</code></pre></div>
            <h4>C</h4><pre><code class="language-yaml">c: 3</code></pre></main>"#;
        let e = extract(html, &profile());
        let got: Vec<(&str, &str, &str)> =
            e.pairs.iter().map(|p| (p.title.as_str(), p.description.as_str(), p.reference.as_str())).collect();
        assert_eq!(
            got,
            vec![
                ("Top - A", "Intro on text. About A. item", "a: 1"),
                ("Top - A - A.1", "Intro on text. About A. item Deeper.", "- x"),
                ("Top - B - C", "Intro on text.", "c: 3"),
            ]
        );
        let reasons: Vec<&str> = e.skipped.iter().map(|s| s.reason.as_str()).collect();
        assert_eq!(reasons, vec!["yaml scalar", "not yaml", "yaml parse error", HIDDEN]);
        assert_eq!(e.skipped[1].detail, "shell");
    }

    /// Issue 30: every YAML block of a page is a pair or a skipped block that says why, the
    /// profile rule that removed it included.
    #[test]
    fn no_yaml_block_is_dropped_in_silence() {
        let html = r#"<html><body><aside><pre><code class="language-yaml">side: 1</code></pre></aside>
            <main><h1>T</h1><nav><pre><code class="language-yaml">in_nav: 1</code></pre></nav>
            <table><tr><td><pre><code class="language-yaml">a: 1</code></pre><pre><code class="language-yaml">b: 2</code></pre></td></tr></table>
            <pre><code class="language-yaml">kept: 1</code></pre></main></body></html>"#;
        let e = extract(html, &profile());
        assert_eq!(e.pairs.len(), 1);
        let got: Vec<(&str, &str, &str)> =
            e.skipped.iter().map(|s| (s.reason.as_str(), s.detail.as_str(), s.first_line.as_str())).collect();
        assert_eq!(
            got,
            vec![
                (REMOVED_BY_RULE, "nav", "in_nav: 1"),
                (REMOVED_BY_RULE, "table", "a: 1"),
                (REMOVED_BY_RULE, "table", "b: 2"),
                (OUTSIDE_ROOT, "", "side: 1"),
            ]
        );
        // A page without the content root: every block says so.
        let e = extract("<div><pre><code class=\"language-yaml\">x: 1</code></pre></div>", &profile());
        assert!(e.error.is_some());
        assert_eq!(e.skipped.len(), 1);
        assert_eq!(
            (e.skipped[0].reason.as_str(), e.skipped[0].detail.as_str()),
            (OUTSIDE_ROOT, "the page has no content root")
        );
    }

    fn pairs(html: &str, p: &Compiled) -> Vec<(String, String, String)> {
        extract(html, p).pairs.into_iter().map(|p| (p.title, p.description, p.reference)).collect()
    }

    fn own(title: &str, description: &str, reference: &str) -> (String, String, String) {
        (title.into(), description.into(), reference.into())
    }

    /// Issue 11: a step's YAML must not land in its own description, nor nested `p` text twice.
    #[test]
    fn code_in_a_list_item_is_not_its_prose() {
        let html = r#"<main><h1>Travis</h1><ol>
            <li><p>Add the following to <code>.travis.yml</code>:</p>
              <div class="highlight"><pre><code class="language-yaml">language: ruby
rvm: 3.2</code></pre></div></li>
            <li>Then push, see <a href="/x">the build</a>.<pre><code class="language-yaml">script: rake</code></pre>And wait.</li>
          </ol></main>"#;
        assert_eq!(
            pairs(html, &profile()),
            vec![
                own("Travis", "Add the following to .travis.yml:", "language: ruby\nrvm: 3.2"),
                own("Travis", "Add the following to .travis.yml: Then push, see the build. And wait.", "script: rake"),
            ]
        );
    }

    #[test]
    fn nested_lists_are_separate_blocks() {
        let html = r#"<main><h2>Jobs</h2><ul><li>Outer item
              <ul><li>Inner <em>one</em></li><li><p>Inner two</p></li></ul>
              outer tail</li></ul>
            <pre><code class="language-yaml">jobs: {}</code></pre></main>"#;
        assert_eq!(pairs(html, &profile()), vec![own("Jobs", "Outer item outer tail Inner one Inner two", "jobs: {}")]);
    }

    #[test]
    fn definition_lists_give_terms_and_definitions() {
        let html = r#"<main><h2>Keys</h2><dl><dt><code>image</code></dt><dd>The Docker image.
              <pre><code class="language-yaml">image: ruby:3</code></pre></dd>
            <dt>services</dt><dd><p>Extra containers.</p></dd></dl>
            <pre><code class="language-yaml">services: [postgres]</code></pre></main>"#;
        assert_eq!(
            pairs(html, &profile()),
            vec![
                own("Keys", "image The Docker image.", "image: ruby:3"),
                own("Keys", "image The Docker image. services Extra containers.", "services: [postgres]"),
            ]
        );
    }

    /// Every tab panel is an example, although a browser shows one at a time.
    #[test]
    fn hidden_tab_panels_are_kept_when_the_profile_says_so() {
        let html = r#"<main><h2>Cache</h2><div class="tabs">
            <div role="tabpanel"><p>On Linux:</p><pre><code class="language-yaml">a: linux</code></pre></div>
            <div role="tabpanel" hidden><p>On macOS:</p><pre><code class="language-yaml">a: mac</code></pre></div>
            <div role="tabpanel" style="display: none"><pre><code class="language-yaml">a: win</code></pre></div>
            </div><div hidden><pre><code class="language-yaml">cookie: 1</code></pre></div></main>"#;
        let plain: Vec<String> = pairs(html, &profile()).into_iter().map(|p| p.2).collect();
        assert_eq!(plain, vec!["a: linux"]);
        let mut tabs = profile().profile;
        tabs.keep_hidden = vec!["[role=tabpanel]".into()];
        let got: Vec<String> = pairs(html, &tabs.compile().unwrap()).into_iter().map(|p| p.2).collect();
        assert_eq!(got, vec!["a: linux", "a: mac", "a: win"]);
    }

    /// Asciidoctor admonitions put a one-paragraph note straight into a table cell; callout markers
    /// sit inside the code and must not reach the reference.
    #[test]
    fn admonitions_and_callouts() {
        let mut p = profile().profile;
        p.remove = vec![".conum".into(), ".conum + b".into(), "td.icon".into()];
        p.prose_blocks.push(".admonitionblock td.content".into());
        p.prose_blocks.push(".colist td".into());
        let html = r#"<main><h2>Orbs</h2>
            <div class="admonitionblock note"><table><tr><td class="icon"><div class="title">Note</div></td>
              <td class="content">Orbs need a <code>version: 2.1</code> config.</td></tr></table></div>
            <div class="admonitionblock tip"><table><tr><td class="icon">Tip</td>
              <td class="content"><div class="paragraph"><p>Pin the orb.</p></div></td></tr></table></div>
            <div class="listingblock"><pre><code class="language-yaml">version: 2.1 <i class="conum" data-value="1"></i><b>(1)</b>
orbs:
  node: circleci/node@5 <i class="conum" data-value="2"></i><b>(2)</b></code></pre></div>
            <div class="colist arabic"><table><tr><td><i class="conum" data-value="1"></i><b>1</b></td><td>The version.</td></tr></table></div>
            <pre><code class="language-yaml">b: 2</code></pre></main>"#;
        assert_eq!(
            pairs(html, &p.compile().unwrap()),
            vec![
                own(
                    "Orbs",
                    "Orbs need a version: 2.1 config. Pin the orb.",
                    "version: 2.1\norbs:\n  node: circleci/node@5"
                ),
                own("Orbs", "Orbs need a version: 2.1 config. Pin the orb. The version.", "b: 2"),
            ]
        );
    }

    /// Callouts in the GitHub docs' sense: alert boxes whose paragraphs are prose like any other.
    #[test]
    fn alerts_are_prose_once() {
        let html = r#"<main><h2>Secrets</h2><div class="ghd-alert" data-container="alert"><p><span>Note</span></p>
            <p>Secrets are not passed to forks.</p></div>
            <ul><li><p>Step one.</p><p>Step one.</p></li></ul>
            <pre><code class="language-yaml">env: {}</code></pre></main>"#;
        assert_eq!(
            pairs(html, &profile()),
            vec![own("Secrets", "Note Secrets are not passed to forks. Step one.", "env: {}")]
        );
    }

    #[test]
    fn no_prose_gives_a_dot_and_missing_root_is_an_error() {
        let e = extract("<main><h1>T</h1><pre><code class=\"language-yaml\">a: 1</code></pre></main>", &profile());
        assert_eq!(e.pairs[0].description, ".");
        let e = extract("<div>nothing</div>", &profile());
        assert!(e.error.unwrap().contains("content root `main`"));
    }

    #[test]
    fn the_canonical_link() {
        let base = Url::parse("http://h.test/docs/a/?platform=mac").unwrap();
        let html = r#"<head><link rel="alternate" href="/ja/a/"><link rel="Canonical" href="/docs/a/"></head>"#;
        assert_eq!(canonical(html, &base).unwrap().as_str(), "http://h.test/docs/a/");
        assert_eq!(canonical("<p>none</p>", &base), None);
    }

    #[test]
    fn links_include_meta_refresh_and_resolve_relative() {
        let base = Url::parse("http://h.test/a/b.html").unwrap();
        let html = r#"<head><meta http-equiv="refresh" content="0; url=c.html"></head><a href="../x.html#f">x</a><a href="mailto:a@example.com">m</a>"#;
        let l: Vec<String> = links(html, &base).into_iter().map(|u| u.to_string()).collect();
        assert_eq!(l, vec!["http://h.test/a/c.html", "http://h.test/x.html#f", "mailto:a@example.com"]);
    }
}
