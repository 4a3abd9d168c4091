//! The service registry: one file per service (its documented equivalences, its fragment shapes,
//! where its jobs live) plus one line in the `registry!` list below.

use std::collections::BTreeMap;

use doc2ci_yaml::{Map, Value};

use crate::node::{key, Node};
use crate::Shape;

/// One documented equivalence: what it collapses and the page or schema that says so.
#[derive(Debug, Clone, Copy)]
pub struct Rule {
    /// Short id, counted in [`crate::Canon::applied`].
    pub name: &'static str,
    /// What is equal to what.
    pub says: &'static str,
    /// The documentation page (or schema) that makes it so.
    pub source: &'static str,
}

/// Everything doc2ci knows about what one service's files mean.
pub struct Service {
    /// The partition name (`github-actions` …), as in the warehouse and `pipeline.toml`.
    pub name: &'static str,
    /// Its name for people (tables, notes).
    pub display: &'static str,
    /// Where `doc2ci setup` unpacks its JSON Schema (relative to the assets folder).
    pub schema_asset: &'static str,
    /// Whether the schema check reads YAML's `!reference` tag as GitLab does (check-jsonschema's
    /// GitLab mode).
    pub gitlab_reference_tag: bool,
    /// The lint tools that check its files (their `tool` names, in the order a partition's rows
    /// are written): its own validator first, then audits. The tools themselves are the engine's
    /// (`src/linters`), whose test holds each to exactly one service.
    pub lint_tools: &'static [&'static str],
    /// The names an author chooses in its files, which the contamination screen's never-published
    /// twin renames.
    pub author_ids: AuthorIds,
    /// Its official documentation: the licence of what a crawl takes from it, and the built-in
    /// crawl profile for its markup.
    pub docs: Docs,
    /// Whether a mapping is a whole file rather than a fragment of one (the validate stage's rule).
    pub standalone: fn(&Map) -> bool,
    /// Which fragment a non-standalone document is; None when no completion rule covers it.
    pub fragment: fn(&Value) -> Option<Shape>,
    /// A fragment of `shape` placed where it sits in a whole file.
    pub lift: fn(Shape, Node) -> Node,
    /// The text around a fragment of `shape` (loaded as `value`) that makes the smallest whole file
    /// holding it verbatim, for the lint stage; None where the service has no rule for the shape.
    pub complete: fn(Shape, &Value) -> Option<Wrap>,
    /// Where the jobs of a whole file are: mapping keys whose names do not decide containment.
    pub jobs: Jobs,
    /// Keys whose empty mapping is a value of its own, held only by an empty mapping; elsewhere an
    /// empty mapping means "no settings" and any mapping holds it (`- checkout: {}`).
    pub empty_is_a_value: &'static [&'static str],
    /// The documented spellings of a whole-file tree collapsed, each rewrite counted by rule.
    pub canonicalize: fn(&mut Node, &mut Applied),
    /// The rules `canonicalize` applies, for people and for the tests that each is documented.
    pub rules: &'static [Rule],
    /// Every key its configuration spec lets a file write as one value or as a list of such values,
    /// and what canonical form makes of it: a test walks the pinned schema and holds this table to
    /// it, so a shorthand of the spec is either a rule or a named exclusion, never unmet.
    pub shorthands: &'static [Shorthand],
}

/// A key the spec accepts as a value or a list of values (`os: linux`, `os: [linux]`).
#[derive(Debug, Clone, Copy)]
pub struct Shorthand {
    /// The key, as the schema's property names it (wherever it sits).
    pub key: &'static str,
    pub is: Treated,
}

/// What canonical form makes of a shorthand.
#[derive(Debug, Clone, Copy)]
pub enum Treated {
    /// This rule of the service's `rules` makes the two spellings one.
    Rule(&'static str),
    /// Left as written, and why: the spellings mean different things, or the key sits where no
    /// rule of the study reads it (each reason says which).
    Excluded(&'static str),
}

/// A fragment's completion: `head`, the fragment's lines each indented by `indent` spaces, then
/// `tail`. Synthetic names say who wrote what: the job holding the fragment is
/// [`crate::FRAGMENT_JOB`], a stub the completion adds is [`WRAPPER_JOB`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Wrap {
    /// The rule's name (the shape's, [`Shape::rule`]).
    pub rule: &'static str,
    pub head: String,
    pub indent: u32,
    pub tail: String,
}

impl Wrap {
    pub(crate) fn new(shape: Shape, head: impl Into<String>, indent: u32, tail: impl Into<String>) -> Wrap {
        Wrap { rule: shape.rule(), head: head.into(), indent, tail: tail.into() }
    }
}

/// The name of a stub job a completion adds (findings naming it are the wrapper's).
pub const WRAPPER_JOB: &str = "doc2ci-wrapper";

impl std::fmt::Debug for Service {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name)
    }
}

/// Where a file holds names its author chose (jobs, workflows, commands, stages) rather than the
/// service's keywords: a never-published twin of a documented example renames exactly these, so
/// the twin means the same while no model can have read it.
#[derive(Debug, Clone, Copy)]
pub struct AuthorIds {
    /// Top-level keys whose mapping's keys are such names (`jobs`).
    pub keys_under: &'static [&'static str],
    /// Top-level keys whose list's items are such names (GitLab CI's `stages`).
    pub items_under: &'static [&'static str],
    /// Whether a top-level key is itself such a name (GitLab CI's jobs).
    pub top_level: fn(&str) -> bool,
}

/// A service's official documentation site as the crawl stage reads it: `profile = "NAME"` in
/// `pipeline.toml` without a `[profiles]` table (the crawl crate's `builtin`). Each profile is
/// written for the markup the site's own renderer produces (the evidence is the crawl crate's
/// `PROFILES.md`); the fields are the crawl profile's keys.
#[derive(Debug, Clone, Copy)]
pub struct Docs {
    /// The built-in profile's name (`github-docs` …).
    pub profile: &'static str,
    /// The licence of the site's content, as the release's datasheet states it.
    pub licence: &'static str,
    pub start_urls: &'static [&'static str],
    pub allowed_prefixes: &'static [&'static str],
    pub exclude_paths: &'static [&'static str],
    pub keep_query: bool,
    pub sitemap: bool,
    pub content_root: &'static str,
    pub remove: &'static [&'static str],
    pub yaml_blocks: &'static [&'static str],
    pub code_blocks: &'static [&'static str],
    /// Prose blocks beyond every profile's paragraphs, list items and definitions (the site's
    /// admonitions, tab titles, block captions).
    pub more_prose_blocks: &'static [&'static str],
    pub keep_hidden: &'static [&'static str],
}

/// Where a whole file keeps its jobs.
#[derive(Debug, Clone, Copy)]
pub enum Jobs {
    /// In a mapping under this top-level key (`jobs`).
    Under(&'static str),
    /// At the top level, every key but these keywords (GitLab CI).
    TopLevelExcept(&'static [&'static str]),
    None,
}

/// The rules' rewrites of one canonicalisation: how often each rewrote something, and the one rule
/// left out, if any (to find which rules an equality needs).
#[derive(Debug, Clone, Default)]
pub struct Applied {
    counts: BTreeMap<&'static str, usize>,
    off: Option<&'static str>,
}

impl Applied {
    /// Every rule but `rule`.
    pub fn without(rule: &'static str) -> Applied {
        Applied { counts: BTreeMap::new(), off: Some(rule) }
    }

    /// Whether `rule` may rewrite now; counts the rewrite when it may.
    pub fn apply(&mut self, rule: &'static str) -> bool {
        if self.off == Some(rule) {
            return false;
        }
        *self.counts.entry(rule).or_default() += 1;
        true
    }

    /// How often each rule rewrote something.
    pub fn counts(&self) -> &BTreeMap<&'static str, usize> {
        &self.counts
    }

    fn on(&self, rule: &'static str) -> bool {
        self.off != Some(rule)
    }
}

// Each service's file, declared where rustfmt sees it (a `mod` inside a macro is invisible to
// `cargo fmt`, rustfmt#3253); [`registry!`] lists them in the study's order (a file here and not
// there fails the test below).
pub mod circleci;
pub mod github_actions;
pub mod gitlab_ci;
pub mod travis_ci;

/// Lists each service in [`SERVICES`]: one line per service.
macro_rules! registry {
    ($($service:ident),* $(,)?) => {
        /// Every service, in the study's order.
        pub const SERVICES: &[&Service] = &[$(&$service::SERVICE),*];

        /// The file (module) of each service, for the test that every file is registered.
        #[cfg(test)]
        const FILES: &[&str] = &[$(stringify!($service)),*];
    };
}

registry! {
    github_actions,
    circleci,
    gitlab_ci,
    travis_ci,
}

/// The service of a partition name.
pub fn service(name: &str) -> Option<&'static Service> {
    SERVICES.iter().copied().find(|s| s.name == name)
}

// Helpers the service files share.

/// A scalar where a list is allowed becomes the one-item list it stands for.
pub(crate) fn one_item_list(n: &mut Node, applied: &mut Applied, rule: &'static str) {
    if n.is_scalar() && !matches!(n, Node::Null) && applied.apply(rule) {
        *n = Node::Seq(vec![std::mem::replace(n, Node::Null)]);
    }
}

/// Every scalar value of a mapping as the string the program receives.
pub(crate) fn values_as_strings(n: &mut Node, applied: &mut Applied, rule: &'static str) {
    let Some(m) = n.as_map_mut() else { return };
    for v in m.values_mut() {
        if !matches!(v, Node::Str(_)) {
            if let Some(s) = v.runner_string() {
                if applied.apply(rule) {
                    *v = Node::Str(s);
                }
            }
        }
    }
}

/// Fills in a documented default the mapping leaves out; a written default is counted as a use
/// of the rule (a spelling the rule makes equal to leaving it out).
pub(crate) fn default_of(n: &mut Node, k: &str, default: Node, applied: &mut Applied, rule: &'static str) {
    let Some(m) = n.as_map_mut() else { return };
    if !applied.on(rule) {
        return;
    }
    match m.get(&key(k)) {
        None => {
            m.insert(key(k), Node::Default(Box::new(default)));
        }
        Some(v) if *v == default => {
            applied.apply(rule);
        }
        Some(_) => {}
    }
}

/// Shell text as the shell reads it: trailing whitespace of each line and trailing blank lines
/// change nothing (a block scalar's `|` against `|-`, a space before the newline).
pub(crate) fn trim_shell(n: &mut Node, applied: &mut Applied, rule: &'static str) {
    let Node::Str(s) = n else { return };
    let trimmed: String = s.lines().map(str::trim_end).collect::<Vec<_>>().join("\n").trim_end().to_string();
    if trimmed != *s && applied.apply(rule) {
        *s = trimmed;
    }
}

/// The mapping entries under `k`, when it is a mapping.
pub(crate) fn entries_mut<'a>(n: &'a mut Node, k: &str) -> impl Iterator<Item = &'a mut Node> {
    n.get_mut(k).and_then(Node::as_map_mut).into_iter().flat_map(|m| m.values_mut())
}

/// The items under `k`, when it is a sequence.
pub(crate) fn items_mut<'a>(n: &'a mut Node, k: &str) -> impl Iterator<Item = &'a mut Node> {
    n.get_mut(k)
        .and_then(|v| match v {
            Node::Seq(s) => Some(s),
            _ => None,
        })
        .into_iter()
        .flat_map(|s| s.iter_mut())
}

/// `{k: node}`.
pub(crate) fn under(k: &str, node: Node) -> Node {
    Node::Map([(key(k), node)].into_iter().collect())
}

pub(crate) fn keys(m: &Map) -> Vec<&str> {
    m.keys().map(|k| k.scalar_text().unwrap_or("")).collect()
}

pub(crate) fn all_in(m: &Map, set: &[&str]) -> bool {
    keys(m).iter().all(|k| set.contains(k))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_service_is_named_once_and_every_rule_cites_its_source() {
        let names: Vec<&str> = SERVICES.iter().map(|s| s.name).collect();
        assert_eq!(names, ["github-actions", "circleci", "gitlab-ci", "travis-ci"]);
        let profiles: std::collections::BTreeSet<&str> = SERVICES.iter().map(|s| s.docs.profile).collect();
        assert_eq!(profiles.len(), SERVICES.len(), "each service's crawl profile has a name of its own");
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/services");
        let (on_disk, listed) = doc2ci_testkit::registry_files(&dir, FILES);
        assert_eq!(on_disk, listed, "every file of src/services is a registered service");
        for s in SERVICES {
            // A service's file is named after it, and so is its schema.
            assert!(FILES.contains(&s.name.replace('-', "_").as_str()), "{}: no file of that name", s.name);
            assert_eq!(s.schema_asset, format!("schemas/{}.json", s.name));
            assert!(!s.display.is_empty());
            assert!(!s.docs.licence.is_empty(), "{}: its documentation's licence", s.name);
            for u in s.docs.start_urls {
                let under = s.docs.allowed_prefixes.iter().any(|p| u.starts_with(p));
                assert!(under, "{}: the crawl's start {u} is outside its allowed prefixes", s.name);
            }
            let mut seen = std::collections::BTreeSet::new();
            for r in s.rules {
                assert!(seen.insert(r.name), "{}: rule {} listed twice", s.name, r.name);
                assert!(r.source.starts_with("https://"), "{}: rule {} cites no page", s.name, r.name);
                assert!(!r.says.is_empty() && !r.says.contains('\n'), "{}: {} says one line", s.name, r.name);
            }
            let mut keys = std::collections::BTreeSet::new();
            for h in s.shorthands {
                assert!(keys.insert(h.key), "{}: shorthand {} listed twice", s.name, h.key);
                match h.is {
                    Treated::Rule(r) => {
                        assert!(s.rules.iter().any(|x| x.name == r), "{}: {}: no rule {r}", s.name, h.key)
                    }
                    Treated::Excluded(why) => assert!(why.len() > 20, "{}: {}: say why", s.name, h.key),
                }
            }
        }
    }
}
