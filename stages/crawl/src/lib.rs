//! Crawl logic with no I/O: site profiles, URL scope and normalisation, robots.txt, page
//! decoding, link discovery, the study's section → pair extraction, and the rows a crawl's
//! pages become (`rows`: the canonical choice, pairs and code blocks, the re-crawl window).
//!
//! Owns: what a profile selects and how a page becomes pairs. Never touches the network, a
//! browser or the warehouse.
//!
//! The engine fetches pages (HTTP or a browser) and calls into this crate; everything here is a
//! function of its arguments, so the golden test can run it over the bundled site's files.
//! `peers/docsite.py` is the Python reference of [`extract`]; the two must agree pair for pair.

mod builtin;
pub mod dates;
mod extract;
mod robots;
pub mod rows;
mod urls;

pub use builtin::{builtin, names as builtin_names, with_overrides};
pub use extract::{canonical, extract, links, Extracted, Extraction, Skipped, HIDDEN, OUTSIDE_ROOT, REMOVED_BY_RULE};
pub use robots::Robots;
pub use urls::{decode_page, in_scope, normalize, Scope};

use scraper::Selector;
use serde::{Deserialize, Serialize};

/// A site profile (`[profiles.NAME]` of pipeline.toml): where a crawl starts, what it may
/// follow and how its markup marks content, chrome and YAML. Real sites differ; the profile,
/// not code, says which markup is which.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Profile {
    /// Informational: which service this markup documents (sources name the service).
    #[serde(default)]
    pub service: Option<String>,
    /// Paths (or absolute URLs) resolved against the source's origin.
    pub start_urls: Vec<String>,
    /// URL path prefixes the crawl may follow; everything else is never requested.
    pub allowed_prefixes: Vec<String>,
    /// Paths containing any of these are never requested, even under an allowed prefix (another
    /// version's archive, a Markdown twin of each page, an admin section).
    #[serde(default)]
    pub exclude_paths: Vec<String>,
    /// Keep query strings when normalising URLs (dropped by default: `?ref=sidebar` is one page).
    #[serde(default)]
    pub keep_query: bool,
    /// Also start from the URLs of the site's `/sitemap.xml` that are in scope.
    #[serde(default)]
    pub sitemap: bool,
    /// The element holding the documentation text. A comma-separated list is tried in its order,
    /// a fallback for pages of another layout: the first match of the first alternative that
    /// matches (not the first element matching any, which would be an enclosing `main` before the
    /// `.docs-content` a list names first).
    pub content_root: String,
    /// Removed before extraction, matched against the whole document.
    #[serde(default)]
    pub remove: Vec<String>,
    /// Nodes whose text content is a candidate YAML reference.
    pub yaml_blocks: Vec<String>,
    /// Code nodes without a YAML block inside: skipped and counted.
    #[serde(default)]
    pub code_blocks: Vec<String>,
    /// Prose blocks: each contributes its own text to the description (nested blocks, code, lists
    /// and tables excluded). Admonitions whose text sits in a table cell need their cell here.
    #[serde(default = "default_prose_blocks")]
    pub prose_blocks: Vec<String>,
    /// Kept even when hidden (`hidden`, `display:none`): tab panels and platform switchers, whose
    /// every panel is an example although a browser shows one at a time.
    #[serde(default)]
    pub keep_hidden: Vec<String>,
}

/// What of a profile the crawl itself reads: which URLs are in scope and where to start. The rest
/// (content root, selectors) is extraction's, so changing it re-extracts cached pages and never
/// re-crawls.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Reach {
    pub start_urls: Vec<String>,
    pub allowed_prefixes: Vec<String>,
    pub exclude_paths: Vec<String>,
    pub keep_query: bool,
    pub sitemap: bool,
}

impl Profile {
    pub fn reach(&self) -> Reach {
        Reach {
            start_urls: self.start_urls.clone(),
            allowed_prefixes: self.allowed_prefixes.clone(),
            exclude_paths: self.exclude_paths.clone(),
            keep_query: self.keep_query,
            sitemap: self.sitemap,
        }
    }
}

pub fn default_prose_blocks() -> Vec<String> {
    ["p", "li", "dt", "dd"].map(String::from).to_vec()
}

/// A profile with its selectors parsed.
pub struct Compiled {
    pub profile: Profile,
    /// The alternatives of `content_root`, in its order.
    pub(crate) content_root: Vec<Selector>,
    pub(crate) remove: Option<Selector>,
    /// Each `remove` rule alone, to name the one that dropped a YAML block.
    pub(crate) remove_rules: Vec<(String, Selector)>,
    pub(crate) yaml: Selector,
    pub(crate) code: Option<Selector>,
    pub(crate) prose: Selector,
    pub(crate) keep: Option<Selector>,
}

/// A profile that cannot be used: the key and what is wrong with its value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ProfileError(pub String);

/// A selector list split at its top-level commas (not those inside brackets, parentheses or quotes).
fn alternatives(list: &str) -> Vec<String> {
    let (mut out, mut cur, mut depth, mut quote) = (Vec::new(), String::new(), 0i32, None);
    for c in list.chars() {
        match (quote, c) {
            (Some(q), _) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '"' | '\'') => quote = Some(c),
            (None, '(' | '[') => depth += 1,
            (None, ')' | ']') => depth -= 1,
            (None, ',') if depth == 0 => {
                out.push(std::mem::take(&mut cur).trim().to_string());
                continue;
            }
            _ => {}
        }
        cur.push(c);
    }
    out.push(cur.trim().to_string());
    out
}

impl Profile {
    /// Parses every selector; the error names the key and the selector.
    pub fn compile(&self) -> Result<Compiled, ProfileError> {
        self.compile_selectors().map_err(ProfileError)
    }

    fn compile_selectors(&self) -> Result<Compiled, String> {
        fn sel(key: &str, list: &[String]) -> Result<Option<Selector>, String> {
            if list.is_empty() {
                return Ok(None);
            }
            for s in list {
                Selector::parse(s).map_err(|e| format!("`{key}`: invalid CSS selector `{s}`: {e}"))?;
            }
            Ok(Some(Selector::parse(&list.join(", ")).map_err(|e| format!("`{key}`: {e}"))?))
        }
        if self.start_urls.is_empty() {
            return Err("`start_urls`: at least one start URL is needed".into());
        }
        if self.allowed_prefixes.is_empty() {
            return Err("`allowed_prefixes`: at least one prefix is needed".into());
        }
        if self.yaml_blocks.is_empty() {
            return Err("`yaml_blocks`: at least one selector is needed".into());
        }
        Ok(Compiled {
            profile: self.clone(),
            content_root: alternatives(&self.content_root)
                .into_iter()
                .map(|a| Ok(sel("content_root", &[a])?.expect("one selector")))
                .collect::<Result<_, String>>()?,
            remove: sel("remove", &self.remove)?,
            remove_rules: self
                .remove
                .iter()
                .map(|r| Ok((r.clone(), sel("remove", std::slice::from_ref(r))?.expect("one selector"))))
                .collect::<Result<_, String>>()?,
            yaml: sel("yaml_blocks", &self.yaml_blocks)?.expect("checked non-empty"),
            code: sel("code_blocks", &self.code_blocks)?,
            prose: sel("prose_blocks", &self.prose_blocks)?.ok_or("`prose_blocks`: at least one selector is needed")?,
            keep: sel("keep_hidden", &self.keep_hidden)?,
        })
    }
}

/// Does `text` load (YAML 1.2, as the study's ruamel loader) as a mapping or a sequence?
/// `Err` carries the parse error; `Ok(false)` is a scalar.
pub(crate) fn yaml_collection(text: &str) -> Result<bool, String> {
    let opts = doc2ci_yaml::Options { timestamps_as_strings: false, gitlab_reference_tag: true };
    match doc2ci_yaml::load_with(text, &doc2ci_yaml::Limits::default(), &opts) {
        Ok(v) => Ok(v.is_mapping() || v.is_sequence()),
        Err(e) => Err(e.to_string()),
    }
}
