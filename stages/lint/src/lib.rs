//! The lint stage over typed rows (issue: beyond the schema): each service's own validator and
//! security audit, made fragment-aware.
//!
//! Owns: completing a fragment into the smallest standalone file that holds it verbatim
//! ([`wrap`]), actionlint's shellcheck rule ([`shell`]), reading each tool's output into
//! [`Finding`]s ([`read`]), and the verdict that attributes each finding to the text or to its
//! wrapper ([`judge`]). Never touches: processes, files or the network (the engine's linters run
//! the tools), nor the warehouse.

pub mod read;
pub mod shell;
pub mod wrap;

pub use doc2ci_rows::{Finding, Lint};
pub use wrap::{complete, Completion, Wrapped};

/// What a tool said about one file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Findings(Vec<Finding>),
    /// The tool could not read the text at all (it is not judged); why.
    Unreadable(String),
}

/// The row for one text and one tool: `as_is` is the tool on `text` as written, `completed` the
/// tool on the fragment's completed file (when it is one), `no_rule` why a fragment could not be
/// completed. `base` carries the row's keys and tool.
///
/// No verdict passes a text that is not a configuration: a text that is not a YAML mapping
/// (empty, only comments, prose or another scalar, a sequence) is never `ok` as written, nor at
/// all unless a completion rule made it a file (a list of steps), whatever a tool says of it (a
/// tool that finds no job in prose exits 0). A tool that could not read a text gives no verdict.
pub fn judge(
    base: Lint,
    text: &str,
    as_is: Verdict,
    completed: Option<(&Wrapped, Verdict)>,
    no_rule: Option<String>,
) -> Lint {
    let mut row = base;
    let mut notes: Vec<String> = Vec::new();
    let garbage = doc2ci_validate::not_a_configuration(text, &doc2ci_validate::Limits::default());
    let as_is_findings = match as_is {
        Verdict::Findings(f) => Some(f),
        Verdict::Unreadable(why) => {
            notes.push(why);
            None
        }
    };
    row.as_is_ok = match &garbage {
        Some(why) => {
            notes.insert(0, format!("not a configuration: {why}"));
            Some(false)
        }
        None => as_is_findings.as_ref().map(Vec::is_empty),
    };
    match completed {
        Some((w, verdict)) => {
            row.completed = Some(w.rule.to_string());
            match verdict {
                Verdict::Findings(found) => {
                    let (inside, outside) = attribute(w, found);
                    row.completed_ok = Some(inside.is_empty());
                    row.findings = inside;
                    row.wrapper_findings = outside;
                }
                Verdict::Unreadable(why) => notes.push(format!("completed by rule {}: {why}", w.rule)),
            }
            row.ok = row.completed_ok;
        }
        None => {
            row.completed_ok = if no_rule.is_some() && garbage.is_none() { None } else { row.as_is_ok };
            row.findings = as_is_findings.unwrap_or_default();
            row.ok = row.as_is_ok;
            notes.extend(no_rule);
        }
    }
    row.note = (!notes.is_empty()).then(|| notes.join("; "));
    row
}

/// The completed file's findings split into the fragment's (positions mapped back to the text as
/// written) and the wrapper's. A finding without a position is the fragment's unless it names the
/// wrapper's stub.
pub fn attribute(w: &Wrapped, found: Vec<Finding>) -> (Vec<Finding>, Vec<Finding>) {
    let (mut inside, mut outside) = (Vec::new(), Vec::new());
    for mut f in found {
        match f.line {
            Some(line) => match w.to_fragment(line, f.column) {
                Some((l, c)) => {
                    f.line = Some(l);
                    f.column = c;
                    inside.push(f);
                }
                None => outside.push(f),
            },
            None if f.message.contains(wrap::WRAPPER_JOB) => outside.push(f),
            None => inside.push(f),
        }
    }
    (inside, outside)
}

#[cfg(test)]
mod tests {
    use super::*;
    use doc2ci_validate::Service;

    fn finding(rule: &str, line: Option<u32>, message: &str) -> Finding {
        Finding { rule: rule.into(), severity: "error".into(), line, column: Some(7), message: message.into() }
    }

    #[test]
    fn a_standalone_text_is_judged_as_written() {
        let row = judge(
            Lint::default(),
            "on: push\njobs: {}\n",
            Verdict::Findings(vec![finding("expression", Some(3), "x")]),
            None,
            None,
        );
        assert_eq!((row.ok, row.as_is_ok, row.completed_ok), (Some(false), Some(false), Some(false)));
        assert_eq!(row.findings.len(), 1);
        let clean = judge(Lint::default(), "on: push\njobs: {}\n", Verdict::Findings(vec![]), None, None);
        assert_eq!(
            (clean.ok, clean.as_is_ok, clean.completed_ok, clean.note),
            (Some(true), Some(true), Some(true), None)
        );
    }

    #[test]
    fn a_completed_fragment_counts_only_its_own_lines() {
        let Completion::Wrapped(w) = complete("github-actions".parse::<Service>().unwrap(), "- run: echo $X\n") else {
            panic!()
        };
        let found = vec![
            finding("shellcheck:SC2086", Some(7), "in the fragment"),
            finding("excessive-permissions", Some(3), "on the wrapper's job line"),
            finding("job-needs", None, "needs doc2ci-wrapper"),
        ];
        let row = judge(
            Lint::default(),
            "- run: echo $X\n",
            Verdict::Findings(vec![finding("syntax-check", Some(1), "missing on")]),
            Some((&w, Verdict::Findings(found))),
            None,
        );
        assert_eq!((row.ok, row.as_is_ok, row.completed_ok), (Some(false), Some(false), Some(false)));
        assert_eq!(row.completed.as_deref(), Some("steps"));
        assert_eq!(row.findings.len(), 1);
        assert_eq!((row.findings[0].line, row.findings[0].column), (Some(1), Some(1)));
        assert_eq!(row.wrapper_findings.len(), 2);
        let ok = judge(
            Lint::default(),
            "- run: echo $X\n",
            Verdict::Findings(vec![finding("syntax-check", Some(1), "missing on")]),
            Some((&w, Verdict::Findings(vec![finding("excessive-permissions", Some(3), "wrapper")]))),
            None,
        );
        assert_eq!((ok.ok, ok.as_is_ok, ok.completed_ok), (Some(true), Some(false), Some(true)));
        assert!(ok.note.as_deref().is_some_and(|n| n.contains("a sequence")), "{:?}", ok.note);
    }

    /// Issue 30: whatever a tool says of it, a text that is not a configuration is never `ok`.
    #[test]
    fn no_verdict_passes_a_text_that_is_not_a_configuration() {
        let shapes = [
            ("", "empty"),
            ("# only a comment\n# and another\n", "empty"),
            ("Here is the workflow you asked for.", "a scalar"),
            ("42\n", "a scalar"),
            ("- one\n- two\n", "a sequence"),
            ("on: [push\n", "not YAML"),
        ];
        for (text, why) in shapes {
            for as_is in [Verdict::Findings(vec![]), Verdict::Unreadable("the tool could not read it".into())] {
                for no_rule in [None, Some("no completion rule".to_string())] {
                    let row = judge(Lint::default(), text, as_is.clone(), None, no_rule.clone());
                    assert_eq!(
                        (row.ok, row.as_is_ok, row.completed_ok),
                        (Some(false), Some(false), Some(false)),
                        "{text:?} {as_is:?} {no_rule:?}"
                    );
                    let note = row.note.unwrap_or_default();
                    assert!(note.starts_with("not a configuration") && note.contains(why), "{text:?}: {note}");
                }
            }
        }
    }

    #[test]
    fn unjudged_texts_say_why() {
        let row = judge(
            Lint::default(),
            "on: push\njobs: {}\n",
            Verdict::Unreadable("zizmor could not parse it".into()),
            None,
            None,
        );
        assert_eq!((row.ok, row.as_is_ok), (None, None));
        assert_eq!(row.note.as_deref(), Some("zizmor could not parse it"));
        let no_rule = judge(
            Lint::default(),
            "on: push\njobs: {}\n",
            Verdict::Findings(vec![]),
            None,
            Some("no completion rule".into()),
        );
        assert_eq!((no_rule.ok, no_rule.as_is_ok, no_rule.completed_ok), (Some(true), Some(true), None));
        assert_eq!(no_rule.note.as_deref(), Some("no completion rule"));
    }
}
