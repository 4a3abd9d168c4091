//! Travis CI: what a `.travis.yml` means, per the build configuration docs.

use doc2ci_yaml::Value;

use super::Wrap;
use super::{default_of, items_mut, one_item_list, trim_shell, under, Applied, Jobs, Rule, Service};
use super::{AuthorIds, Docs};
use crate::node::{key, Node};
use crate::Shape;

pub const SERVICE: Service = Service {
    name: "travis-ci",
    display: "Travis CI",
    schema_asset: "schemas/travis-ci.json",
    gitlab_reference_tag: false,
    lint_tools: &["schema"],
    // Names are values (`name:`, `stage:`), and a job that names no stage is in `test`, so renaming
    // a listed stage would move such jobs: nothing is renamed.
    author_ids: AuthorIds { keys_under: &[], items_under: &[], top_level: |_| false },
    docs: Docs {
        // docs.travis-ci.com, `travis-ci/docs-travis-ci-com` (Jekyll, kramdown + Rouge): the user
        // documentation (`/user/`), without Travis CI Enterprise's admin pages and the dated
        // build-environment changelogs. kramdown + Rouge: `div.language-yaml.highlighter-rouge pre >
        // code`; every heading gets a `#` anchor link, which must not reach its title. In a browser
        // Prism wraps each block in `div.code-toolbar` with a toolbar naming the language, whose text
        // would join a list item's.
        profile: "travis-docs",
        licence: "MIT (travis-ci/docs-travis-ci-com, README)",
        start_urls: &[
            "/user/for-beginners/",
            "/user/tutorial/",
            "/user/customizing-the-build/",
            "/user/job-lifecycle/",
            "/user/languages/",
        ],
        allowed_prefixes: &["/user/"],
        exclude_paths: &["/user/enterprise/", "/user/build-environment-updates/"],
        keep_query: false,
        sitemap: false,
        content_root: "main#main, main",
        remove: &[
            "nav",
            "footer",
            "button",
            // An inline icon's `<title>` is not text a reader reads (found by the extraction fuzz).
            "svg",
            "aside.improve-page",
            "#toc",
            "a.toc-anchor",
            ".code-toolbar > .toolbar",
        ],
        yaml_blocks: &[
            "div.language-yaml.highlighter-rouge pre > code",
            "div.language-yml.highlighter-rouge pre > code",
            "figure.highlight pre > code[data-lang=\"yaml\"]",
            "pre > code.language-yaml",
        ],
        code_blocks: &["pre"],
        more_prose_blocks: &[".note-box"],
        keep_hidden: &[],
    },
    // At least one of `language`, `script`, `jobs` or `matrix`: Travis defaults the rest, and a
    // file with only `deploy:` or `notifications:` is a section.
    standalone: |m| ["language", "script", "jobs", "matrix"].iter().any(|k| m.contains_key(k)),
    fragment,
    lift,
    complete,
    jobs: Jobs::None,
    empty_is_a_value: &[],
    canonicalize,
    rules: &[
        Rule {
            name: "matrix-alias",
            says: "`matrix:` ≡ `jobs:`",
            source: "https://docs.travis-ci.com/user/build-matrix/",
        },
        Rule {
            name: "phase-string-or-list",
            says: "a lifecycle phase (`install`, `script`, `before_install` …) as a string ≡ a one-item list",
            source: "https://docs.travis-ci.com/user/job-lifecycle/",
        },
        Rule {
            name: "default-os",
            says: "`os: linux` is the default",
            source: "https://docs.travis-ci.com/user/reference/overview/",
        },
        Rule {
            name: "shell-trailing-whitespace",
            says: "a command's trailing whitespace changes nothing",
            source: "https://docs.travis-ci.com/user/job-lifecycle/",
        },
    ],
};

/// The job lifecycle's phases, each a command or a list of commands.
pub const PHASES: &[&str] = &[
    "before_install",
    "install",
    "before_script",
    "script",
    "before_cache",
    "after_success",
    "after_failure",
    "before_deploy",
    "after_deploy",
    "after_script",
];

fn fragment(v: &Value) -> Option<Shape> {
    match v {
        Value::Map(_) => Some(Shape::Section),
        Value::Seq(items) => items.iter().all(|i| i.scalar_text().is_some()).then_some(Shape::Script),
        _ => None,
    }
}

fn lift(shape: Shape, n: Node) -> Node {
    match shape {
        Shape::Script => under("script", n),
        _ => n,
    }
}

fn canonicalize(root: &mut Node, a: &mut Applied) {
    let Some(m) = root.as_map_mut() else { return };
    if !m.contains_key(&key("jobs")) && m.contains_key(&key("matrix")) && a.apply("matrix-alias") {
        let matrix = m.remove(&key("matrix")).expect("present");
        m.insert(key("jobs"), matrix);
    }
    canon_job(root, a);
    // Only the top level: a job in `include` inherits the top level's `os`, and one in `exclude`
    // or `allow_failures` is a pattern, where a filled-in key would narrow what it matches.
    default_of(root, "os", Node::Str("linux".into()), a, "default-os");
    if let Some(jobs) = root.get_mut("jobs") {
        for k in ["include", "exclude", "allow_failures"] {
            for job in items_mut(jobs, k) {
                canon_job(job, a);
            }
        }
    }
}

/// The keys a job shares with the top level.
fn canon_job(job: &mut Node, a: &mut Applied) {
    for phase in PHASES {
        if let Some(p) = job.get_mut(phase) {
            one_item_list(p, a, "phase-string-or-list");
            if let Node::Seq(cmds) = p {
                for c in cmds {
                    trim_shell(c, a, "shell-trailing-whitespace");
                }
            }
        }
    }
}

fn complete(shape: Shape, v: &Value) -> Option<Wrap> {
    Some(match (shape, v.as_map()) {
        (Shape::Section, Some(_)) => Wrap::new(shape, "language: shell\n", 0, ""),
        (Shape::Script, None) => Wrap::new(shape, "language: shell\nscript:\n", 2, ""),
        _ => return None,
    })
}
