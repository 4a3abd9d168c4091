//! Built-in profiles for the four official documentation sites (issue 11), so a first crawl needs
//! no study of any site's markup: `profile = "github-docs"` and so on, or a user profile with
//! `base = "travis-docs"` that overrides single keys (the URL scope of a mirror, a local copy or an
//! archived snapshot served under another path).
//!
//! Each profile was derived from the site's own renderer, not from a rendered copy, and is written
//! for the markup that renderer produces (see `PROFILES.md` beside this file for the evidence):
//! - `github-docs`: docs.github.com, `github/docs` (Next.js; unified/rehype: `code-header`,
//!   `annotate`, `alerts`, Liquid `{% mac %}` tool switchers).
//! - `gitlab-docs`: docs.gitlab.com, the `doc/` folder of GitLab rendered by its Hugo site (and the
//!   earlier Nanoc/kramdown site, whose markup older snapshots have).
//! - `circleci-docs`: circleci.com/docs, `circleci/circleci-docs` (Antora 3, Asciidoctor, Shiki,
//!   Asciidoctor Tabs).
//! - `travis-docs`: docs.travis-ci.com, `travis-ci/docs-travis-ci-com` (Jekyll, kramdown + Rouge).

use serde_json::Value;

use crate::Profile;

/// The names `profile = "…"` accepts without a `[profiles]` table.
pub const BUILTIN: &[&str] = &["github-docs", "gitlab-docs", "circleci-docs", "travis-docs"];

fn list(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

/// What a documentation site wraps each page's content in (navigation, side bars, footers,
/// buttons, icons), then `extra`: the site's own.
fn chrome(extra: &[&str]) -> Vec<String> {
    list(&[&["nav", "aside", "footer", "button", "svg"], extra].concat())
}

/// A built-in profile by name.
pub fn builtin(name: &str) -> Option<Profile> {
    let mut prose = crate::default_prose_blocks();
    let p = match name {
        // The Actions part of the free-pro-team docs in English: other languages (`/ja/`, …) and
        // versions (`/en/enterprise-server@3.x/`, `/en/enterprise-cloud@latest/`) are other prefixes.
        // `?platform=`, `?tool=` and `?learn=` only switch what JavaScript shows: queries are dropped.
        // The server sends every `.ghd-tool` variant and JavaScript hides all but one with an inline
        // style, so a browser crawl must keep them. Each code block with a copy button carries a
        // `pre[hidden]` twin (hidden, hence dropped); an annotated example renders its code three
        // times, and only `.annotate-inline` holds it whole with its comments.
        "github-docs" => Profile {
            service: Some("github-actions".into()),
            start_urls: list(&["/en/actions", "/en/actions/get-started/quickstart"]),
            allowed_prefixes: list(&["/en/actions"]),
            exclude_paths: vec![],
            keep_query: false,
            sitemap: false,
            content_root: "main".into(),
            remove: list(&[
                "nav",
                "aside",
                "footer",
                ".code-example > header",
                "button",
                "svg",
                "#article-intro",
                "[data-container=\"toc\"]",
                ".ghd-alert-title",
                ".heading-link-symbol",
                ".annotate-header",
                ".annotate-beside",
            ]),
            yaml_blocks: list(&["pre > code.language-yaml", "pre > code.language-yml"]),
            code_blocks: list(&["pre"]),
            prose_blocks: prose,
            keep_hidden: list(&[".ghd-tool", "[class*=\"platform-\"]"]),
        },
        // GitLab's CI/CD documentation: `/ci/` (it was `/ee/ci/`, which redirects there). Numbered
        // archives (`/17.11/ci/…`) start with another prefix. Hugo renders code as
        // `div.highlight > pre > code.language-yaml[data-lang=yaml]`; the Nanoc site (and snapshots
        // of it) as kramdown's `div.language-yaml.highlighter-rouge pre > code`. Alerts put a
        // one-paragraph text straight into the alert's div; tabs split a container at `.tab-title`,
        // all panels in the page (a browser hides the inactive ones).
        "gitlab-docs" => {
            prose.extend(list(&["div.alert", ".alert-body", ".tab-title"]));
            Profile {
                service: Some("gitlab-ci".into()),
                start_urls: list(&["/ci/", "/ci/quick_start/", "/ci/yaml/"]),
                allowed_prefixes: list(&["/ci/", "/ee/ci/"]),
                exclude_paths: vec![],
                keep_query: false,
                sitemap: false,
                content_root: ".docs-content, .article-content, main".into(),
                remove: chrome(&[
                    "a.anchor",
                    ".help-feedback",
                    "[data-vue-app=\"survey-banner\"]",
                    "[data-vue-app=\"codeblock-toolbar\"]",
                    ".version-history",
                    ".introduced-in",
                    ".availability",
                    "#markdown-toc",
                    ".clip-btn",
                ]),
                yaml_blocks: list(&[
                    ".highlight pre > code[data-lang=\"yaml\"]",
                    ".highlight pre > code[data-lang=\"yml\"]",
                    "pre > code.language-yaml",
                    "pre > code.language-yml",
                    "div.language-yaml.highlighter-rouge pre > code",
                    "div.language-yml.highlighter-rouge pre > code",
                ]),
                code_blocks: list(&["pre"]),
                prose_blocks: prose,
                keep_hidden: list(&[".tab-pane", "[role=\"tabpanel\"]", "[data-vue-app=\"docs-tabs\"] *"]),
            }
        }
        // Antora components `guides`, `reference` and `orbs` (server-admin is versioned and out of
        // scope; every page also links a Markdown twin `index.md`, and `llms.txt`). Shiki renders
        // `pre.highlight > code[data-lang=yaml]`; callout markers `<i class="conum"></i><b>(1)</b>`
        // sit inside the code and would end up in the YAML (Shiki's code has no other `b`: `pre b`);
        // the info bar under the title is removed by what it holds (`.platform-badge`,
        // `[data-dropdown]`), never as "the div after the title", which is a page's `#preamble` when
        // it has no info bar; `NOTE:` admonitions put their text
        // straight into `td.content`; Asciidoctor Tabs panels are all in the page (JavaScript hides
        // the inactive ones with `hidden`). A block's title (`div.title`, a listing's caption) is a
        // line of its own, after the step that introduces the listing, not part of that step's text.
        "circleci-docs" => {
            prose.extend(list(&["div.title", ".admonitionblock td.content", ".colist td:last-child", ".hdlist2"]));
            Profile {
                service: Some("circleci".into()),
                start_urls: list(&[
                    "/docs/guides/getting-started/first-steps/",
                    "/docs/reference/configuration-reference/",
                    "/docs/orbs/use/orb-intro/",
                ]),
                allowed_prefixes: list(&["/docs/guides/", "/docs/reference/", "/docs/orbs/"]),
                exclude_paths: list(&[".md", "/llms.txt", "/_/"]),
                keep_query: false,
                sitemap: false,
                content_root: "article.doc".into(),
                remove: chrome(&[
                    ".platform-badge",
                    "[data-dropdown]",
                    "h1.page > span",
                    ".subsection-badge",
                    "a.anchor",
                    "i.conum",
                    "pre b",
                    "td.icon",
                    ".source-toolbox",
                    ".tablist",
                ]),
                yaml_blocks: list(&[
                    "pre > code[data-lang=\"yaml\"]",
                    "pre > code[data-lang=\"yml\"]",
                    "pre > code.language-yaml",
                    "div.highlight[data-lang=\"yaml\"] > pre",
                ]),
                code_blocks: list(&["pre"]),
                prose_blocks: prose,
                keep_hidden: list(&[".tabpanel"]),
            }
        }
        // The user documentation (`/user/`), without Travis CI Enterprise's admin pages and the
        // dated build-environment changelogs. kramdown + Rouge: `div.language-yaml.highlighter-rouge
        // pre > code`; every heading gets a `#` anchor link, which must not reach its title. In a
        // browser Prism wraps each block in `div.code-toolbar` with a toolbar naming the language,
        // whose text would join a list item's.
        "travis-docs" => {
            prose.extend(list(&[".note-box"]));
            Profile {
                service: Some("travis-ci".into()),
                start_urls: list(&[
                    "/user/for-beginners/",
                    "/user/tutorial/",
                    "/user/customizing-the-build/",
                    "/user/job-lifecycle/",
                    "/user/languages/",
                ]),
                allowed_prefixes: list(&["/user/"]),
                exclude_paths: list(&["/user/enterprise/", "/user/build-environment-updates/"]),
                keep_query: false,
                sitemap: false,
                content_root: "main#main, main".into(),
                remove: list(&[
                    "nav",
                    "footer",
                    "button",
                    // An inline icon's `<title>` is not text a reader reads (found by the extraction fuzz).
                    "svg",
                    "aside.improve-page",
                    "#toc",
                    "a.toc-anchor",
                    ".code-toolbar > .toolbar",
                ]),
                yaml_blocks: list(&[
                    "div.language-yaml.highlighter-rouge pre > code",
                    "div.language-yml.highlighter-rouge pre > code",
                    "figure.highlight pre > code[data-lang=\"yaml\"]",
                    "pre > code.language-yaml",
                ]),
                code_blocks: list(&["pre"]),
                prose_blocks: prose,
                keep_hidden: vec![],
            }
        }
        _ => return None,
    };
    Some(p)
}

/// `base` with the keys of `overrides` replacing its own (a user's `[profiles.NAME]` with
/// `base = "…"`); the result is checked like any profile (unknown keys are errors).
pub fn with_overrides(
    base: &Profile,
    overrides: serde_json::Map<String, Value>,
) -> Result<Profile, crate::ProfileError> {
    let mut v = serde_json::to_value(base).map_err(|e| crate::ProfileError(e.to_string()))?;
    let obj = v.as_object_mut().expect("a profile serializes to an object");
    for (k, val) in overrides {
        obj.insert(k, val);
    }
    serde_json::from_value(v).map_err(|e| crate::ProfileError(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_builtin_compiles_and_overrides_keep_the_rest() {
        for name in BUILTIN {
            let p = builtin(name).unwrap();
            p.compile().unwrap_or_else(|e| panic!("{name}: {e}"));
        }
        let base = builtin("travis-docs").unwrap();
        let mut o = serde_json::Map::new();
        o.insert("allowed_prefixes".into(), serde_json::json!(["/archive/2024/user/"]));
        let p = with_overrides(&base, o).unwrap();
        assert_eq!(p.allowed_prefixes, ["/archive/2024/user/"]);
        assert_eq!(p.yaml_blocks, base.yaml_blocks);
        let mut bad = serde_json::Map::new();
        bad.insert("yaml_block".into(), serde_json::json!(["pre"]));
        assert!(with_overrides(&base, bad).unwrap_err().0.contains("yaml_block"));
    }

    /// Issue 30: a removal rule names what it removes (an element, a class, an id, an attribute),
    /// never a position: `h1.page + div` also matched an Asciidoctor page's `#preamble`, and every
    /// example in it vanished.
    #[test]
    fn builtin_removal_rules_name_what_they_remove() {
        for name in BUILTIN {
            for rule in builtin(name).unwrap().remove {
                let positional = rule.contains('+')
                    || rule.contains('~')
                    || [":nth-", ":first-", ":last-", ":only-"].iter().any(|p| rule.contains(p));
                assert!(!positional, "{name}: `{rule}` removes by position");
            }
        }
    }
}
