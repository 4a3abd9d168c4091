//! Twins: a reference changed so that no model can have seen the result, yet still a file of its
//! service. Every edit is deterministic (the same reference always gives the same twin) and works
//! on lines, keeping the file's layout:
//! - **identifiers** (meaning-preserving): each job id (the keys under a top-level `jobs:`, and for
//!   CircleCI under `workflows:` and `commands:`/`executors:`; for GitLab CI the top-level keys that
//!   are not keywords, and the stages) is renamed everywhere it stands as a word: its key,
//!   `needs`/`requires`/`extends`/`stage` values, `needs.<id>` expressions;
//! - **names and comments** (meaning-preserving): words of `name:` values and of comments become
//!   synonyms (Build → Compile, Test → Verify, ...); a name without one gets " CI";
//! - **versions** (meaning-changing): `@vN` → `@vN−1` (or `@v2` from `@v1`), the last part of a
//!   dotted version in a value + 1 (`3.10` → `3.11`);
//! - **branches** (meaning-changing): `main` → `trunk`, `master` → `develop` under a branch filter.
//!
//! Only the renames reach past the prefix (they follow an id everywhere, or the file would break):
//! names, comments, versions and branches change on the prefix's lines alone, so the suffix a
//! twin's continuation is scored against keeps the reference's idioms. A model that writes
//! idiomatic YAML it invents then matches a twin's suffix as often as the reference's; with every
//! edit everywhere, `actions/checkout@v4` became `@v3` in the twins' suffixes only, and a loopback
//! model that knows no file matched references more than twins (5 pairs to 0, sign test p = 0.03,
//! `tests/e2e/contamination.rs`).
//!
//! The engine checks each twin with the service's validator, and the screen uses only twins that
//! differ from their reference inside the prefix (`Twin::differs_in`): a twin with the real prefix
//! would hand the model the real file's opening, and its continuation would be scored against both.

use crate::{probe, Probed, Shape};
use doc2ci_score::py_split;
use doc2ci_sem::Service;

/// A reference's twin and what was changed.
#[derive(Debug, Clone, PartialEq)]
pub struct Twin {
    pub text: String,
    /// One line per kind of edit, e.g. "renamed build → compile, test → verify".
    pub edits: Vec<String>,
}

/// Word swaps for identifiers, names and comments; one token each, so a twin's tokens stay
/// aligned with its reference's. Matched case-insensitively, written in the word's case.
const SYNONYMS: &[(&str, &str)] = &[
    ("build", "compile"),
    ("builds", "compiles"),
    ("building", "compiling"),
    ("test", "verify"),
    ("tests", "checks"),
    ("testing", "verifying"),
    ("deploy", "ship"),
    ("deployment", "rollout"),
    ("lint", "analyze"),
    ("linting", "analysis"),
    ("release", "publish"),
    ("publish", "upload"),
    ("install", "setup"),
    ("run", "execute"),
    ("runs", "executes"),
    ("check", "inspect"),
    ("package", "bundle"),
    ("docs", "manual"),
    ("documentation", "manual"),
    ("example", "sample"),
    ("workflow", "pipeline"),
    ("project", "repository"),
    ("code", "source"),
    ("app", "service"),
    ("application", "service"),
    ("dependencies", "packages"),
    ("cache", "store"),
    ("job", "task"),
    ("upload", "push"),
    ("create", "make"),
    ("use", "employ"),
    ("this", "the"),
];

/// Keys whose values name branches.
const BRANCH_KEYS: &[&str] = &["branches", "branches-ignore", "branch", "only", "except"];

fn is_word_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_' || c == '-'
}

/// `word` with `to` put in its case (all caps, capitalised or as is).
fn in_case_of(word: &str, to: &str) -> String {
    if word.len() > 1 && word.chars().all(|c| !c.is_lowercase()) {
        to.to_uppercase()
    } else if word.chars().next().is_some_and(char::is_uppercase) {
        let mut c = to.chars();
        c.next().map(|f| f.to_uppercase().chain(c).collect()).unwrap_or_default()
    } else {
        to.to_string()
    }
}

fn synonym(word: &str) -> Option<String> {
    let lower = word.to_lowercase();
    SYNONYMS.iter().find(|(a, _)| *a == lower).map(|(_, b)| in_case_of(word, b))
}

/// Replaces every whole word of `text` (words of letters, digits, `_` and `-`) that `f` maps.
fn map_words(text: &str, mut f: impl FnMut(&str) -> Option<String>) -> String {
    let mut out = String::with_capacity(text.len());
    let mut start = None;
    for (i, c) in text.char_indices().chain(std::iter::once((text.len(), ' '))) {
        match (start, is_word_char(c) && i < text.len()) {
            (None, true) => start = Some(i),
            (Some(s), false) => {
                let w = &text[s..i];
                out.push_str(&f(w).unwrap_or_else(|| w.to_string()));
                start = None;
                if i < text.len() {
                    out.push(c);
                }
            }
            (None, false) if i < text.len() => out.push(c),
            _ => {}
        }
    }
    out
}

/// A line's indentation, key (if it is `key:` or `- key:`) and whether it is a list item.
struct Line<'a> {
    indent: usize,
    key: Option<&'a str>,
}

fn parse(line: &str) -> Line<'_> {
    let line = line.trim_end_matches(['\r', '\n']);
    let body = line.trim_start();
    let indent = line.len() - body.len();
    let body = body.strip_prefix("- ").unwrap_or(body);
    let key = body
        .find(':')
        .filter(|&i| body[i + 1..].is_empty() || body[i + 1..].starts_with([' ', '\t']))
        .map(|i| body[..i].trim_matches(['"', '\'']))
        .filter(|k| !k.is_empty() && !k.contains(' ') && !k.starts_with('#'));
    Line { indent, key }
}

/// The ids a service lets the author choose, in order of first appearance.
fn identifiers(service: &Service, lines: &[&str]) -> Vec<String> {
    let at = service.author_ids;
    let mut ids: Vec<String> = Vec::new();
    let mut push = |id: &str| {
        let id = id.trim_start_matches('.');
        if !id.is_empty() && id != "version" && !ids.iter().any(|x| x == id) {
            ids.push(id.to_string());
        }
    };
    let mut under: Option<(&str, Option<usize>)> = None;
    for raw in lines {
        if raw.trim().is_empty() || raw.trim_start().starts_with('#') {
            continue;
        }
        let l = parse(raw);
        if l.indent == 0 {
            under = l.key.filter(|k| at.keys_under.contains(k) || at.items_under.contains(k)).map(|k| (k, None));
            if let Some(k) = l.key.filter(|k| (at.top_level)(k)) {
                push(k);
            }
            continue;
        }
        let Some((parent, child_indent)) = under.as_mut() else { continue };
        let child_indent = *child_indent.get_or_insert(l.indent);
        if l.indent != child_indent {
            continue;
        }
        if at.items_under.contains(parent) {
            if let Some(item) = raw.trim_start().strip_prefix("- ") {
                push(item.trim().trim_matches(['"', '\'']));
            }
        } else if let Some(k) = l.key {
            push(k);
        }
    }
    ids
}

/// The new name of an id: its synonym, or its parts' (`build-docs` → `compile-manual`), else
/// `<id>-ci`.
fn renamed(id: &str) -> String {
    if let Some(s) = synonym(id) {
        return s;
    }
    let joined: String = id
        .split_inclusive(['-', '_'])
        .map(|part| {
            let core = part.trim_end_matches(['-', '_']);
            synonym(core).map_or_else(|| part.to_string(), |s| format!("{s}{}", &part[core.len()..]))
        })
        .collect();
    if joined != id {
        joined
    } else {
        let sep = if id.contains('_') && !id.contains('-') { "_" } else { "-" };
        format!("{id}{sep}ci")
    }
}

/// `@vN` → `@vN−1` (or 2), and a dotted version's last number + 1, in one value.
fn bump_versions(value: &str) -> String {
    let mut out = String::new();
    let chars: Vec<char> = value.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        if chars[i] == '@' && chars.get(i + 1) == Some(&'v') && chars.get(i + 2).is_some_and(|c| c.is_ascii_digit()) {
            let mut j = i + 2;
            while j < chars.len() && chars[j].is_ascii_digit() {
                j += 1;
            }
            let n: u64 = chars[i + 2..j].iter().collect::<String>().parse().unwrap_or(1);
            out.push_str(&format!("@v{}", if n > 1 { n - 1 } else { n + 1 }));
            i = j;
            continue;
        }
        let starts_number = chars[i].is_ascii_digit() && (i == 0 || !is_word_char(chars[i - 1]) || chars[i - 1] == 'v');
        if starts_number {
            let mut j = i;
            let mut dots = 0;
            while j < chars.len()
                && (chars[j].is_ascii_digit()
                    || (chars[j] == '.' && chars.get(j + 1).is_some_and(char::is_ascii_digit)))
            {
                dots += usize::from(chars[j] == '.');
                j += 1;
            }
            let num: String = chars[i..j].iter().collect();
            if dots > 0 && dots <= 2 && !chars.get(j).is_some_and(|c| is_word_char(*c)) {
                let (head, last) = num.rsplit_once('.').expect("dotted");
                let next: u64 = last.parse::<u64>().map(|x| x + 1).unwrap_or(0);
                out.push_str(&format!("{head}.{next}"));
            } else {
                out.push_str(&num);
            }
            i = j;
            continue;
        }
        out.push(chars[i]);
        i += 1;
    }
    out
}

/// Keys whose values name jobs or stages: where a renamed id is referred to.
const REF_KEYS: &[&str] = &["needs", "requires", "extends", "stage", "stages", "dependencies"];

/// A line past the prefix, with only the references to renamed ids renamed: a renamed key, the
/// values of [`REF_KEYS`] (`in_refs`: a line of such a key's block list), a list item that is an
/// id (CircleCI's workflow jobs), `needs.<id>` in an expression. A word that happens to equal an
/// id (`go build`) stays, keeping the suffix's idioms.
fn follow_renames(content: &str, renames: &[(String, String)], in_refs: bool) -> String {
    let new = |w: &str| renames.iter().find(|(a, _)| a == w).map(|(_, b)| b.clone());
    let l = parse(content);
    if in_refs || l.key.is_some_and(|k| REF_KEYS.contains(&k)) {
        return map_words(content, new);
    }
    let body = content.trim_start();
    let item = body.strip_prefix("- ").map(|v| v.trim().trim_matches(['"', '\'']));
    if let (Some(v), None) = (item, l.key) {
        if let Some(b) = new(v) {
            return content.replacen(v, &b, 1);
        }
    }
    let mut line = content.to_string();
    if let Some(k) = l.key {
        if let Some(b) = new(k) {
            let at = line.find(k).expect("the key is in its line");
            line.replace_range(at..at + k.len(), &b);
        }
    }
    // `needs.<id>` in an expression: the id after the dot, as a whole word.
    let mut out = String::with_capacity(line.len());
    let mut rest = line.as_str();
    while let Some(i) = rest.find("needs.") {
        out.push_str(&rest[..i + 6]);
        rest = &rest[i + 6..];
        let end = rest.find(|c: char| !is_word_char(c)).unwrap_or(rest.len());
        out.push_str(&new(&rest[..end]).unwrap_or_else(|| rest[..end].to_string()));
        rest = &rest[end..];
    }
    out.push_str(rest);
    out
}

/// Where the first `n` whitespace tokens of `text` end (bytes; the text's length when shorter).
fn tokens_end(text: &str, n: usize) -> usize {
    let mut seen = 0;
    let mut in_token = false;
    for (i, c) in text.char_indices() {
        match (c.is_whitespace(), in_token) {
            (true, true) => {
                in_token = false;
                if seen == n {
                    return i;
                }
            }
            (false, false) => {
                in_token = true;
                seen += 1;
            }
            _ => {}
        }
    }
    text.len()
}

/// The twin of a reference of `service`, screened with `shape`'s prefix.
pub fn twin(service: &Service, reference: &str, shape: Shape) -> Twin {
    let prefix_end = tokens_end(reference, shape.prefix);
    let lines: Vec<&str> = reference.split_inclusive('\n').collect();
    let ids = identifiers(service, &lines);
    // A new name never collides with an id the file already has, or with another new name.
    let mut taken: Vec<String> = ids.clone();
    let renames: Vec<(String, String)> = ids
        .iter()
        .map(|id| {
            let mut new = renamed(id);
            while taken.contains(&new) {
                new = format!("{new}-ci");
            }
            taken.push(new.clone());
            (id.clone(), new)
        })
        .collect();
    let (mut n_names, mut n_comments, mut n_versions, mut n_branches) = (0, 0, 0, 0);
    let mut branch_ctx: Option<usize> = None;
    let mut out = String::with_capacity(reference.len() + 64);
    let mut at = 0;
    let mut ref_ctx: Option<usize> = None;
    for raw in &lines {
        let (content, eol) = raw.strip_suffix('\n').map_or((*raw, ""), |c| (c, "\n"));
        let trimmed = content.trim_start();
        let in_prefix = at < prefix_end;
        at += raw.len();
        if !in_prefix {
            // Past the prefix: the references to renamed ids follow, nothing else changes.
            let l = parse(content);
            if !trimmed.is_empty()
                && ref_ctx.is_some_and(|c| l.indent <= c && !(l.indent == c && trimmed.starts_with("- ")))
            {
                ref_ctx = None;
            }
            out.push_str(&follow_renames(content, &renames, ref_ctx.is_some()));
            if l.key.is_some_and(|k| REF_KEYS.contains(&k)) {
                ref_ctx = Some(l.indent);
            }
            out.push_str(eol);
            continue;
        }
        if trimmed.starts_with('#') {
            let new = map_words(content, synonym);
            n_comments += usize::from(new != content);
            out.push_str(&new);
            out.push_str(eol);
            continue;
        }
        let l = parse(content);
        if !trimmed.is_empty()
            && branch_ctx.is_some_and(|at| l.indent <= at && !(l.indent == at && trimmed.starts_with("- ")))
        {
            branch_ctx = None;
        }
        let in_branches = branch_ctx.is_some();
        if l.key.is_some_and(|k| BRANCH_KEYS.contains(&k)) {
            branch_ctx = Some(l.indent);
        }
        // Split off an inline comment (a ` #` outside quotes is close enough for the docs' files).
        let (code, comment) = match content.find(" #") {
            Some(i) if !content[..i].contains(['"', '\'']) => content.split_at(i),
            _ => (content, ""),
        };
        let mut line = map_words(code, |w| renames.iter().find(|(a, _)| a == w).map(|(_, b)| b.clone()));
        if l.key == Some("name") {
            if let Some((k, v)) = line.split_once("name:") {
                let mut v2 = map_words(v, synonym);
                if v2 == v && !v.trim().is_empty() && !v.trim_start().starts_with(['|', '>', '$', '&', '*']) {
                    let (core, quote) = match v.trim_end().chars().last() {
                        Some(q @ ('"' | '\'')) => (&v.trim_end()[..v.trim_end().len() - 1], q.to_string()),
                        _ => (v.trim_end(), String::new()),
                    };
                    v2 = format!("{core} CI{quote}");
                }
                n_names += 1;
                line = format!("{k}name:{v2}");
            }
        }
        let bumped = bump_versions(&line);
        n_versions += usize::from(bumped != line);
        line = bumped;
        if in_branches || l.key.is_some_and(|k| BRANCH_KEYS.contains(&k)) {
            let swapped = map_words(&line, |w| match w {
                "main" => Some("trunk".into()),
                "master" => Some("develop".into()),
                _ => None,
            });
            n_branches += usize::from(swapped != line);
            line = swapped;
        }
        let comment2 = map_words(comment, synonym);
        n_comments += usize::from(comment2 != comment);
        out.push_str(&line);
        out.push_str(&comment2);
        out.push_str(eol);
    }
    let mut edits = Vec::new();
    if !renames.is_empty() {
        let list: Vec<String> = renames.iter().map(|(a, b)| format!("{a} → {b}")).collect();
        edits.push(format!("renamed {}", list.join(", ")));
    }
    for (n, what) in [
        (n_names, "names"),
        (n_comments, "comment lines"),
        (n_versions, "lines with versions"),
        (n_branches, "branch filters"),
    ] {
        if n > 0 {
            edits.push(format!("{n} {what} changed"));
        }
    }
    Twin { text: out, edits }
}

impl Twin {
    /// How many of the first `shape.prefix` tokens differ from the reference's (position by
    /// position), and whether the twin is long enough to be screened.
    pub fn differs_in(&self, reference: &str, shape: Shape) -> Option<usize> {
        match probe(&self.text, shape) {
            Probed::TooShort { .. } => None,
            Probed::Probe(_) => {
                let a = py_split(reference).take(shape.prefix);
                let b = py_split(&self.text).take(shape.prefix);
                Some(a.zip(b).filter(|(x, y)| x != y).count())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GHA: &str = "\
# Build and test a Go project
name: Go
on:
  push:
    branches: [ main ]
  pull_request:
    branches:
      - main
jobs:
  build:
    runs-on: ubuntu-latest
    steps:
      - uses: actions/checkout@v4
      - name: Set up Go
        uses: actions/setup-go@v5
        with:
          go-version: '1.21'
      - name: Build
        run: go build -v ./... # compile everything
  deploy:
    needs: [build]
    if: needs.build.result == 'success'
    runs-on: ubuntu-latest
    steps:
      - run: echo deploy
";

    #[test]
    fn a_github_actions_twin_renames_jobs_everywhere_and_changes_names_versions_and_branches() {
        let t = twin(&doc2ci_sem::github_actions::SERVICE, GHA, ALL);
        let want = "\
# Compile and verify a Go repository
name: Go CI
on:
  push:
    branches: [ trunk ]
  pull_request:
    branches:
      - trunk
jobs:
  compile:
    runs-on: ubuntu-latest
    steps:
      - uses: actions/checkout@v3
      - name: Set up Go CI
        uses: actions/setup-go@v4
        with:
          go-version: '1.22'
      - name: Compile
        run: go compile -v ./... # compile everything
  ship:
    needs: [compile]
    if: needs.compile.result == 'success'
    runs-on: ubuntu-latest
    steps:
      - run: echo ship
";
        assert_eq!(t.text, want, "{}", t.text);
        assert_eq!(t.edits[0], "renamed build → compile, deploy → ship");
        assert_eq!(twin(&doc2ci_sem::github_actions::SERVICE, GHA, ALL), t, "deterministic");
        assert_eq!(t.differs_in(GHA, Shape { prefix: 10, suffix: 10 }), Some(4));
    }

    #[test]
    fn gitlab_jobs_and_stages_are_renamed_but_keywords_are_not() {
        let src = "stages:\n  - build\n  - test\nimage: node:18.2\nbuild-job:\n  stage: build\n  script: make\n.tpl:\n  tags: [x]\nunit:\n  extends: .tpl\n  stage: test\n";
        let t = twin(&doc2ci_sem::gitlab_ci::SERVICE, src, ALL);
        assert_eq!(
            t.text,
            "stages:\n  - compile\n  - verify\nimage: node:18.3\ncompile-task:\n  stage: compile\n  script: make\n.tpl-ci:\n  tags: [x]\nunit-ci:\n  extends: .tpl-ci\n  stage: verify\n"
        );
    }

    #[test]
    fn a_new_name_never_collides_with_an_existing_id() {
        let t = twin(
            &doc2ci_sem::github_actions::SERVICE,
            "jobs:\n  build:\n    runs-on: x\n  compile:\n    needs: build\n    runs-on: x\n",
            ALL,
        );
        assert_eq!(
            t.text,
            "jobs:\n  compile-ci:\n    runs-on: x\n  compile-ci-ci:\n    needs: compile-ci\n    runs-on: x\n"
        );
    }

    /// A prefix longer than any file here: every edit applies everywhere.
    const ALL: Shape = Shape { prefix: 10_000, suffix: 10 };

    /// Past a 20-token prefix (through `jobs:`), only the references to renamed jobs change: the
    /// suffix keeps its versions, step names and commands.
    #[test]
    fn past_the_prefix_only_the_renames_follow() {
        let t = twin(&doc2ci_sem::github_actions::SERVICE, GHA, Shape { prefix: 20, suffix: 50 });
        let want = "\
# Compile and verify a Go repository
name: Go CI
on:
  push:
    branches: [ trunk ]
  pull_request:
    branches:
      - trunk
jobs:
  compile:
    runs-on: ubuntu-latest
    steps:
      - uses: actions/checkout@v4
      - name: Set up Go
        uses: actions/setup-go@v5
        with:
          go-version: '1.21'
      - name: Build
        run: go build -v ./... # compile everything
  ship:
    needs: [compile]
    if: needs.compile.result == 'success'
    runs-on: ubuntu-latest
    steps:
      - run: echo deploy
";
        assert_eq!(t.text, want, "{}", t.text);
        let circle = "version: 2.1\njobs:\n  build:\n    docker: [{image: x}]\n    steps: [checkout]\nworkflows:\n  main:\n    jobs:\n      - build\n      - deploy:\n          requires:\n            - build\n";
        let t = twin(&doc2ci_sem::circleci::SERVICE, circle, Shape { prefix: 3, suffix: 5 });
        assert!(t.text.contains("      - compile\n") && t.text.contains("            - compile\n"), "{}", t.text);
    }

    #[test]
    fn version_bumps_touch_versions_only() {
        assert_eq!(
            bump_versions("uses: a/b@v1 x1.2 3.10.1 10 v2.0 ubuntu-22.04"),
            "uses: a/b@v2 x1.2 3.10.2 10 v2.1 ubuntu-22.04"
        );
    }
}
