//! CircleCI: what a `.circleci/config.yml` means, per the configuration reference.

use doc2ci_yaml::{Map, Value};

use super::{
    all_in, default_of, entries_mut, items_mut, one_item_list, trim_shell, under, Applied, Jobs, Rule, Service,
};
use super::{AuthorIds, Docs, Shorthand, Treated, Wrap, WRAPPER_JOB};
use crate::node::{key, Node};
use crate::{Shape, FRAGMENT_JOB};

pub const SERVICE: Service = Service {
    name: "circleci",
    display: "CircleCI",
    schema_asset: "schemas/circleci.json",
    gitlab_reference_tag: false,
    lint_tools: &["circleci-config-parser"],
    author_ids: AuthorIds {
        keys_under: &["jobs", "workflows", "commands", "executors"],
        items_under: &[],
        top_level: |_| false,
    },
    docs: Docs {
        // circleci.com/docs, `circleci/circleci-docs` (Antora 3, Asciidoctor, Shiki, Asciidoctor
        // Tabs): the components `guides`, `reference` and `orbs` (server-admin is versioned and out of
        // scope; every page also links a Markdown twin `index.md`, and `llms.txt`). Shiki renders
        // `pre.highlight > code[data-lang=yaml]`; callout markers `<i class="conum"></i><b>(1)</b>`
        // sit inside the code and would end up in the YAML (Shiki's code has no other `b`: `pre b`);
        // the info bar under the title is removed by what it holds (`.platform-badge`,
        // `[data-dropdown]`), never as "the div after the title", which is a page's `#preamble` when
        // it has no info bar; `NOTE:` admonitions put their text straight into `td.content`;
        // Asciidoctor Tabs panels are all in the page (JavaScript hides the inactive ones with
        // `hidden`). A block's title (`div.title`, a listing's caption) is a line of its own, after the
        // step that introduces the listing, not part of that step's text.
        profile: "circleci-docs",
        licence: "not stated in circleci/circleci-docs: ask CircleCI before redistributing",
        start_urls: &[
            "/docs/guides/getting-started/first-steps/",
            "/docs/reference/configuration-reference/",
            "/docs/orbs/use/orb-intro/",
        ],
        allowed_prefixes: &["/docs/guides/", "/docs/reference/", "/docs/orbs/"],
        exclude_paths: &[".md", "/llms.txt", "/_/"],
        keep_query: false,
        sitemap: false,
        content_root: "article.doc",
        remove: &[
            "nav",
            "aside",
            "footer",
            "button",
            "svg",
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
        ],
        yaml_blocks: &[
            "pre > code[data-lang=\"yaml\"]",
            "pre > code[data-lang=\"yml\"]",
            "pre > code.language-yaml",
            "div.highlight[data-lang=\"yaml\"] > pre",
        ],
        code_blocks: &["pre"],
        more_prose_blocks: &["div.title", ".admonitionblock td.content", ".colist td:last-child", ".hdlist2"],
        keep_hidden: &[".tabpanel"],
    },
    // `version` and at least one of `jobs` or `workflows`.
    standalone: |m| m.contains_key("version") && (m.contains_key("jobs") || m.contains_key("workflows")),
    fragment,
    lift,
    complete,
    jobs: Jobs::Under("jobs"),
    empty_is_a_value: &[],
    canonicalize,
    rules: &[
        Rule {
            name: "step-forms",
            says:
                "a step without parameters as a name ≡ a one-key map: `- checkout` ≡ `- checkout: {}` ≡ `- checkout:`",
            source: "https://circleci.com/docs/configuration-reference/#steps",
        },
        Rule {
            name: "run-shorthand",
            says: "`- run: cmd` ≡ `- run: {command: cmd}`",
            source: "https://circleci.com/docs/configuration-reference/#run",
        },
        Rule {
            name: "default-run",
            says: "`run`'s `background: false` and `when: on_success` are its defaults",
            source: "https://circleci.com/docs/configuration-reference/#run",
        },
        Rule {
            name: "workflow-job-forms",
            says: "a workflow's job entry as a name ≡ a one-key map with no settings: `- build` ≡ `- build: {}`",
            source: "https://circleci.com/docs/configuration-reference/#jobs-in-workflow",
        },
        Rule {
            name: "context-string-or-list",
            says: "a workflow job's `context: org-global` ≡ `context: [org-global]`",
            source: "https://circleci.com/docs/configuration-reference/#context",
        },
        Rule {
            name: "filter-string-or-list",
            says: "a branch or tag filter's `only: main` ≡ `only: [main]` (and `ignore`)",
            source: "https://circleci.com/docs/configuration-reference/#branches",
        },
        Rule {
            name: "default-parallelism",
            says: "a job's `parallelism: 1` is the default",
            source: "https://circleci.com/docs/configuration-reference/#parallelism",
        },
        Rule {
            name: "shell-trailing-whitespace",
            says: "a `run` command's trailing whitespace (per line, and blank lines at its end) changes nothing",
            source: "https://circleci.com/docs/configuration-reference/#run",
        },
    ],
    shorthands: SHORTHANDS,
};

/// The keys a config may have at its top level.
pub const TOP_KEYS: &[&str] = &["version", "setup", "orbs", "commands", "executors", "jobs", "workflows", "parameters"];
/// The keys of a job.
pub const JOB_KEYS: &[&str] = &[
    "docker",
    "machine",
    "macos",
    "executor",
    "steps",
    "resource_class",
    "parallelism",
    "environment",
    "working_directory",
    "parameters",
    "shell",
    "circleci_ip_ranges",
    "description",
];

pub fn is_step(v: &Value) -> bool {
    match v {
        Value::Str(_) => true,
        Value::Map(m) => m.len() == 1,
        _ => false,
    }
}

pub fn is_job(m: &Map) -> bool {
    all_in(m, JOB_KEYS) && m.contains_key("steps")
}

fn fragment(v: &Value) -> Option<Shape> {
    match v {
        Value::Seq(items) => items.iter().all(is_step).then_some(Shape::Steps),
        Value::Map(m) if all_in(m, TOP_KEYS) => {
            let jobs = m.get("jobs");
            // Jobs that are not a mapping, or workflows running jobs defined elsewhere, cannot be
            // completed without inventing them.
            let odd_jobs = jobs.is_some_and(|j| j.as_map().is_none()) && !m.contains_key("workflows");
            let foreign = m.contains_key("workflows") && jobs.is_none() && !m.contains_key("orbs");
            (!odd_jobs && !foreign).then_some(Shape::Config)
        }
        Value::Map(m) if is_job(m) => Some(Shape::Job),
        Value::Map(m) if m.iter().all(|(_, v)| v.as_map().is_some_and(is_job)) => Some(Shape::Jobs),
        _ => None,
    }
}

fn lift(shape: Shape, n: Node) -> Node {
    let job = |j: Node| under("jobs", under(FRAGMENT_JOB, j));
    match shape {
        Shape::Job => job(n),
        Shape::Jobs => under("jobs", n),
        Shape::Steps => job(under("steps", n)),
        _ => n,
    }
}

fn canonicalize(root: &mut Node, a: &mut Applied) {
    for job in entries_mut(root, "jobs") {
        default_of(job, "parallelism", Node::Int("1".into()), a, "default-parallelism");
    }
    for section in ["jobs", "commands"] {
        for job in entries_mut(root, section) {
            if let Some(steps) = job.get_mut("steps") {
                canon_steps(steps, a);
            }
        }
    }
    for wf in entries_mut(root, "workflows") {
        let Some(Node::Seq(jobs)) = wf.get_mut("jobs") else { continue };
        for entry in jobs {
            one_key_map(entry, a, "workflow-job-forms");
            for settings in entry.as_map_mut().into_iter().flat_map(|m| m.values_mut()) {
                if let Some(c) = settings.get_mut("context") {
                    one_item_list(c, a, "context-string-or-list");
                }
                filters(settings.get_mut("filters"), a);
            }
        }
        for trigger in items_mut(wf, "triggers") {
            filters(trigger.get_mut("schedule").and_then(|s| s.get_mut("filters")), a);
        }
    }
}

/// A job's or a schedule's `filters`: each of `branches` and `tags` takes `only` and `ignore`.
fn filters(f: Option<&mut Node>, a: &mut Applied) {
    let Some(f) = f else { return };
    for on in ["branches", "tags"] {
        for k in ["only", "ignore"] {
            if let Some(v) = f.get_mut(on).and_then(|b| b.get_mut(k)) {
                one_item_list(v, a, "filter-string-or-list");
            }
        }
    }
}

/// `name` ≡ `{name: {}}` ≡ `{name: null}`.
fn one_key_map(entry: &mut Node, a: &mut Applied, rule: &'static str) {
    match entry {
        Node::Str(_) if a.apply(rule) => {
            *entry = Node::Map([(std::mem::replace(entry, Node::Null), Node::Map(Default::default()))].into());
        }
        Node::Map(m) if m.len() == 1 => {
            let v = m.values_mut().next().expect("one entry");
            if matches!(v, Node::Null) && a.apply(rule) {
                *v = Node::Map(Default::default());
            }
        }
        _ => {}
    }
}

fn canon_steps(steps: &mut Node, a: &mut Applied) {
    let Node::Seq(items) = steps else { return };
    for step in items {
        one_key_map(step, a, "step-forms");
        let Some(m) = step.as_map_mut() else { continue };
        if let Some(run) = m.get_mut(&key("run")) {
            if let Node::Str(_) = run {
                if a.apply("run-shorthand") {
                    *run = under("command", std::mem::replace(run, Node::Null));
                }
            }
            default_of(run, "background", Node::Bool(false), a, "default-run");
            default_of(run, "when", Node::Str("on_success".into()), a, "default-run");
            if let Some(c) = run.get_mut("command") {
                trim_shell(c, a, "shell-trailing-whitespace");
            }
        }
        // `when`/`unless` steps hold steps of their own.
        for k in ["when", "unless"] {
            if let Some(inner) = m.get_mut(&key(k)).and_then(|c| c.get_mut("steps")) {
                canon_steps(inner, a);
            }
        }
    }
}

const EXECUTOR: &str = "    docker:\n      - image: cimg/base:current\n";

fn complete(shape: Shape, v: &Value) -> Option<Wrap> {
    Some(match (shape, v.as_map()) {
        (Shape::Config, Some(m)) => {
            let head = if m.contains_key("version") { "" } else { "version: 2.1\n" };
            let tail = match (m.get("jobs").and_then(Value::as_map), m.contains_key("workflows")) {
                (_, true) => String::new(),
                (Some(jobs), false) => workflow(&job_names(jobs)),
                (None, false) => format!(
                    "jobs:\n  {WRAPPER_JOB}:\n{EXECUTOR}    steps:\n      - checkout\n{}",
                    workflow(&[WRAPPER_JOB.into()])
                ),
            };
            Wrap::new(shape, head, 0, tail)
        }
        (Shape::Job, Some(m)) => {
            let has_executor = ["docker", "machine", "macos", "executor"].iter().any(|k| m.contains_key(k));
            let exec = if has_executor { "" } else { EXECUTOR };
            Wrap::new(
                shape,
                format!("version: 2.1\njobs:\n  {FRAGMENT_JOB}:\n{exec}"),
                4,
                workflow(&[FRAGMENT_JOB.into()]),
            )
        }
        (Shape::Jobs, Some(m)) => Wrap::new(shape, "version: 2.1\njobs:\n", 2, workflow(&job_names(m))),
        (Shape::Steps, None) => {
            let head = format!("version: 2.1\njobs:\n  {FRAGMENT_JOB}:\n{EXECUTOR}    steps:\n");
            Wrap::new(shape, head, 6, workflow(&[FRAGMENT_JOB.to_string()]))
        }
        _ => return None,
    })
}

/// A workflow running `jobs` (names quoted as JSON strings, which YAML reads as written).
fn workflow(jobs: &[String]) -> String {
    let mut s = format!("workflows:\n  {WRAPPER_JOB}:\n    jobs:\n");
    for j in jobs {
        s.push_str(&format!("      - {}\n", serde_json::Value::String(j.clone())));
    }
    s
}

fn job_names(m: &Map) -> Vec<String> {
    m.keys().filter_map(|k| k.scalar_text().map(str::to_string)).collect()
}

/// The spec's one-or-many keys (see [`super::Shorthand`]).
const SHORTHANDS: &[Shorthand] = &[
    Shorthand { key: "context", is: Treated::Rule("context-string-or-list") },
    Shorthand { key: "only", is: Treated::Rule("filter-string-or-list") },
    Shorthand { key: "ignore", is: Treated::Rule("filter-string-or-list") },
    Shorthand {
        key: "command",
        is: Treated::Excluded(
            "a Docker image's start command override: the reference documents no equality of a \
             string and a list (Docker runs the two through a shell and directly)",
        ),
    },
    Shorthand {
        key: "entrypoint",
        is: Treated::Excluded(
            "a Docker image's entrypoint override: as `command`, a string and a list are Docker's \
             shell and exec forms, which the reference does not make equal",
        ),
    },
    Shorthand {
        key: "default",
        is: Treated::Excluded(
            "a parameter's default takes the parameter's own type: a string and a list are two values",
        ),
    },
    Shorthand {
        key: "environment",
        is: Treated::Excluded(
            "documented as a map of variables; the schema's string and list forms are not documented as \
             equal to it",
        ),
    },
    Shorthand {
        key: "fingerprints",
        is: Treated::Excluded(
            "`add_ssh_keys` is documented with a list of fingerprints only; the schema's string form is \
             not documented",
        ),
    },
    Shorthand {
        key: "keys",
        is: Treated::Excluded(
            "`restore_cache` is documented with a list of `keys` (one key is `key`); the schema's \
             string form is not documented",
        ),
    },
    Shorthand {
        key: "paths",
        is: Treated::Excluded(
            "`save_cache` and `persist_to_workspace` are documented with a list of `paths` only; the \
             schema's string form is not documented",
        ),
    },
    Shorthand { key: "shell", is: Treated::Excluded("a shell is one command line; no list form is documented") },
    Shorthand {
        key: "steps",
        is: Treated::Excluded(
            "`steps` is a list of steps; a lone step name in the schema's string form is not documented \
             as a one-step list",
        ),
    },
];
