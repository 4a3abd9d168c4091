//! Repair rounds over typed rows (SPEC §4): which outputs are still schema-invalid after the
//! rounds so far (the next round revisits only those), and the per-round `repairs` summary.
//! Pure: the prompt is the generate crate's, the requests and files are the engine's.

use std::collections::{HashMap, HashSet};

use doc2ci_rows::{Generation, RepairRow, Validation};

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

/// The `repairs` rows of one (service, model): per round, what was revisited and fixed.
pub fn summary(
    service: &str,
    model: &str,
    repair_model: &str,
    gens: &[Vec<Generation>],
    vals: &[Vec<Validation>],
) -> Vec<RepairRow> {
    let total = gens.first().map_or(0, |g| g.len()) as u64;
    let mut valid: HashSet<(String, u32)> = vals
        .first()
        .map(|vs| vs.iter().filter(|v| v.schema_ok).map(|v| (v.pair_id.clone(), v.sample)).collect())
        .unwrap_or_default();
    let mut out = Vec::new();
    for k in 1..gens.len() {
        let valid_before = valid.len() as u64;
        let attempted = gens[k].len() as u64;
        let errors = gens[k].iter().filter(|g| g.error.is_some()).count() as u64;
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
            total,
            valid_before,
            attempted,
            fixed,
            still_invalid: attempted - fixed,
            errors,
            valid_after: valid.len() as u64,
        });
    }
    out
}
