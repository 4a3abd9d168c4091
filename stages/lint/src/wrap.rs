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
//! Any other shape has no rule: the text is judged as written only, and the row says why.
//!
//! A wrapper must cause no finding of its own: where it writes the workflow level (every GitHub
//! rule but `workflow`) or a stub job, it grants no permissions (`permissions: {}`), which is what
//! zizmor asks of a workflow; where the fragment owns the workflow level (`workflow`), the wrapper
//! writes after it, so a finding about the workflow as a whole is the fragment's.

use doc2ci_sem::{self as sem, Shape};
#[cfg(test)]
use doc2ci_validate::is_fragment;
use doc2ci_validate::Service;
use doc2ci_yaml::{Limits, Map, Value};

/// The name of the job that holds a fragment (its findings are the fragment's).
pub const FRAGMENT_JOB: &str = sem::FRAGMENT_JOB;
/// The name of a stub the wrapper adds (findings naming it are the wrapper's).
pub const WRAPPER_JOB: &str = "doc2ci-wrapper";

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

const GHA_STUB: &str = "jobs:\n  doc2ci-wrapper:\n    runs-on: ubuntu-latest\n    steps:\n      - run: echo doc2ci\n";
const GHA_JOB_HEAD: &str = "on: push\npermissions: {}\njobs:\n  doc2ci-fragment:\n";
const CCI_EXECUTOR: &str = "    docker:\n      - image: cimg/base:current\n";

/// Completes `text` for `service` (see the module table).
pub fn complete(service: Service, text: &str) -> Completion {
    // The validate stage's loader and bounds: a text it refuses is judged as written.
    let Ok(value) = doc2ci_yaml::load(text, &Limits::default()) else { return Completion::Standalone };
    let shaped = match (sem::shape(service.sem(), &value), &value) {
        (Shape::File, _) => return Completion::Standalone,
        (Shape::Unknown, _) => None,
        (shape, Value::Map(m)) => Some(map_completion(service, shape, m)),
        (Shape::Steps, _) if service == Service::GithubActions => Some(Texts::inside("steps", GHA_STEPS_HEAD, 6, "")),
        (Shape::Steps, _) => {
            let head = format!("version: 2.1\njobs:\n  {FRAGMENT_JOB}:\n{CCI_EXECUTOR}    steps:\n");
            Some(Texts::inside_owned("steps", head, 6, cci_workflow(&[FRAGMENT_JOB.to_string()])))
        }
        (Shape::Script, _) if service == Service::GitlabCi => {
            Some(Texts::inside("script", "doc2ci-fragment:\n  script:\n", 4, ""))
        }
        (Shape::Script, _) => Some(Texts::inside("script", "language: shell\nscript:\n", 2, "")),
        (shape, _) => unreachable!("a {shape:?} fragment is a mapping"),
    };
    match shaped {
        Some(s) => Completion::Wrapped(s.apply(text)),
        None => Completion::NoRule(format!("no completion rule for this {} fragment's shape", service.def().display)),
    }
}

const GHA_STEPS_HEAD: &str =
    "on: push\npermissions: {}\njobs:\n  doc2ci-fragment:\n    runs-on: ubuntu-latest\n    steps:\n";

/// A completion before it is applied to the text.
struct Texts {
    rule: &'static str,
    head: String,
    indent: u32,
    tail: String,
}

impl Texts {
    fn inside(rule: &'static str, head: &str, indent: u32, tail: &str) -> Texts {
        Texts { rule, head: head.into(), indent, tail: tail.into() }
    }
    fn inside_owned(rule: &'static str, head: String, indent: u32, tail: String) -> Texts {
        Texts { rule, head, indent, tail }
    }

    fn apply(self, text: &str) -> Wrapped {
        let pad = " ".repeat(self.indent as usize);
        let mut body = String::with_capacity(text.len() + self.head.len() + self.tail.len() + 64);
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
        let before = self.head.lines().count() as u32;
        Wrapped {
            text: format!("{}{body}{}", self.head, self.tail),
            rule: self.rule,
            before,
            lines,
            indent: self.indent,
        }
    }
}

/// Whether a CircleCI text imports orbs (an offline parser cannot resolve them).
pub fn imports_orbs(text: &str) -> bool {
    let Ok(Value::Map(m)) = doc2ci_yaml::load(text, &Limits::default()) else { return false };
    m.get("orbs").is_some_and(|o| !o.is_null())
}

/// The completion of a mapping fragment of `shape` (its rule is the shape's).
fn map_completion(service: Service, shape: Shape, m: &Map) -> Texts {
    let rule = shape.rule();
    match (service, shape) {
        (Service::GithubActions, Shape::Workflow) => {
            let mut tail = String::new();
            if !m.contains_key("on") {
                tail.push_str("on: push\n");
            }
            if !m.contains_key("jobs") {
                if !m.contains_key("permissions") {
                    tail.push_str("permissions: {}\n");
                }
                tail.push_str(GHA_STUB);
            }
            Texts::inside_owned(rule, String::new(), 0, tail)
        }
        (Service::GithubActions, Shape::Job) => {
            let reusable = m.contains_key("uses");
            let runs_on = if m.contains_key("runs-on") || reusable { "" } else { "    runs-on: ubuntu-latest\n" };
            // Job-level keys shown without the job's steps: the wrapper supplies a step.
            let steps = if m.contains_key("steps") || reusable { "" } else { "    steps:\n      - run: echo doc2ci\n" };
            Texts::inside_owned(rule, format!("{GHA_JOB_HEAD}{runs_on}"), 4, steps.into())
        }
        (Service::GithubActions, Shape::Step) => Texts::inside(rule, &format!("{GHA_STEPS_HEAD}      -\n"), 8, ""),
        (Service::GithubActions, Shape::Triggers) => {
            Texts::inside_owned(rule, "on:\n".into(), 2, format!("permissions: {{}}\n{GHA_STUB}"))
        }
        (Service::GithubActions, Shape::Jobs) => Texts::inside(rule, "on: push\npermissions: {}\njobs:\n", 2, ""),
        (Service::CircleCi, Shape::Config) => {
            let head = if m.contains_key("version") { "" } else { "version: 2.1\n" };
            let tail = match (m.get("jobs").and_then(Value::as_map), m.contains_key("workflows")) {
                (_, true) => String::new(),
                (Some(jobs), false) => cci_workflow(&job_names(jobs)),
                (None, false) => format!(
                    "jobs:\n  {WRAPPER_JOB}:\n{CCI_EXECUTOR}    steps:\n      - checkout\n{}",
                    cci_workflow(&[WRAPPER_JOB.into()])
                ),
            };
            Texts::inside_owned(rule, head.into(), 0, tail)
        }
        (Service::CircleCi, Shape::Job) => {
            let has_executor = ["docker", "machine", "macos", "executor"].iter().any(|k| m.contains_key(k));
            let exec = if has_executor { "" } else { CCI_EXECUTOR };
            let head = format!("version: 2.1\njobs:\n  {FRAGMENT_JOB}:\n{exec}");
            Texts::inside_owned(rule, head, 4, cci_workflow(&[FRAGMENT_JOB.into()]))
        }
        (Service::CircleCi, Shape::Jobs) => {
            Texts::inside_owned(rule, "version: 2.1\njobs:\n".into(), 2, cci_workflow(&job_names(m)))
        }
        (Service::GitlabCi, Shape::Pipeline) => {
            let stub = format!("{WRAPPER_JOB}:\n  stage: .pre\n  script:\n    - echo doc2ci\n");
            Texts::inside_owned(rule, String::new(), 0, stub)
        }
        (Service::GitlabCi, Shape::Job) => Texts::inside(rule, "doc2ci-fragment:\n", 2, ""),
        (Service::TravisCi, Shape::Section) => Texts::inside(rule, "language: shell\n", 0, ""),
        (service, shape) => unreachable!("doc2ci-sem gave {service} a {shape:?} fragment"),
    }
}

/// A workflow running `jobs` (names quoted as JSON strings, which YAML reads as written).
fn cci_workflow(jobs: &[String]) -> String {
    let mut s = format!("workflows:\n  {WRAPPER_JOB}:\n    jobs:\n");
    for j in jobs {
        s.push_str(&format!("      - {}\n", serde_json::Value::String(j.clone())));
    }
    s
}

fn job_names(m: &Map) -> Vec<String> {
    m.keys().filter_map(|k| k.scalar_text().map(str::to_string)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wrapped(service: Service, text: &str) -> Wrapped {
        match complete(service, text) {
            Completion::Wrapped(w) => w,
            other => panic!("{text:?}: expected a completion, got {other:?}"),
        }
    }

    #[test]
    fn standalone_texts_are_not_wrapped() {
        assert_eq!(complete(Service::GithubActions, "on: push\njobs: {}\n"), Completion::Standalone);
        assert_eq!(complete(Service::GithubActions, "not: [yaml"), Completion::Standalone);
        assert_eq!(complete(Service::GitlabCi, "build:\n  script: [make]\n"), Completion::Standalone);
    }

    #[test]
    fn github_steps_keep_their_text_and_map_back() {
        let text = "- uses: actions/checkout@v4\n- run: |\n    make\n    make test\n";
        let w = wrapped(Service::GithubActions, text);
        assert_eq!(w.rule, "steps");
        assert_eq!(w.before, 6);
        assert_eq!(w.lines, 4);
        let frag: Vec<&str> = w.text.lines().skip(6).take(4).map(|l| &l[6..]).collect();
        assert_eq!(frag, text.lines().collect::<Vec<_>>());
        // The completed file is a standalone workflow.
        let v = doc2ci_yaml::load(&w.text, &Limits::default()).unwrap();
        assert!(!is_fragment(Service::GithubActions, &v));
        assert_eq!(w.to_fragment(8, Some(9)), Some((2, Some(3))));
        assert_eq!(w.to_fragment(3, Some(3)), None);
        assert_eq!(w.to_fragment(11, None), None);
    }

    #[test]
    fn github_shapes() {
        let rule = |t: &str| wrapped(Service::GithubActions, t).rule;
        assert_eq!(rule("jobs:\n  a:\n    runs-on: x\n    steps: [{run: make}]\n"), "workflow");
        assert_eq!(rule("runs-on: ubuntu-latest\nsteps:\n  - run: make\n"), "job");
        assert_eq!(
            rule("build:\n  runs-on: x\n  steps: [{run: a}]\ntest:\n  runs-on: x\n  steps: [{run: b}]\n"),
            "jobs"
        );
        assert_eq!(rule("name: Build\nrun: make\n"), "step");
        assert_eq!(rule("push:\n  branches: [main]\nschedule:\n  - cron: '0 0 * * *'\n"), "triggers");
        assert!(matches!(complete(Service::GithubActions, "foo: bar\n"), Completion::NoRule(_)));
        assert!(matches!(complete(Service::GithubActions, "- 1\n- 2\n"), Completion::NoRule(_)));
    }

    #[test]
    fn every_completion_is_standalone() {
        let cases: &[(Service, &str)] = &[
            (Service::GithubActions, "jobs:\n  a:\n    runs-on: x\n    steps: [{run: make}]\n"),
            (Service::GithubActions, "runs-on: ubuntu-latest\nsteps:\n  - run: make\n"),
            (Service::GithubActions, "name: Build\nrun: make\n"),
            (Service::GithubActions, "push:\n  branches: [main]\n"),
            (Service::GithubActions, "---\n- run: make\n"),
            (Service::GithubActions, "# steps\n\n---\n- run: make\n"),
            (Service::CircleCi, "jobs:\n  build:\n    docker: [{image: x}]\n    steps: [checkout]\n"),
            (Service::CircleCi, "docker:\n  - image: x\nsteps:\n  - checkout\n"),
            (Service::CircleCi, "steps:\n  - checkout\n"),
            (Service::CircleCi, "- checkout\n- run: make\n"),
            (Service::CircleCi, "orbs:\n  node: circleci/node@5\n"),
            (Service::GitlabCi, "stages: [build]\n.hidden:\n  script: [x]\n"),
            (Service::GitlabCi, "script:\n  - make\nstage: build\n"),
            (Service::GitlabCi, "- make\n- make test\n"),
            (Service::TravisCi, "deploy:\n  provider: pages\n"),
            (Service::TravisCi, "- make\n"),
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
        let w = wrapped(Service::CircleCi, "jobs:\n  build:\n    docker: [{image: x}]\n    steps: [checkout]\n");
        assert!(w.text.starts_with("version: 2.1\n"), "{}", w.text);
        assert!(w.text.ends_with("jobs:\n      - \"build\"\n"), "{}", w.text);
        assert!(matches!(
            complete(Service::CircleCi, "workflows:\n  main:\n    jobs: [build]\n"),
            Completion::NoRule(_)
        ));
    }
}
