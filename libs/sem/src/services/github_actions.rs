//! GitHub Actions: what a workflow file means, per "Workflow syntax for GitHub Actions".

use doc2ci_yaml::{Map, Value};

use super::Wrap;
use super::{
    all_in, default_of, entries_mut, items_mut, keys, one_item_list, trim_shell, under, values_as_strings, Applied,
    Jobs, Rule, Service,
};
use super::{AuthorIds, Docs, Shorthand, Treated};
use crate::node::Node;
use crate::{Shape, FRAGMENT_JOB};

pub const SERVICE: Service = Service {
    name: "github-actions",
    display: "GitHub Actions",
    schema_asset: "schemas/github-actions.json",
    gitlab_reference_tag: false,
    lint_tools: &["actionlint", "zizmor"],
    author_ids: AuthorIds { keys_under: &["jobs"], items_under: &[], top_level: |_| false },
    docs: Docs {
        // The Actions part of the free-pro-team docs in English (docs.github.com, `github/docs`:
        // Next.js; unified/rehype: `code-header`, `annotate`, `alerts`, Liquid `{% mac %}` tool
        // switchers): other languages (`/ja/`, …) and versions (`/en/enterprise-server@3.x/`,
        // `/en/enterprise-cloud@latest/`) are other prefixes. `?platform=`, `?tool=` and `?learn=`
        // only switch what JavaScript shows: queries are dropped. The server sends every `.ghd-tool`
        // variant and JavaScript hides all but one with an inline style, so a browser crawl must keep
        // them. Each code block with a copy button carries a `pre[hidden]` twin (hidden, hence
        // dropped); an annotated example renders its code three times, and only `.annotate-inline`
        // holds it whole with its comments.
        profile: "github-docs",
        licence: "CC-BY-4.0 (GitHub Docs content, github/docs; its code is MIT)",
        start_urls: &["/en/actions", "/en/actions/get-started/quickstart"],
        allowed_prefixes: &["/en/actions"],
        exclude_paths: &[],
        keep_query: false,
        sitemap: false,
        content_root: "main",
        remove: &[
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
        ],
        yaml_blocks: &["pre > code.language-yaml", "pre > code.language-yml"],
        code_blocks: &["pre"],
        more_prose_blocks: &[],
        keep_hidden: &[".ghd-tool", "[class*=\"platform-\"]"],
    },
    // Both `on` and `jobs`: the workflow schema's required keys.
    standalone: |m| m.contains_key("on") && m.contains_key("jobs"),
    fragment,
    lift,
    complete,
    jobs: Jobs::Under("jobs"),
    // "permissions: {}" disables every scope (workflow syntax, `permissions`).
    empty_is_a_value: &["permissions"],
    canonicalize,
    rules: &[
        Rule {
            name: "on-event-forms",
            says: "`on: push` ≡ `on: [push]` ≡ `on: {push: null}` ≡ `on: {push: {}}`: an event with no filters",
            source: "https://docs.github.com/en/actions/writing-workflows/choosing-when-your-workflow-runs/triggering-a-workflow#using-events-to-trigger-workflows",
        },
        Rule {
            name: "filter-string-or-list",
            says: "an event filter (`branches`, `tags`, `paths`, their `-ignore`, `types`) as a string ≡ a one-item list",
            source: "https://docs.github.com/en/actions/writing-workflows/workflow-syntax-for-github-actions#onpushbranchestagsbranches-ignoretags-ignore",
        },
        Rule {
            name: "runs-on-string-or-list",
            says: "`runs-on: x` ≡ `runs-on: [x]`, and a runner group's `labels: x` ≡ `labels: [x]`",
            source: "https://docs.github.com/en/actions/writing-workflows/workflow-syntax-for-github-actions#jobsjob_idruns-on",
        },
        Rule {
            name: "needs-string-or-list",
            says: "`needs: a` ≡ `needs: [a]`",
            source: "https://docs.github.com/en/actions/writing-workflows/workflow-syntax-for-github-actions#jobsjob_idneeds",
        },
        Rule {
            name: "wait-string-or-list",
            says: "a step's `wait: id` ≡ `wait: [id]`",
            source: "https://docs.github.com/en/actions/writing-workflows/workflow-syntax-for-github-actions#jobsjob_idstepswait",
        },
        Rule {
            name: "inputs-are-strings",
            says: "`with:` inputs and `env:` values reach the program as strings: `18` ≡ `\"18\"`, `3.10` ≡ `\"3.1\"`",
            source: "https://docs.github.com/en/actions/writing-workflows/workflow-syntax-for-github-actions#jobsjob_idstepswith",
        },
        Rule {
            name: "if-expression",
            says: "`if: ${{ x }}` ≡ `if: x` (the `${{ }}` may be omitted in `if`)",
            source: "https://docs.github.com/en/actions/writing-workflows/workflow-syntax-for-github-actions#jobsjob_idif",
        },
        Rule {
            name: "default-continue-on-error",
            says: "`continue-on-error: false` is the default (a failing step or job fails the run)",
            source: "https://docs.github.com/en/actions/writing-workflows/workflow-syntax-for-github-actions#jobsjob_idstepscontinue-on-error",
        },
        Rule {
            name: "default-timeout-minutes",
            says: "a job's `timeout-minutes: 360` is the default",
            source: "https://docs.github.com/en/actions/writing-workflows/workflow-syntax-for-github-actions#jobsjob_idtimeout-minutes",
        },
        Rule {
            name: "default-fail-fast",
            says: "`strategy.fail-fast: true` is the default",
            source: "https://docs.github.com/en/actions/writing-workflows/workflow-syntax-for-github-actions#jobsjob_idstrategyfail-fast",
        },
        Rule {
            name: "concurrency-group",
            says: "`concurrency: g` ≡ `concurrency: {group: g}`; `cancel-in-progress: false` is the default",
            source: "https://docs.github.com/en/actions/writing-workflows/workflow-syntax-for-github-actions#concurrency",
        },
        Rule {
            name: "environment-name",
            says: "`environment: e` ≡ `environment: {name: e}`",
            source: "https://docs.github.com/en/actions/writing-workflows/workflow-syntax-for-github-actions#jobsjob_idenvironment",
        },
        Rule {
            name: "container-image",
            says: "`container: img` ≡ `container: {image: img}` (the `image` keyword may be omitted)",
            source: "https://docs.github.com/en/actions/writing-workflows/workflow-syntax-for-github-actions#jobsjob_idcontainer",
        },
        Rule {
            name: "shell-trailing-whitespace",
            says: "a `run` script's trailing whitespace (per line, and blank lines at its end) changes nothing",
            source: "https://docs.github.com/en/actions/writing-workflows/workflow-syntax-for-github-actions#jobsjob_idstepsrun",
        },
    ],
    shorthands: SHORTHANDS,
};

/// The keys a workflow file may have at its top level.
pub const WORKFLOW_KEYS: &[&str] = &["name", "run-name", "on", "permissions", "env", "defaults", "concurrency", "jobs"];
/// The keys of a job.
pub const JOB_KEYS: &[&str] = &[
    "name",
    "permissions",
    "needs",
    "if",
    "runs-on",
    "environment",
    "concurrency",
    "outputs",
    "env",
    "defaults",
    "steps",
    "timeout-minutes",
    "strategy",
    "continue-on-error",
    "container",
    "services",
    "uses",
    "with",
    "secrets",
    "snapshot",
];
/// The keys of a step.
pub const STEP_KEYS: &[&str] = &[
    "id",
    "if",
    "name",
    "uses",
    "run",
    "shell",
    "with",
    "env",
    "continue-on-error",
    "timeout-minutes",
    "working-directory",
    "background",
    "wait",
    "wait-all",
    "cancel",
];
/// What a step does: one of these (the others only shape it).
const STEP_ACTIONS: &[&str] = &["uses", "run", "wait", "wait-all", "cancel"];
/// The events a workflow can be triggered by (`on:` keys).
pub const EVENTS: &[&str] = &[
    "branch_protection_rule",
    "check_run",
    "check_suite",
    "create",
    "delete",
    "deployment",
    "deployment_status",
    "discussion",
    "discussion_comment",
    "fork",
    "gollum",
    "issue_comment",
    "issues",
    "label",
    "merge_group",
    "milestone",
    "page_build",
    "project",
    "project_card",
    "project_column",
    "public",
    "pull_request",
    "pull_request_review",
    "pull_request_review_comment",
    "pull_request_target",
    "push",
    "registry_package",
    "release",
    "repository_dispatch",
    "schedule",
    "status",
    "watch",
    "workflow_call",
    "workflow_dispatch",
    "workflow_run",
];
const FILTERS: &[&str] = &["branches", "branches-ignore", "tags", "tags-ignore", "paths", "paths-ignore", "types"];

pub fn is_step(v: &Value) -> bool {
    v.as_map().is_some_and(|m| all_in(m, STEP_KEYS) && keys(m).iter().any(|k| STEP_ACTIONS.contains(k)))
}

pub fn is_job(m: &Map) -> bool {
    let reusable = m.get("uses").and_then(Value::as_str).is_some_and(|u| u.contains(".github/workflows/"));
    all_in(m, JOB_KEYS) && (m.contains_key("runs-on") || m.contains_key("steps") || reusable)
}

fn fragment(v: &Value) -> Option<Shape> {
    match v {
        Value::Seq(items) => items.iter().all(is_step).then_some(Shape::Steps),
        Value::Map(m) if all_in(m, WORKFLOW_KEYS) => Some(Shape::Workflow),
        Value::Map(m) if is_job(m) => Some(Shape::Job),
        Value::Map(_) if is_step(v) => Some(Shape::Step),
        Value::Map(m) if keys(m).iter().all(|k| EVENTS.contains(k)) => Some(Shape::Triggers),
        Value::Map(m) if m.iter().all(|(_, v)| v.as_map().is_some_and(is_job)) => Some(Shape::Jobs),
        _ => None,
    }
}

fn lift(shape: Shape, n: Node) -> Node {
    let job = |j: Node| under("jobs", under(FRAGMENT_JOB, j));
    match shape {
        Shape::Job => job(n),
        Shape::Jobs => under("jobs", n),
        Shape::Step => job(under("steps", Node::Seq(vec![n]))),
        Shape::Steps => job(under("steps", n)),
        Shape::Triggers => under("on", n),
        _ => n,
    }
}

fn canonicalize(root: &mut Node, a: &mut Applied) {
    if let Some(on) = root.get_mut("on") {
        canon_on(on, a);
    }
    if let Some(env) = root.get_mut("env") {
        values_as_strings(env, a, "inputs-are-strings");
    }
    if let Some(c) = root.get_mut("concurrency") {
        canon_concurrency(c, a);
    }
    for job in entries_mut(root, "jobs") {
        canon_job(job, a);
    }
}

fn canon_on(on: &mut Node, a: &mut Applied) {
    let events = |names: Vec<Node>| Node::Map(names.into_iter().map(|n| (n, Node::Null)).collect());
    match on {
        Node::Str(_) if a.apply("on-event-forms") => {
            *on = events(vec![std::mem::replace(on, Node::Null)]);
        }
        Node::Seq(items) if items.iter().all(|i| matches!(i, Node::Str(_))) && a.apply("on-event-forms") => {
            *on = events(std::mem::take(items));
        }
        _ => {}
    }
    let Some(m) = on.as_map_mut() else { return };
    for cfg in m.values_mut() {
        if matches!(cfg, Node::Map(c) if c.is_empty()) && a.apply("on-event-forms") {
            *cfg = Node::Null;
        }
        for f in FILTERS {
            if let Some(v) = cfg.get_mut(f) {
                one_item_list(v, a, "filter-string-or-list");
            }
        }
    }
}

fn canon_concurrency(c: &mut Node, a: &mut Applied) {
    if let Node::Str(_) = c {
        if a.apply("concurrency-group") {
            *c = under("group", std::mem::replace(c, Node::Null));
        }
    }
    default_of(c, "cancel-in-progress", Node::Bool(false), a, "concurrency-group");
}

fn canon_if(n: &mut Node, a: &mut Applied) {
    let Node::Str(s) = n else { return };
    let t = s.trim();
    if let Some(inner) = t.strip_prefix("${{").and_then(|r| r.strip_suffix("}}")) {
        if !inner.contains("${{") && !inner.contains("}}") && a.apply("if-expression") {
            *s = inner.trim().to_string();
        }
    }
}

fn canon_job(job: &mut Node, a: &mut Applied) {
    for (k, rule) in [("runs-on", "runs-on-string-or-list"), ("needs", "needs-string-or-list")] {
        if let Some(v) = job.get_mut(k) {
            one_item_list(v, a, rule);
        }
    }
    if let Some(labels) = job.get_mut("runs-on").and_then(|r| r.get_mut("labels")) {
        one_item_list(labels, a, "runs-on-string-or-list");
    }
    if let Some(e @ Node::Str(_)) = job.get_mut("environment") {
        if a.apply("environment-name") {
            *e = under("name", std::mem::replace(e, Node::Null));
        }
    }
    if let Some(c) = job.get_mut("concurrency") {
        canon_concurrency(c, a);
    }
    if let Some(c) = job.get_mut("container") {
        if let Node::Str(_) = c {
            if a.apply("container-image") {
                *c = under("image", std::mem::replace(c, Node::Null));
            }
        }
        if let Some(env) = c.get_mut("env") {
            values_as_strings(env, a, "inputs-are-strings");
        }
    }
    for service in entries_mut(job, "services") {
        if let Some(env) = service.get_mut("env") {
            values_as_strings(env, a, "inputs-are-strings");
        }
    }
    if let Some(i) = job.get_mut("if") {
        canon_if(i, a);
    }
    default_of(job, "continue-on-error", Node::Bool(false), a, "default-continue-on-error");
    // A job that calls a reusable workflow takes no timeout of its own.
    if job.get("uses").is_none() {
        default_of(job, "timeout-minutes", Node::Int("360".into()), a, "default-timeout-minutes");
    }
    if let Some(s) = job.get_mut("strategy") {
        default_of(s, "fail-fast", Node::Bool(true), a, "default-fail-fast");
    }
    for k in ["env", "with"] {
        if let Some(v) = job.get_mut(k) {
            values_as_strings(v, a, "inputs-are-strings");
        }
    }
    for step in items_mut(job, "steps") {
        canon_step(step, a);
    }
}

fn canon_step(step: &mut Node, a: &mut Applied) {
    if let Some(i) = step.get_mut("if") {
        canon_if(i, a);
    }
    default_of(step, "continue-on-error", Node::Bool(false), a, "default-continue-on-error");
    if let Some(w) = step.get_mut("wait") {
        one_item_list(w, a, "wait-string-or-list");
    }
    for k in ["env", "with"] {
        if let Some(v) = step.get_mut(k) {
            values_as_strings(v, a, "inputs-are-strings");
        }
    }
    if let Some(r) = step.get_mut("run") {
        trim_shell(r, a, "shell-trailing-whitespace");
    }
}

const STUB: &str = "jobs:\n  doc2ci-wrapper:\n    runs-on: ubuntu-latest\n    steps:\n      - run: echo doc2ci\n";
const JOB_HEAD: &str = "on: push\npermissions: {}\njobs:\n  doc2ci-fragment:\n";
const STEPS_HEAD: &str =
    "on: push\npermissions: {}\njobs:\n  doc2ci-fragment:\n    runs-on: ubuntu-latest\n    steps:\n";

/// Where the completion writes the workflow level (every rule but `workflow`) or a stub job, it
/// grants no permissions (`permissions: {}`), as zizmor asks of a workflow; where the fragment owns
/// the workflow level, the completion writes after it, so a finding about the whole is the fragment's.
fn complete(shape: Shape, v: &Value) -> Option<Wrap> {
    Some(match (shape, v.as_map()) {
        (Shape::Workflow, Some(m)) => {
            let mut tail = String::new();
            if !m.contains_key("on") {
                tail.push_str("on: push\n");
            }
            if !m.contains_key("jobs") {
                if !m.contains_key("permissions") {
                    tail.push_str("permissions: {}\n");
                }
                tail.push_str(STUB);
            }
            Wrap::new(shape, "", 0, tail)
        }
        (Shape::Job, Some(m)) => {
            let reusable = m.contains_key("uses");
            let runs_on = if m.contains_key("runs-on") || reusable { "" } else { "    runs-on: ubuntu-latest\n" };
            // Job-level keys shown without the job's steps: the wrapper supplies a step.
            let steps = if m.contains_key("steps") || reusable { "" } else { "    steps:\n      - run: echo doc2ci\n" };
            Wrap::new(shape, format!("{JOB_HEAD}{runs_on}"), 4, steps)
        }
        (Shape::Step, Some(_)) => Wrap::new(shape, format!("{STEPS_HEAD}      -\n"), 8, ""),
        (Shape::Triggers, Some(_)) => Wrap::new(shape, "on:\n", 2, format!("permissions: {{}}\n{STUB}")),
        (Shape::Jobs, Some(_)) => Wrap::new(shape, "on: push\npermissions: {}\njobs:\n", 2, ""),
        (Shape::Steps, None) => Wrap::new(shape, STEPS_HEAD, 6, ""),
        _ => return None,
    })
}

/// The spec's one-or-many keys (see [`super::Shorthand`]).
const SHORTHANDS: &[Shorthand] = &[
    Shorthand { key: "on", is: Treated::Rule("on-event-forms") },
    Shorthand { key: "branches", is: Treated::Rule("filter-string-or-list") },
    Shorthand { key: "branches-ignore", is: Treated::Rule("filter-string-or-list") },
    Shorthand { key: "tags", is: Treated::Rule("filter-string-or-list") },
    Shorthand { key: "tags-ignore", is: Treated::Rule("filter-string-or-list") },
    Shorthand { key: "paths", is: Treated::Rule("filter-string-or-list") },
    Shorthand { key: "paths-ignore", is: Treated::Rule("filter-string-or-list") },
    Shorthand { key: "types", is: Treated::Rule("filter-string-or-list") },
    Shorthand { key: "runs-on", is: Treated::Rule("runs-on-string-or-list") },
    Shorthand { key: "labels", is: Treated::Rule("runs-on-string-or-list") },
    Shorthand { key: "needs", is: Treated::Rule("needs-string-or-list") },
    Shorthand { key: "wait", is: Treated::Rule("wait-string-or-list") },
];
