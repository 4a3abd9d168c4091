//! Travis CI: what a `.travis.yml` means, per the build configuration docs.

use doc2ci_yaml::Value;

use super::Wrap;
use super::{default_of, items_mut, one_item_list, trim_shell, under, Applied, Jobs, Rule, Service};
use super::{AuthorIds, Docs, Shorthand, Treated};
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
            name: "matrix-string-or-list",
            says: "a key that expands the build matrix (`python`, `node_js`, `rvm`, `jdk`, `os`, `arch` …) as one value ≡ a one-item list",
            source: "https://github.com/travis-ci/travis-yml/blob/master/README.md#schema",
        },
        Rule {
            name: "addon-string-or-list",
            says: "an addon's `packages`, `casks`, `taps`, `snaps`, `hosts` or `ssh_known_hosts` as one value ≡ a one-item list",
            source: "https://github.com/travis-ci/travis-yml/blob/master/README.md#schema",
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
    shorthands: SHORTHANDS,
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
    default_of(root, "os", Node::Seq(vec![Node::Str("linux".into())]), a, "default-os");
    if let Some(jobs) = root.get_mut("jobs") {
        for k in ["include", "exclude", "allow_failures"] {
            for job in items_mut(jobs, k) {
                canon_job(job, a);
            }
        }
    }
}

/// The keys that expand the build matrix (travis-yml's `matrix` keys, and `services`), each a
/// sequence of strings that takes one string; in a job of `jobs.include` the same keys name the
/// job's one value, which a one-item list also gives.
pub const MATRIX_KEYS: &[&str] = &[
    "arch",
    "compiler",
    "crystal",
    "d",
    "dart",
    "dart_task",
    "dotnet",
    "elixir",
    "elm",
    "erlang",
    "gemfile",
    "ghc",
    "go",
    "haxe",
    "hhvm",
    "jdk",
    "julia",
    "matlab",
    "mono",
    "nix",
    "node_js",
    "opt_release",
    "os",
    "osx_image",
    "otp_release",
    "perl",
    "perl6",
    "php",
    "python",
    "r",
    "rust",
    "rvm",
    "scala",
    "services",
    "smalltalk",
    "smalltalk_config",
    "smalltalk_vm",
    "solution",
    "xcode_scheme",
    "xcode_sdk",
];

/// An addon's sequences of strings (`apt.packages`, `homebrew.casks` …, and `hosts` and
/// `ssh_known_hosts` directly under `addons`).
const ADDON_LISTS: &[&str] = &["packages", "casks", "taps", "snaps", "hosts", "ssh_known_hosts"];

/// The keys a job shares with the top level.
fn canon_job(job: &mut Node, a: &mut Applied) {
    for k in MATRIX_KEYS {
        if let Some(v) = job.get_mut(k) {
            one_item_list(v, a, "matrix-string-or-list");
        }
    }
    for (k, addon) in job.get_mut("addons").and_then(Node::as_map_mut).into_iter().flatten() {
        if k.as_str().is_some_and(|k| ADDON_LISTS.contains(&k)) {
            one_item_list(addon, a, "addon-string-or-list");
        }
        for (k, v) in addon.as_map_mut().into_iter().flatten() {
            if k.as_str().is_some_and(|k| ADDON_LISTS.contains(&k)) {
                one_item_list(v, a, "addon-string-or-list");
            }
        }
    }
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

/// The spec's one-or-many keys (see [`super::Shorthand`]).
/// Why notifications are left as written.
const NOTIFICATIONS: &str = "a notification's settings take travis-yml's prefix forms (`email: a@b` is `email: \
     {recipients: [a@b]}`), and a notification changes no job: compared as written";

const SHORTHANDS: &[Shorthand] = &[
    Shorthand { key: "before_install", is: Treated::Rule("phase-string-or-list") },
    Shorthand { key: "install", is: Treated::Rule("phase-string-or-list") },
    Shorthand { key: "before_script", is: Treated::Rule("phase-string-or-list") },
    Shorthand { key: "script", is: Treated::Rule("phase-string-or-list") },
    Shorthand { key: "before_cache", is: Treated::Rule("phase-string-or-list") },
    Shorthand { key: "after_success", is: Treated::Rule("phase-string-or-list") },
    Shorthand { key: "after_failure", is: Treated::Rule("phase-string-or-list") },
    Shorthand { key: "before_deploy", is: Treated::Rule("phase-string-or-list") },
    Shorthand { key: "after_deploy", is: Treated::Rule("phase-string-or-list") },
    Shorthand { key: "after_script", is: Treated::Rule("phase-string-or-list") },
    Shorthand { key: "arch", is: Treated::Rule("matrix-string-or-list") },
    Shorthand { key: "compiler", is: Treated::Rule("matrix-string-or-list") },
    Shorthand { key: "elixir", is: Treated::Rule("matrix-string-or-list") },
    Shorthand { key: "elm", is: Treated::Rule("matrix-string-or-list") },
    Shorthand { key: "erlang", is: Treated::Rule("matrix-string-or-list") },
    Shorthand { key: "gemfile", is: Treated::Rule("matrix-string-or-list") },
    Shorthand { key: "go", is: Treated::Rule("matrix-string-or-list") },
    Shorthand { key: "jdk", is: Treated::Rule("matrix-string-or-list") },
    Shorthand { key: "julia", is: Treated::Rule("matrix-string-or-list") },
    Shorthand { key: "matlab", is: Treated::Rule("matrix-string-or-list") },
    Shorthand { key: "mono", is: Treated::Rule("matrix-string-or-list") },
    Shorthand { key: "node_js", is: Treated::Rule("matrix-string-or-list") },
    Shorthand { key: "opt_release", is: Treated::Rule("matrix-string-or-list") },
    Shorthand { key: "os", is: Treated::Rule("matrix-string-or-list") },
    Shorthand { key: "osx_image", is: Treated::Rule("matrix-string-or-list") },
    Shorthand { key: "php", is: Treated::Rule("matrix-string-or-list") },
    Shorthand { key: "python", is: Treated::Rule("matrix-string-or-list") },
    Shorthand { key: "r", is: Treated::Rule("matrix-string-or-list") },
    Shorthand { key: "rust", is: Treated::Rule("matrix-string-or-list") },
    Shorthand { key: "rvm", is: Treated::Rule("matrix-string-or-list") },
    Shorthand { key: "services", is: Treated::Rule("matrix-string-or-list") },
    Shorthand { key: "packages", is: Treated::Rule("addon-string-or-list") },
    Shorthand { key: "casks", is: Treated::Rule("addon-string-or-list") },
    Shorthand { key: "taps", is: Treated::Rule("addon-string-or-list") },
    Shorthand { key: "snaps", is: Treated::Rule("addon-string-or-list") },
    Shorthand { key: "hosts", is: Treated::Rule("addon-string-or-list") },
    Shorthand { key: "ssh_known_hosts", is: Treated::Rule("addon-string-or-list") },
    Shorthand { key: "campfire", is: Treated::Excluded(NOTIFICATIONS) },
    Shorthand { key: "email", is: Treated::Excluded(NOTIFICATIONS) },
    Shorthand { key: "hipchat", is: Treated::Excluded(NOTIFICATIONS) },
    Shorthand { key: "irc", is: Treated::Excluded(NOTIFICATIONS) },
    Shorthand { key: "pushover", is: Treated::Excluded(NOTIFICATIONS) },
    Shorthand { key: "webhooks", is: Treated::Excluded(NOTIFICATIONS) },
    Shorthand { key: "channels", is: Treated::Excluded(NOTIFICATIONS) },
    Shorthand { key: "recipients", is: Treated::Excluded(NOTIFICATIONS) },
    Shorthand { key: "rooms", is: Treated::Excluded(NOTIFICATIONS) },
    Shorthand { key: "template", is: Treated::Excluded(NOTIFICATIONS) },
    Shorthand { key: "urls", is: Treated::Excluded(NOTIFICATIONS) },
    Shorthand { key: "users", is: Treated::Excluded(NOTIFICATIONS) },
    Shorthand { key: "cache", is: Treated::Excluded(
        "`cache` takes travis-yml's prefix form (`cache: pip` is `cache: {pip: true}`, a list is `directories`), a normalisation beyond a one-item list",
    ) },
    Shorthand { key: "env", is: Treated::Excluded(
        "`env` takes travis-yml's prefix form (a list is `env.jobs`) and is parsed into variables, a normalisation beyond a one-item list",
    ) },
    Shorthand { key: "global", is: Treated::Excluded(
        "`env.global` entries are parsed into variables (`A=1 B=2` is two), a normalisation beyond a one-item list",
    ) },
    Shorthand { key: "jobs", is: Treated::Excluded(
        "a list of jobs is `jobs.include` (travis-yml's prefix form), not a one-item list",
    ) },
    Shorthand { key: "matrix", is: Treated::Excluded(
        "`matrix` is `jobs` (the matrix-alias rule), and its list form is `include`, not a one-item list",
    ) },
    Shorthand { key: "import", is: Treated::Excluded(
        "imports configuration from other files, which canonical form does not fetch: compared as written",
    ) },
    Shorthand { key: "file", is: Treated::Excluded(
        "a deploy provider's files: each provider's keys are compared as written",
    ) },
    Shorthand { key: "run", is: Treated::Excluded(
        "a deploy provider's commands (Heroku's `run`): each provider's keys are compared as written",
    ) },
];
