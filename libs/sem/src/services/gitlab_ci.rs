//! GitLab CI: what a `.gitlab-ci.yml` means, per the CI/CD YAML syntax reference.

use doc2ci_yaml::{Map, Value};

use super::{default_of, keys, one_item_list, trim_shell, under, values_as_strings, Applied, Jobs, Rule, Service};
use super::{AuthorIds, Docs, Shorthand, Treated, Wrap, WRAPPER_JOB};
use crate::node::{key, Node};
use crate::{Shape, FRAGMENT_JOB};

pub const SERVICE: Service = Service {
    name: "gitlab-ci",
    display: "GitLab CI",
    schema_asset: "schemas/gitlab-ci.json",
    gitlab_reference_tag: true,
    lint_tools: &["gitlab-ci-local"],
    // Every top-level key but the keywords is a job, save `pages`, a job whose name GitLab gives a
    // meaning (it publishes GitLab Pages).
    author_ids: AuthorIds {
        keys_under: &[],
        items_under: &["stages"],
        top_level: |k| !GLOBAL_KEYWORDS.contains(&k) && k != "pages",
    },
    docs: Docs {
        // GitLab's CI/CD documentation (docs.gitlab.com, the `doc/` folder of GitLab rendered by its
        // Hugo site, and the earlier Nanoc/kramdown site, whose markup older snapshots have): `/ci/`
        // (it was `/ee/ci/`, which redirects there). Numbered archives (`/17.11/ci/…`) start with
        // another prefix. Hugo renders code as `div.highlight > pre > code.language-yaml[data-lang=yaml]`;
        // the Nanoc site (and snapshots of it) as kramdown's `div.language-yaml.highlighter-rouge pre >
        // code`. Alerts put a one-paragraph text straight into the alert's div; tabs split a container
        // at `.tab-title`, all panels in the page (a browser hides the inactive ones).
        profile: "gitlab-docs",
        licence: "CC-BY-SA-4.0 (GitLab documentation content)",
        start_urls: &["/ci/", "/ci/quick_start/", "/ci/yaml/"],
        allowed_prefixes: &["/ci/", "/ee/ci/"],
        exclude_paths: &[],
        keep_query: false,
        sitemap: false,
        content_root: ".docs-content, .article-content, main",
        remove: &[
            "nav",
            "aside",
            "footer",
            "button",
            "svg",
            "a.anchor",
            ".help-feedback",
            "[data-vue-app=\"survey-banner\"]",
            "[data-vue-app=\"codeblock-toolbar\"]",
            ".version-history",
            ".introduced-in",
            ".availability",
            "#markdown-toc",
            ".clip-btn",
        ],
        yaml_blocks: &[
            ".highlight pre > code[data-lang=\"yaml\"]",
            ".highlight pre > code[data-lang=\"yml\"]",
            "pre > code.language-yaml",
            "pre > code.language-yml",
            "div.language-yaml.highlighter-rouge pre > code",
            "div.language-yml.highlighter-rouge pre > code",
        ],
        code_blocks: &["pre"],
        more_prose_blocks: &["div.alert", ".alert-body", ".tab-title"],
        keep_hidden: &[".tab-pane", "[role=\"tabpanel\"]", "[data-vue-app=\"docs-tabs\"] *"],
    },
    standalone,
    fragment,
    lift,
    complete,
    jobs: Jobs::TopLevelExcept(&GLOBAL_KEYWORDS),
    empty_is_a_value: &[],
    canonicalize,
    rules: &[
        Rule {
            name: "script-string-or-list",
            says: "`script`, `before_script`, `after_script` (and `hooks:pre_get_sources_script`) as a string ≡ a one-item list; nested lists are flattened",
            source: "https://docs.gitlab.com/ci/yaml/#script",
        },
        Rule {
            name: "extends-string-or-list",
            says: "`extends: .tmpl` ≡ `extends: [.tmpl]`",
            source: "https://docs.gitlab.com/ci/yaml/#extends",
        },
        Rule {
            name: "report-path-or-list",
            says: "an `artifacts:reports` report's one path ≡ a one-item list of paths",
            source: "https://docs.gitlab.com/ci/yaml/artifacts_reports/",
        },
        Rule {
            name: "pull-policy-string-or-list",
            says: "an image's or service's `pull_policy: always` ≡ `pull_policy: [always]`",
            source: "https://docs.gitlab.com/ci/yaml/#imagepull_policy",
        },
        Rule {
            name: "exit-codes-number-or-list",
            says: "`allow_failure:exit_codes` and `retry:exit_codes` as one code ≡ a one-item list",
            source: "https://docs.gitlab.com/ci/yaml/#allow_failureexit_codes",
        },
        Rule {
            name: "include-file-string-or-list",
            says: "an include's `file: a.yml` ≡ `file: [a.yml]`",
            source: "https://docs.gitlab.com/ci/yaml/#includeproject",
        },
        Rule {
            name: "image-name",
            says: "`image: x` ≡ `image: {name: x}`; a service `x` ≡ `{name: x}`",
            source: "https://docs.gitlab.com/ci/yaml/#imagename",
        },
        Rule {
            name: "needs-job",
            says: "`needs: [a]` ≡ `needs: [{job: a}]`",
            source: "https://docs.gitlab.com/ci/yaml/#needs",
        },
        Rule {
            name: "variables-are-strings",
            says: "a CI/CD variable's value reaches the job as a string: `A: 1` ≡ `A: \"1\"`",
            source: "https://docs.gitlab.com/ci/yaml/#variables",
        },
        Rule {
            name: "default-stage",
            says: "a job with no `stage` runs in `test`: `stage: test` is the default",
            source: "https://docs.gitlab.com/ci/yaml/#stage",
        },
        Rule {
            name: "default-when",
            says: "`when: on_success` is the default",
            source: "https://docs.gitlab.com/ci/yaml/#when",
        },
        Rule {
            name: "default-allow-failure",
            says: "`allow_failure` defaults to false, and to true for a manual job",
            source: "https://docs.gitlab.com/ci/yaml/#allow_failure",
        },
        Rule {
            name: "global-defaults",
            says: "top-level `image`, `services`, `cache`, `before_script`, `after_script` ≡ the same under `default:`",
            source: "https://docs.gitlab.com/ci/yaml/#globally-defined-image-services-cache-before_script-after_script",
        },
        Rule {
            name: "shell-trailing-whitespace",
            says: "a script line's trailing whitespace changes nothing",
            source: "https://docs.gitlab.com/ci/yaml/script/",
        },
    ],
    shorthands: SHORTHANDS,
};

/// Top-level keys that are not jobs.
pub const GLOBAL_KEYWORDS: [&str; 12] = [
    "default",
    "include",
    "stages",
    "variables",
    "workflow",
    "image",
    "services",
    "cache",
    "before_script",
    "after_script",
    "types",
    "spec",
];
/// The keys of a job.
pub const JOB_KEYS: &[&str] = &[
    "script",
    "run",
    "stage",
    "image",
    "services",
    "before_script",
    "after_script",
    "rules",
    "needs",
    "artifacts",
    "cache",
    "variables",
    "only",
    "except",
    "tags",
    "when",
    "allow_failure",
    "environment",
    "dependencies",
    "extends",
    "retry",
    "timeout",
    "parallel",
    "trigger",
    "coverage",
    "interruptible",
    "resource_group",
    "release",
    "pages",
    "secrets",
    "inherit",
    "id_tokens",
    "hooks",
    "identity",
    "manual_confirmation",
    "start_in",
];
const RUNS: [&str; 4] = ["script", "run", "trigger", "extends"];
const DEFAULTABLE: [&str; 5] = ["image", "services", "cache", "before_script", "after_script"];

/// A file includes another or has at least one visible job: a top-level key that is not a global
/// keyword and does not start with `.`, whose value is a mapping with `script`, `run`, `trigger`
/// or `extends` (GitLab refuses a file with no visible job).
fn standalone(m: &Map) -> bool {
    m.contains_key("include")
        || m.iter().any(|(k, v)| {
            let Some(name) = k.as_str() else { return false };
            !name.starts_with('.')
                && !GLOBAL_KEYWORDS.contains(&name)
                && v.as_map().is_some_and(|job| RUNS.iter().any(|kw| job.contains_key(kw)))
        })
}

fn fragment(v: &Value) -> Option<Shape> {
    match v {
        Value::Seq(items) => items.iter().all(|i| i.scalar_text().is_some()).then_some(Shape::Script),
        Value::Map(m) => {
            let ks = keys(m);
            if ks.iter().all(|k| GLOBAL_KEYWORDS.contains(k) || k.starts_with('.')) {
                Some(Shape::Pipeline)
            } else if ks.iter().all(|k| JOB_KEYS.contains(k)) && RUNS.iter().any(|k| m.contains_key(k)) {
                Some(Shape::Job)
            } else {
                None
            }
        }
        _ => None,
    }
}

fn lift(shape: Shape, n: Node) -> Node {
    match shape {
        Shape::Job => under(FRAGMENT_JOB, n),
        Shape::Script => under(FRAGMENT_JOB, under("script", n)),
        _ => n,
    }
}

fn canonicalize(root: &mut Node, a: &mut Applied) {
    let Some(m) = root.as_map_mut() else { return };
    // Globally defined defaults move under `default:` (where `default:` does not set them).
    let moved: Vec<&str> = DEFAULTABLE.iter().copied().filter(|k| m.contains_key(&key(k))).collect();
    for k in moved {
        let default = m.entry(key("default")).or_insert_with(|| Node::Map(Default::default()));
        let Some(d) = default.as_map_mut() else { continue };
        if d.contains_key(&key(k)) {
            continue;
        }
        if a.apply("global-defaults") {
            let v = m.remove(&key(k)).expect("present");
            m.get_mut(&key("default")).and_then(Node::as_map_mut).expect("a mapping").insert(key(k), v);
        }
    }
    if let Some(v) = m.get_mut(&key("variables")) {
        canon_variables(v, a);
    }
    if let Some(include) = m.get_mut(&key("include")) {
        let items: Vec<&mut Node> = match include {
            Node::Seq(items) => items.iter_mut().collect(),
            one => vec![one],
        };
        for item in items {
            if let Some(f) = item.get_mut("file") {
                one_item_list(f, a, "include-file-string-or-list");
            }
        }
    }
    if let Some(d) = m.get_mut(&key("default")) {
        canon_job_keys(d, a);
    }
    for (name, job) in m.iter_mut() {
        let is_job = name.as_str().is_some_and(|n| !GLOBAL_KEYWORDS.contains(&n));
        if !is_job || job.as_map().is_none() {
            continue;
        }
        canon_job_keys(job, a);
        // A default written in a template or an extending job can override an inherited value:
        // there it is not the default.
        let inherits = job.get("extends").is_some() || name.as_str().is_some_and(|n| n.starts_with('.'));
        if !inherits {
            default_of(job, "stage", Node::Str("test".into()), a, "default-stage");
            let manual = job.get("when") == Some(&Node::Str("manual".into()));
            default_of(job, "when", Node::Str("on_success".into()), a, "default-when");
            default_of(job, "allow_failure", Node::Bool(manual), a, "default-allow-failure");
        }
        if let Some(Node::Seq(needs)) = job.get_mut("needs") {
            for n in needs.iter_mut().filter(|n| matches!(n, Node::Str(_))) {
                if a.apply("needs-job") {
                    *n = under("job", std::mem::replace(n, Node::Null));
                }
            }
        }
    }
}

/// The keys a job shares with `default:`.
fn canon_job_keys(job: &mut Node, a: &mut Applied) {
    for k in ["script", "before_script", "after_script"] {
        if let Some(s) = job.get_mut(k) {
            one_item_list(s, a, "script-string-or-list");
            flatten(s, a);
            if let Node::Seq(lines) = s {
                for l in lines {
                    trim_shell(l, a, "shell-trailing-whitespace");
                }
            }
        }
    }
    if let Some(s) = job.get_mut("hooks").and_then(|h| h.get_mut("pre_get_sources_script")) {
        one_item_list(s, a, "script-string-or-list");
    }
    if let Some(e) = job.get_mut("extends") {
        one_item_list(e, a, "extends-string-or-list");
    }
    if let Some(Node::Map(reports)) = job.get_mut("artifacts").and_then(|r| r.get_mut("reports")) {
        // `coverage_report` is a mapping of its own; every other report takes a path or paths.
        for (k, v) in reports.iter_mut() {
            if k.as_str() != Some("coverage_report") {
                one_item_list(v, a, "report-path-or-list");
            }
        }
    }
    for k in ["allow_failure", "retry"] {
        if let Some(c) = job.get_mut(k).and_then(|m| m.get_mut("exit_codes")) {
            one_item_list(c, a, "exit-codes-number-or-list");
        }
    }
    if let Some(i @ Node::Str(_)) = job.get_mut("image") {
        if a.apply("image-name") {
            *i = under("name", std::mem::replace(i, Node::Null));
        }
    }
    if let Some(p) = job.get_mut("image").and_then(|i| i.get_mut("pull_policy")) {
        one_item_list(p, a, "pull-policy-string-or-list");
    }
    if let Some(Node::Seq(services)) = job.get_mut("services") {
        for s in services.iter_mut() {
            if matches!(s, Node::Str(_)) && a.apply("image-name") {
                *s = under("name", std::mem::replace(s, Node::Null));
            }
            if let Some(p) = s.get_mut("pull_policy") {
                one_item_list(p, a, "pull-policy-string-or-list");
            }
        }
    }
    if let Some(v) = job.get_mut("variables") {
        canon_variables(v, a);
    }
}

fn canon_variables(v: &mut Node, a: &mut Applied) {
    values_as_strings(v, a, "variables-are-strings");
}

/// Nested script lists run as one flat list.
fn flatten(s: &mut Node, a: &mut Applied) {
    let Node::Seq(items) = s else { return };
    if !items.iter().any(|i| matches!(i, Node::Seq(_))) || !a.apply("script-string-or-list") {
        return;
    }
    fn push(out: &mut Vec<Node>, n: Node) {
        match n {
            Node::Seq(items) => items.into_iter().for_each(|i| push(out, i)),
            other => out.push(other),
        }
    }
    let mut out = Vec::new();
    for i in std::mem::take(items) {
        push(&mut out, i);
    }
    *items = out;
}

fn complete(shape: Shape, v: &Value) -> Option<Wrap> {
    Some(match (shape, v.as_map()) {
        (Shape::Pipeline, Some(_)) => {
            Wrap::new(shape, "", 0, format!("{WRAPPER_JOB}:\n  stage: .pre\n  script:\n    - echo doc2ci\n"))
        }
        (Shape::Job, Some(_)) => Wrap::new(shape, "doc2ci-fragment:\n", 2, ""),
        (Shape::Script, None) => Wrap::new(shape, "doc2ci-fragment:\n  script:\n", 4, ""),
        _ => return None,
    })
}

/// The spec's one-or-many keys (see [`super::Shorthand`]).
const SHORTHANDS: &[Shorthand] = &[
    Shorthand { key: "script", is: Treated::Rule("script-string-or-list") },
    Shorthand { key: "before_script", is: Treated::Rule("script-string-or-list") },
    Shorthand { key: "after_script", is: Treated::Rule("script-string-or-list") },
    Shorthand { key: "pre_get_sources_script", is: Treated::Rule("script-string-or-list") },
    Shorthand { key: "extends", is: Treated::Rule("extends-string-or-list") },
    Shorthand { key: "pull_policy", is: Treated::Rule("pull-policy-string-or-list") },
    Shorthand { key: "exit_codes", is: Treated::Rule("exit-codes-number-or-list") },
    Shorthand { key: "file", is: Treated::Rule("include-file-string-or-list") },
    Shorthand { key: "api_fuzzing", is: Treated::Rule("report-path-or-list") },
    Shorthand { key: "codequality", is: Treated::Rule("report-path-or-list") },
    Shorthand { key: "container_scanning", is: Treated::Rule("report-path-or-list") },
    Shorthand { key: "coverage_fuzzing", is: Treated::Rule("report-path-or-list") },
    Shorthand { key: "cyclonedx", is: Treated::Rule("report-path-or-list") },
    Shorthand { key: "dast", is: Treated::Rule("report-path-or-list") },
    Shorthand { key: "dependency_scanning", is: Treated::Rule("report-path-or-list") },
    Shorthand { key: "dotenv", is: Treated::Rule("report-path-or-list") },
    Shorthand { key: "junit", is: Treated::Rule("report-path-or-list") },
    Shorthand { key: "license_management", is: Treated::Rule("report-path-or-list") },
    Shorthand { key: "license_scanning", is: Treated::Rule("report-path-or-list") },
    Shorthand { key: "load_performance", is: Treated::Rule("report-path-or-list") },
    Shorthand { key: "lsif", is: Treated::Rule("report-path-or-list") },
    Shorthand { key: "metrics", is: Treated::Rule("report-path-or-list") },
    Shorthand { key: "repository_xray", is: Treated::Rule("report-path-or-list") },
    Shorthand { key: "requirements", is: Treated::Rule("report-path-or-list") },
    Shorthand { key: "sarif", is: Treated::Rule("report-path-or-list") },
    Shorthand { key: "sast", is: Treated::Rule("report-path-or-list") },
    Shorthand { key: "secret_detection", is: Treated::Rule("report-path-or-list") },
    Shorthand { key: "terraform", is: Treated::Rule("report-path-or-list") },
    Shorthand {
        key: "aud",
        is: Treated::Excluded(
            "an ID token's audience is issued as written, a JSON string or an array, which a relying \
             party may read differently",
        ),
    },
    Shorthand {
        key: "command",
        is: Treated::Excluded(
            "a service's `command` is documented as a list of arguments (Docker's exec form); a string \
             is not documented as one",
        ),
    },
    Shorthand {
        key: "default",
        is: Treated::Excluded("an input's default takes the input's own type: a string and a list are two values"),
    },
    Shorthand {
        key: "stage",
        is: Treated::Excluded("a job is in one stage; the schema's list form is not documented"),
    },
    Shorthand {
        key: "variables",
        is: Treated::Excluded(
            "documented as a map of names to values; the schema's other forms are not documented as \
             equal to it",
        ),
    },
    Shorthand {
        key: "when",
        is: Treated::Excluded(
            "one keyword (`on_success`, `manual` …) wherever it sits; the schema's list form is not \
             documented",
        ),
    },
];
