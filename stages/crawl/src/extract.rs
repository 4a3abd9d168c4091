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

/// A code block that did not become a pair, and why.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Skipped {
    pub title: String,
    /// `not yaml`, `yaml scalar` or `yaml parse error` (the golden notes' words).
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

fn text_of(el: ElementRef) -> String {
    el.text().collect()
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
}

impl Walker<'_> {
    fn removed(&self, el: ElementRef) -> bool {
        is_hidden(el) || self.p.remove.as_ref().is_some_and(|s| s.matches(&el))
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

    fn walk(&mut self, node: ElementRef) {
        for child in node.children().filter_map(ElementRef::wrap) {
            if self.removed(child) {
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
                self.stack.push(Heading { level, text: collapse(&text_of(child)), prose: Vec::new() });
                continue;
            }
            if self.p.yaml.matches(&child) {
                let text = text_of(child);
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
                        let text = text_of(child);
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
            if matches!(name, "p" | "li") {
                let prose = collapse(&text_of(child));
                if !prose.is_empty() {
                    if let Some(h) = self.stack.last_mut() {
                        h.prose.push(prose);
                    }
                }
            }
            self.walk(child);
        }
    }
}

/// The pairs and skipped code blocks of one page (issue 4 §3, `docsite/check.py`'s `extract`):
/// hidden elements and the profile's removal selectors are dropped; the content root is walked
/// in document order with a stack of open headings (a heading closes those of the same or a
/// deeper level); `p` and `li` texts are prose of the innermost open heading; a YAML block's
/// title is the open headings joined by " - " and its description the prose of every open
/// heading so far, each text once, joined by one space ("." when there is none).
pub fn extract(html: &str, p: &Compiled) -> Extraction {
    let doc = Html::parse_document(html);
    extract_doc(&doc, p)
}

fn extract_doc(doc: &Html, p: &Compiled) -> Extraction {
    let Some(root) = doc.select(&p.content_root).next() else {
        return Extraction {
            error: Some(format!("content root `{}` not found", p.profile.content_root)),
            ..Default::default()
        };
    };
    let mut w = Walker { p, stack: Vec::new(), out: Extraction::default() };
    w.walk(root);
    w.out
}

/// Every link of the page (the whole page: navigation and sidebars lead to more documentation)
/// resolved against `base`: `a[href]` and `<meta http-equiv="refresh">` targets.
pub fn links(html: &str, base: &Url) -> Vec<Url> {
    let doc = Html::parse_document(html);
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
            keep_query: false,
            content_root: "main".into(),
            remove: vec!["nav".into(), "table".into()],
            yaml_blocks: vec!["pre > code.language-yaml".into()],
            code_blocks: vec!["pre".into()],
        }
        .compile()
        .unwrap()
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
        assert_eq!(reasons, vec!["yaml scalar", "not yaml", "yaml parse error"]);
        assert_eq!(e.skipped[1].detail, "shell");
    }

    #[test]
    fn no_prose_gives_a_dot_and_missing_root_is_an_error() {
        let e = extract("<main><h1>T</h1><pre><code class=\"language-yaml\">a: 1</code></pre></main>", &profile());
        assert_eq!(e.pairs[0].description, ".");
        let e = extract("<div>nothing</div>", &profile());
        assert!(e.error.unwrap().contains("content root `main`"));
    }

    #[test]
    fn links_include_meta_refresh_and_resolve_relative() {
        let base = Url::parse("http://h.test/a/b.html").unwrap();
        let html = r#"<head><meta http-equiv="refresh" content="0; url=c.html"></head><a href="../x.html#f">x</a><a href="mailto:a@example.com">m</a>"#;
        let l: Vec<String> = links(html, &base).into_iter().map(|u| u.to_string()).collect();
        assert_eq!(l, vec!["http://h.test/a/c.html", "http://h.test/x.html#f", "mailto:a@example.com"]);
    }
}
