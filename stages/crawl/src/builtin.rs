//! Built-in profiles for the official documentation sites (issue 11), so a first crawl needs no
//! study of any site's markup: `profile = "github-docs"` and so on, or a user profile with
//! `base = "travis-docs"` that overrides single keys (the URL scope of a mirror, a local copy or an
//! archived snapshot served under another path).
//!
//! Each service's file in `doc2ci-sem` holds its site's profile (`Service::docs`), derived from
//! the site's own renderer, not from a rendered copy, and written for the markup that renderer
//! produces (see `PROFILES.md` beside this file for the evidence). This file turns one into a
//! [`Profile`].

use serde_json::Value;

use crate::Profile;

/// The names `profile = "…"` accepts without a `[profiles]` table: one per service.
pub fn names() -> impl Iterator<Item = &'static str> {
    doc2ci_sem::SERVICES.iter().map(|s| s.docs.profile)
}

/// A built-in profile by name: its service's documentation site as that service's file in
/// `doc2ci-sem` describes it.
pub fn builtin(name: &str) -> Option<Profile> {
    let s = doc2ci_sem::SERVICES.iter().find(|s| s.docs.profile == name)?;
    let d = &s.docs;
    let list = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let mut prose_blocks = crate::default_prose_blocks();
    prose_blocks.extend(list(d.more_prose_blocks));
    Some(Profile {
        service: Some(s.name.into()),
        start_urls: list(d.start_urls),
        allowed_prefixes: list(d.allowed_prefixes),
        exclude_paths: list(d.exclude_paths),
        keep_query: d.keep_query,
        sitemap: d.sitemap,
        content_root: d.content_root.into(),
        remove: list(d.remove),
        yaml_blocks: list(d.yaml_blocks),
        code_blocks: list(d.code_blocks),
        prose_blocks,
        keep_hidden: list(d.keep_hidden),
    })
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
        for name in names() {
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
        for name in names() {
            for rule in builtin(name).unwrap().remove {
                let positional = rule.contains('+')
                    || rule.contains('~')
                    || [":nth-", ":first-", ":last-", ":only-"].iter().any(|p| rule.contains(p));
                assert!(!positional, "{name}: `{rule}` removes by position");
            }
        }
    }
}
