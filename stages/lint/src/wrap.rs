//! Fragment completion: the smallest standalone file of a service that holds a fragment verbatim.
//!
//! The fragment's lines are kept as written, shifted right by a uniform indent (which YAML
//! nesting needs and which changes no value: block scalars keep their relative indentation), so a
//! position in the completed file maps back to one in the text by subtracting the lines before it
//! and the indent. Synthetic names say who wrote what: the job that holds the fragment is
//! `doc2ci-fragment`, a stub the wrapper adds so the file is complete is `doc2ci-wrapper`.
//!
//! | service | shape of the fragment | completion (`rule`) |
//! |---|---|---|
//! | GitHub Actions | workflow keys without `on` or `jobs` | `on: push` and a stub job after (`workflow`) |
//! | | a job (`runs-on`/`steps`/reusable `uses`) | under `jobs.doc2ci-fragment`, `runs-on` and a step if it has none (`job`) |
//! | | a map of jobs | under `jobs:` (`jobs`) |
//! | | one step (`uses`/`run`) | an item of `steps:` of a job (`step`) |
//! | | a list of steps | `steps:` of a job (`steps`) |
//! | | triggers only (`push:`, `schedule:` …) | under `on:`, a stub job after (`triggers`) |
//! | CircleCI | top-level keys without `version` (and `workflows`) | `version: 2.1` before, a workflow listing its jobs after (`config`) |
//! | | a job (`steps` with an executor or none) | under `jobs.doc2ci-fragment`, a Docker executor if it names none (`job`) |
//! | | a map of jobs | under `jobs:`, a workflow listing them (`jobs`) |
//! | | a list of steps | `steps:` of a job (`steps`) |
//! | GitLab CI | global keywords and hidden jobs only | a stub visible job in stage `.pre` after (`pipeline`) |
//! | | one job's keys (`script`, `stage`, `rules` …) | under `doc2ci-fragment:` (`job`) |
//! | | a list of commands | `script:` of a job (`script`) |
//! | Travis CI | a section (`deploy:`, `notifications:` …) | `language: shell` before (`section`) |
//! | | a list of commands | `script:` after `language: shell` (`script`) |
//!
//! Any other shape has no rule: the text is judged as written only, and the row says why. Each
//! service's rules are its `complete` in its file of `doc2ci-sem`; this file applies them.
//!
//! A wrapper must cause no finding of its own: where it writes the workflow level (every GitHub
//! rule but `workflow`) or a stub job, it grants no permissions (`permissions: {}`), which is what
//! zizmor asks of a workflow; where the fragment owns the workflow level (`workflow`), the wrapper
//! writes after it, so a finding about the workflow as a whole is the fragment's.

use doc2ci_sem::{self as sem, Shape, Wrap};
#[cfg(test)]
use doc2ci_validate::is_fragment;
use doc2ci_validate::Service;
use doc2ci_yaml::{Limits, Value};

/// The name of the job that holds a fragment (its findings are the fragment's).
pub const FRAGMENT_JOB: &str = sem::FRAGMENT_JOB;
/// The name of a stub the wrapper adds (findings naming it are the wrapper's).
pub const WRAPPER_JOB: &str = sem::WRAPPER_JOB;

/// What completion makes of a text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Completion {
    /// Already a standalone file (or not YAML at all): judged as written.
    Standalone,
    Wrapped(Wrapped),
    /// A fragment of a shape no rule covers; the reason.
    NoRule(String),
}

/// A fragment inside its completed file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Wrapped {
    pub text: String,
    pub rule: &'static str,
    /// Wrapper lines before the fragment's first line.
    pub before: u32,
    /// The fragment's lines.
    pub lines: u32,
    /// Spaces added in front of each fragment line.
    pub indent: u32,
}

impl Wrapped {
    /// A 1-based position of the completed file in the fragment's own coordinates, or `None` on a
    /// wrapper line.
    pub fn to_fragment(&self, line: u32, column: Option<u32>) -> Option<(u32, Option<u32>)> {
        if line <= self.before || line > self.before + self.lines {
            return None;
        }
        Some((line - self.before, column.map(|c| c.saturating_sub(self.indent).max(1))))
    }
}

/// Completes `text` for `service` (see the module table; each rule is the service's own, in its
/// file in `doc2ci-sem`).
pub fn complete(service: Service, text: &str) -> Completion {
    // The validate stage's loader and bounds: a text it refuses is judged as written.
    let Ok(value) = doc2ci_yaml::load(text, &Limits::default()) else { return Completion::Standalone };
    let def = service.def();
    let wrap = match sem::shape(def, &value) {
        Shape::File => return Completion::Standalone,
        Shape::Unknown => None,
        shape => (def.complete)(shape, &value),
    };
    match wrap {
        Some(w) => Completion::Wrapped(apply(w, text)),
        None => Completion::NoRule(format!("no completion rule for this {} fragment's shape", def.display)),
    }
}

/// The completed file: the wrap's head, the fragment's lines indented, the wrap's tail.
fn apply(w: Wrap, text: &str) -> Wrapped {
    let pad = " ".repeat(w.indent as usize);
    let mut body = String::with_capacity(text.len() + w.head.len() + w.tail.len() + 64);
    let mut lines = 0u32;
    // Only comments and blank lines so far: where a document start marker or a directive may be.
    let mut preamble = true;
    for line in text.lines() {
        lines += 1;
        let t = line.trim_end();
        let marker = preamble && (t == "---" || t.starts_with("%YAML") || t.starts_with("%TAG"));
        preamble &= marker || t.trim_start().is_empty() || t.trim_start().starts_with('#');
        // A document marker or directive would end the wrapper's document: the line stays, empty.
        if marker || t == "..." {
            body.push('\n');
            continue;
        }
        if !line.trim().is_empty() {
            body.push_str(&pad);
        }
        body.push_str(line);
        body.push('\n');
    }
    let before = w.head.lines().count() as u32;
    Wrapped { text: format!("{}{body}{}", w.head, w.tail), rule: w.rule, before, lines, indent: w.indent }
}

/// Whether a CircleCI text imports orbs (an offline parser cannot resolve them).
pub fn imports_orbs(text: &str) -> bool {
    let Ok(Value::Map(m)) = doc2ci_yaml::load(text, &Limits::default()) else { return false };
    m.get("orbs").is_some_and(|o| !o.is_null())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn svc(name: &str) -> Service {
        name.parse().unwrap()
    }

    fn wrapped(service: Service, text: &str) -> Wrapped {
        match complete(service, text) {
            Completion::Wrapped(w) => w,
            other => panic!("{text:?}: expected a completion, got {other:?}"),
        }
    }

    #[test]
    fn standalone_texts_are_not_wrapped() {
        assert_eq!(complete(svc("github-actions"), "on: push\njobs: {}\n"), Completion::Standalone);
        assert_eq!(complete(svc("github-actions"), "not: [yaml"), Completion::Standalone);
        assert_eq!(complete(svc("gitlab-ci"), "build:\n  script: [make]\n"), Completion::Standalone);
    }

    #[test]
    fn github_steps_keep_their_text_and_map_back() {
        let text = "- uses: actions/checkout@v4\n- run: |\n    make\n    make test\n";
        let w = wrapped(svc("github-actions"), text);
        assert_eq!(w.rule, "steps");
        assert_eq!(w.before, 6);
        assert_eq!(w.lines, 4);
        let frag: Vec<&str> = w.text.lines().skip(6).take(4).map(|l| &l[6..]).collect();
        assert_eq!(frag, text.lines().collect::<Vec<_>>());
        // The completed file is a standalone workflow.
        let v = doc2ci_yaml::load(&w.text, &Limits::default()).unwrap();
        assert!(!is_fragment(svc("github-actions"), &v));
        assert_eq!(w.to_fragment(8, Some(9)), Some((2, Some(3))));
        assert_eq!(w.to_fragment(3, Some(3)), None);
        assert_eq!(w.to_fragment(11, None), None);
    }

    #[test]
    fn github_shapes() {
        let rule = |t: &str| wrapped(svc("github-actions"), t).rule;
        assert_eq!(rule("jobs:\n  a:\n    runs-on: x\n    steps: [{run: make}]\n"), "workflow");
        assert_eq!(rule("runs-on: ubuntu-latest\nsteps:\n  - run: make\n"), "job");
        assert_eq!(
            rule("build:\n  runs-on: x\n  steps: [{run: a}]\ntest:\n  runs-on: x\n  steps: [{run: b}]\n"),
            "jobs"
        );
        assert_eq!(rule("name: Build\nrun: make\n"), "step");
        assert_eq!(rule("push:\n  branches: [main]\nschedule:\n  - cron: '0 0 * * *'\n"), "triggers");
        assert!(matches!(complete(svc("github-actions"), "foo: bar\n"), Completion::NoRule(_)));
        assert!(matches!(complete(svc("github-actions"), "- 1\n- 2\n"), Completion::NoRule(_)));
    }

    #[test]
    fn every_completion_is_standalone() {
        let cases: &[(Service, &str)] = &[
            (svc("github-actions"), "jobs:\n  a:\n    runs-on: x\n    steps: [{run: make}]\n"),
            (svc("github-actions"), "runs-on: ubuntu-latest\nsteps:\n  - run: make\n"),
            (svc("github-actions"), "name: Build\nrun: make\n"),
            (svc("github-actions"), "push:\n  branches: [main]\n"),
            (svc("github-actions"), "---\n- run: make\n"),
            (svc("github-actions"), "# steps\n\n---\n- run: make\n"),
            (svc("circleci"), "jobs:\n  build:\n    docker: [{image: x}]\n    steps: [checkout]\n"),
            (svc("circleci"), "docker:\n  - image: x\nsteps:\n  - checkout\n"),
            (svc("circleci"), "steps:\n  - checkout\n"),
            (svc("circleci"), "- checkout\n- run: make\n"),
            (svc("circleci"), "orbs:\n  node: circleci/node@5\n"),
            (svc("gitlab-ci"), "stages: [build]\n.hidden:\n  script: [x]\n"),
            (svc("gitlab-ci"), "script:\n  - make\nstage: build\n"),
            (svc("gitlab-ci"), "- make\n- make test\n"),
            (svc("travis-ci"), "deploy:\n  provider: pages\n"),
            (svc("travis-ci"), "- make\n"),
        ];
        for (s, t) in cases {
            let w = wrapped(*s, t);
            let v =
                doc2ci_yaml::load(&w.text, &Limits::default()).unwrap_or_else(|e| panic!("{t:?} → {:?}: {e}", w.text));
            assert!(!is_fragment(*s, &v), "{s}: {t:?} completed by {} is still a fragment:\n{}", w.rule, w.text);
        }
    }

    #[test]
    fn circleci_lists_the_jobs_it_defines() {
        let w = wrapped(svc("circleci"), "jobs:\n  build:\n    docker: [{image: x}]\n    steps: [checkout]\n");
        assert!(w.text.starts_with("version: 2.1\n"), "{}", w.text);
        assert!(w.text.ends_with("jobs:\n      - \"build\"\n"), "{}", w.text);
        assert!(matches!(complete(svc("circleci"), "workflows:\n  main:\n    jobs: [build]\n"), Completion::NoRule(_)));
    }
}
