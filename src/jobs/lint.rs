//! lint: each service's own validator and security audit on every output (`lints`, one partition
//! per generations partition, repair rounds included) and on every pair's reference (the
//! `reference` model of `lints`). The verdicts are `stages/lint`'s; the tools are `crate::linters`'.
//! A tool that cannot run here still gives its rows, which say why.

use anyhow::Result;
use doc2ci_lint::{complete, judge, Completion, Lint, Verdict};
use doc2ci_rows::{Generation, Pair};
use doc2ci_validate::Service;
use serde::{Deserialize, Serialize};

use super::tables::LINTS;
use crate::config::Section;
use crate::engine::{Ctx, Graph, Job, Node, Output};
use crate::linters::{self, Limits};
use crate::warehouse::Partition;

/// `[stages.lint]`: each service's own validator and security audit (see README "Lint").
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Settings {
    #[serde(default = "super::yes")]
    pub enabled: bool,
    /// A tool that takes longer on one file is stopped and the row says so.
    #[serde(default = "default_timeout")]
    pub timeout_secs: u64,
    /// Longer texts are not given to the tools (the row says so): the tools hold a file in memory
    /// several times over.
    #[serde(default = "default_max_bytes")]
    pub max_bytes: usize,
}

impl Default for Settings {
    fn default() -> Self {
        Self { enabled: true, timeout_secs: default_timeout(), max_bytes: default_max_bytes() }
    }
}

impl Section for Settings {
    const NAME: &'static str = "lint";
}

/// A repair round quotes the validator's findings with `feedback = ["schema", "lint"]`.
pub const CHECK: super::Check = super::Check {
    settings: super::SectionType::of::<Settings>(),
    table: LINTS,
    on: |cfg| Ok(cfg.section::<Settings>()?.enabled),
    references: Some(|cfg, g, service, pairs| {
        add_references(&cfg.section()?, g, service, pairs);
        Ok(())
    }),
    add: |cfg, g, at| Ok(add(&cfg.section()?, g, at.service, at.generations)),
    feedback: Some("lint"),
    stats: true,
};

fn default_timeout() -> u64 {
    20
}
/// 3.5 times the longest of the 4,350 real outputs; actionlint takes ~14 s on a 290 KB workflow.
fn default_max_bytes() -> usize {
    64 << 10
}

/// The model name of a reference's rows.
pub const REFERENCE: &str = "reference";

/// The tools of `service` and each one's version here (or why it cannot run): part of the key,
/// so installing a tool, or another version of it, re-runs the lint partitions.
fn tools(service: Service) -> Vec<(&'static str, Result<String, String>)> {
    linters::for_service(service).map(|t| (t.name, linters::probe(t))).collect()
}

fn node(set: &Settings, service: Service, part: Partition, input: Partition, dep: usize, references: bool) -> Node {
    let tools = tools(service).into_iter().map(|(n, v)| (n, v.ok())).collect();
    let job = LintJob { service, input, references, params: set.clone(), tools };
    Node::new("lint", part, job).deps(vec![dep])
}

/// The lints of each reference of the pairs of `dedupe`.
pub fn add_references(set: &Settings, g: &mut Graph, service: Service, dedupe: usize) -> usize {
    let part = Partition::new(LINTS, &[service.name(), REFERENCE]);
    let n = node(set, service, part, g.part(dedupe).clone(), dedupe, true);
    g.add(n)
}

/// The lints partition of one generations partition (any round).
pub fn add(set: &Settings, g: &mut Graph, service: Service, gen: usize) -> usize {
    let gp = g.part(gen).clone();
    let model = gp.get("model").unwrap_or_default().to_string();
    let n = node(set, service, gp.sibling(LINTS), gp, gen, false).model(&model);
    g.add(n)
}

#[derive(Serialize)]
struct LintJob {
    #[serde(serialize_with = "super::service_name")]
    service: Service,
    #[serde(skip)]
    /// A pairs partition (`references`) or a generations partition.
    input: Partition,
    references: bool,
    params: Settings,
    /// Each tool's version here (None: it cannot run): installing a tool, or another version of
    /// it, re-runs the lint partitions.
    tools: Vec<(&'static str, Option<String>)>,
}

/// One text to lint and the keys of its rows.
struct Subject {
    base: Lint,
    text: Option<String>,
    /// Why there is no text to lint (the backend's error), if so.
    missing: Option<String>,
}

impl Job for LintJob {
    fn run(&self, cx: &Ctx) -> Result<Output> {
        let s = self.service;
        let base = |pair_id: &str, model: &str, sample: u32, round: u32| Lint {
            pair_id: pair_id.into(),
            service: s.name().into(),
            model: model.into(),
            sample,
            round,
            ..Lint::default()
        };
        let subjects: Vec<Subject> = if self.references {
            let pairs: Vec<Pair> = cx.read(&self.input)?;
            pairs
                .into_iter()
                .map(|p| Subject { base: base(&p.pair_id, REFERENCE, 0, 0), text: Some(p.reference), missing: None })
                .collect()
        } else {
            let gens: Vec<Generation> = super::answers(cx, &self.input)?;
            gens.into_iter()
                .map(|g| {
                    let missing = g.output.is_none().then(|| "no output: the answer held no text".to_string());
                    Subject { base: base(&g.pair_id, &g.model, g.sample, g.round), text: g.output, missing }
                })
                .collect()
        };
        let rows = lint_all(s, &subjects, &self.params, Some(&cx.wh.meta().join("cache/lints")));
        let judged: Vec<&Lint> = rows.iter().filter(|r| r.ok.is_some()).collect();
        let ok = judged.iter().filter(|r| r.ok == Some(true)).count();
        let note = format!("{ok}/{} judged lint-clean ({} rows not judged)", judged.len(), rows.len() - judged.len());
        cx.publish(&rows, Some(note))
    }
}

/// Every tool of `service` over every subject: one row per subject and tool. With `cache` (the
/// warehouse's lint cache), each distinct text a tool has judged before costs it nothing.
fn lint_all(service: Service, subjects: &[Subject], p: &Settings, cache: Option<&std::path::Path>) -> Vec<Lint> {
    let limits = Limits { per_text: std::time::Duration::from_secs(p.timeout_secs.max(1)) };
    // What each tool sees: the texts as written, then the completed fragments.
    let lintable: Vec<Option<&str>> =
        subjects.iter().map(|s| s.text.as_deref().filter(|t| t.len() <= p.max_bytes && !t.contains('\0'))).collect();
    let completions: Vec<Option<Completion>> = lintable.iter().map(|t| t.map(|t| complete(service, t))).collect();
    let mut texts: Vec<&str> = lintable.iter().flatten().copied().collect();
    let wrapped_at = texts.len();
    for c in completions.iter().flatten() {
        if let Completion::Wrapped(w) = c {
            texts.push(&w.text);
        }
    }
    let mut rows = Vec::with_capacity(subjects.len() * 2);
    for tool in linters::for_service(service) {
        let version = linters::probe(tool);
        let verdicts: Result<Vec<Verdict>, String> = match (&version, cache) {
            (Ok(v), Some(dir)) => linters::cache::lint(dir, tool, v, &texts, limits).map(|(v, _)| v),
            (Ok(_), None) => (tool.lint)(&texts, limits),
            (Err(why), _) => Err(anyhow::anyhow!("{why}")),
        }
        .map_err(|e| if version.is_ok() { format!("{} failed: {e:#}", tool.name) } else { format!("{e:#}") });
        let (mut as_is, mut done) = (0usize, wrapped_at);
        for (i, s) in subjects.iter().enumerate() {
            let mut base = s.base.clone();
            base.tool = Some(tool.name.into());
            base.kind = tool.kind.into();
            base.tool_version = version.as_ref().ok().cloned();
            let Some(text) = lintable[i] else {
                base.ok = s.missing.is_some().then_some(false);
                base.as_is_ok = base.ok;
                base.note = Some(s.missing.clone().unwrap_or_else(|| match &s.text {
                    Some(t) if t.contains('\0') => "the text holds a NUL byte: not given to the tools".into(),
                    Some(t) => format!(
                        "the text is {} bytes, over [stages.lint] max_bytes = {}: not linted",
                        t.len(),
                        p.max_bytes
                    ),
                    None => "no text".into(),
                }));
                rows.push(base);
                continue;
            };
            let completion = completions[i].as_ref().expect("a lintable text has a completion");
            let row = match &verdicts {
                Err(why) => {
                    base.note = Some(why.clone());
                    base
                }
                Ok(v) => {
                    let first = v[as_is].clone();
                    as_is += 1;
                    match completion {
                        Completion::Standalone => judge(base, text, first, None, None),
                        Completion::NoRule(why) => judge(base, text, first, None, Some(why.clone())),
                        Completion::Wrapped(w) => {
                            let second = v[done].clone();
                            done += 1;
                            judge(base, text, first, Some((w, second)), None)
                        }
                    }
                }
            };
            rows.push(row);
        }
    }
    rows
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 30, every real tool (as `doc2ci setup` installs them) over texts that are not
    /// configurations: no row is `ok`, `as_is_ok` or `completed_ok`, unless a completion rule made
    /// a file of the text (then only the completed file can pass), and each says why.
    #[test]
    fn no_tool_passes_a_text_that_is_not_a_configuration() {
        let shapes = [
            "",
            "# a comment\n# and only comments\n",
            "Sure! Here is the configuration you asked for, in YAML.",
            "3.14\n",
            "- {a: 1}\n- {b: 2}\n",
            "- one\n- two\n",
            "key: [unclosed\n",
        ];
        let p = Settings::default();
        let (mut judged, mut total) = (0, 0);
        for service in Service::all() {
            let subjects: Vec<Subject> = shapes
                .iter()
                .map(|t| Subject { base: Lint::default(), text: Some(t.to_string()), missing: None })
                .collect();
            let rows = lint_all(service, &subjects, &p, None);
            let tools: Vec<&str> = linters::for_service(service).map(|t| t.name).collect();
            assert_eq!(rows.len(), shapes.len() * tools.len(), "{service:?}");
            for (i, row) in rows.iter().enumerate() {
                let text = shapes[i % shapes.len()];
                let tool = row.tool.as_deref().unwrap_or_default();
                let wrapped = matches!(complete(service, text), Completion::Wrapped(_));
                assert_ne!(row.as_is_ok, Some(true), "{tool} on {text:?}: {row:?}");
                if !wrapped {
                    assert_ne!(row.ok, Some(true), "{tool} on {text:?}: {row:?}");
                    assert_ne!(row.completed_ok, Some(true), "{tool} on {text:?}: {row:?}");
                }
                assert!(row.note.as_deref().is_some_and(|n| n.contains("not a configuration")), "{tool}: {row:?}");
                judged += usize::from(row.ok.is_some());
            }
            total += rows.len();
        }
        // "Not a configuration" is a verdict: every row of every tool has one.
        assert_eq!(judged, total);
        assert_eq!(total, shapes.len() * 5, "five tools over the four services");
    }
}
