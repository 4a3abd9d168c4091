//! Repair rounds over typed rows (SPEC §4): which outputs are still schema-invalid after the
//! rounds so far (the next round revisits only those), and the per-round `repairs` summary.
//! Pure: the prompt is the generate crate's, the requests and files are the engine's.

use std::collections::{HashMap, HashSet};

use doc2ci_rows::{Generation, Lint, RepairRow, Validation};

/// One (pair, sample) after the rounds so far.
pub struct Latest<'a> {
    /// Its newest output with that output's validation.
    pub output: Option<(&'a Generation, &'a Validation)>,
    /// Whether any round made it schema-valid (then it is never sent again).
    pub valid: bool,
}

/// (pair, sample) → its state after rounds `0..gens.len()` (`gens[k]` and `vals[k]` are round k).
pub fn latest<'a>(gens: &'a [Vec<Generation>], vals: &'a [Vec<Validation>]) -> HashMap<(String, u32), Latest<'a>> {
    let mut out: HashMap<(String, u32), Latest<'a>> = HashMap::new();
    for (gs, vs) in gens.iter().zip(vals) {
        let vmap: HashMap<(&str, u32), &Validation> = vs.iter().map(|v| ((v.pair_id.as_str(), v.sample), v)).collect();
        for g in gs {
            let k = (g.pair_id.clone(), g.sample);
            let v = vmap.get(&(g.pair_id.as_str(), g.sample)).copied();
            let e = out.entry(k).or_insert(Latest { output: None, valid: false });
            if e.valid {
                continue;
            }
            if let Some(v) = v {
                if g.output.is_some() {
                    e.output = Some((g, v));
                }
                e.valid = v.schema_ok;
            }
        }
    }
    out
}

/// Lint errors of one output, as the repair prompt quotes them.
pub type LintErrors = HashMap<(String, u32), Vec<String>>;

/// Validations with the lint stage's verdicts folded in (`feedback = ["schema", "lint"]`): an
/// output counts as valid only when it is schema-valid and every validator (not audit) that judged
/// it passed; each failing validator's findings become the output's lint errors.
pub fn with_lint(vals: &[Validation], lints: &[Lint]) -> (Vec<Validation>, LintErrors) {
    let mut errors: LintErrors = HashMap::new();
    for l in lints.iter().filter(|l| l.kind == "validator" && l.ok == Some(false)) {
        let tool = l.tool.as_deref().unwrap_or("lint");
        let e = errors.entry((l.pair_id.clone(), l.sample)).or_default();
        for f in &l.findings {
            let at = match (f.line, f.column) {
                (Some(line), Some(col)) => format!(" line {line}, column {col}"),
                (Some(line), None) => format!(" line {line}"),
                _ => String::new(),
            };
            e.push(format!("{tool}{at}: {} [{}]", f.message.trim(), f.rule));
        }
    }
    let merged = vals
        .iter()
        .map(|v| {
            let mut v = v.clone();
            v.schema_ok &= !errors.contains_key(&(v.pair_id.clone(), v.sample));
            v
        })
        .collect();
    (merged, errors)
}

/// The `repairs` rows of one (service, model): per round, what was revisited and fixed, with
/// "valid" meaning `criterion` (whatever `vals` say: schema validity, or it folded with lint).
pub fn summary(
    service: &str,
    model: &str,
    repair_model: &str,
    criterion: &str,
    gens: &[Vec<Generation>],
    vals: &[Vec<Validation>],
) -> Vec<RepairRow> {
    // Errored requests are nobody's output: not in the total, never "still invalid".
    let total = gens.first().map_or(0, |g| g.iter().filter(|g| g.error.is_none()).count()) as u64;
    let mut valid: HashSet<(String, u32)> = vals
        .first()
        .map(|vs| vs.iter().filter(|v| v.schema_ok).map(|v| (v.pair_id.clone(), v.sample)).collect())
        .unwrap_or_default();
    let mut out = Vec::new();
    for (k, round) in gens.iter().enumerate().skip(1) {
        let valid_before = valid.len() as u64;
        let attempted = round.len() as u64;
        let errors = round.iter().filter(|g| g.error.is_some()).count() as u64;
        let mut fixed = 0u64;
        for v in vals.get(k).map_or(&[][..], |v| &v[..]) {
            if v.schema_ok && valid.insert((v.pair_id.clone(), v.sample)) {
                fixed += 1;
            }
        }
        out.push(RepairRow {
            service: service.into(),
            model: model.into(),
            round: k as u32,
            repair_model: repair_model.into(),
            criterion: criterion.into(),
            total,
            valid_before,
            attempted,
            fixed,
            still_invalid: attempted - errors - fixed,
            errors,
            valid_after: valid.len() as u64,
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use doc2ci_rows::Finding;

    fn val(pair: &str, ok: bool) -> Validation {
        Validation {
            pair_id: pair.into(),
            service: "github-actions".into(),
            model: "m".into(),
            sample: 0,
            round: 0,
            parse_ok: true,
            schema_ok: ok,
            errors: if ok { vec![] } else { vec!["/jobs: bad".into()] },
            fragment: false,
        }
    }

    fn lint(pair: &str, kind: &str, ok: Option<bool>) -> Lint {
        Lint {
            pair_id: pair.into(),
            tool: Some("actionlint".into()),
            kind: kind.into(),
            ok,
            findings: vec![Finding {
                rule: "job-needs".into(),
                severity: "error".into(),
                line: Some(3),
                column: Some(5),
                message: "job \"a\" needs job \"x\"".into(),
            }],
            ..Lint::default()
        }
    }

    #[test]
    fn lint_feedback_makes_a_schema_valid_output_invalid_and_quotes_the_findings() {
        let vals = [val("a", true), val("b", true), val("c", false), val("d", true)];
        let lints =
            [lint("a", "validator", Some(false)), lint("b", "audit", Some(false)), lint("d", "validator", None)];
        let (merged, errors) = with_lint(&vals, &lints);
        let ok: Vec<bool> = merged.iter().map(|v| v.schema_ok).collect();
        // An audit finding or an unjudged text never blocks; a failing validator does.
        assert_eq!(ok, [false, true, false, true]);
        assert_eq!(
            errors[&("a".to_string(), 0)],
            ["actionlint line 3, column 5: job \"a\" needs job \"x\" [job-needs]"]
        );
        assert_eq!(errors.len(), 1);
        assert_eq!(merged[2].errors, ["/jobs: bad"]);
    }
}
