//! Open coding (paper §III-E, RQ4): a stratified random sample of outputs, a sheet people fill,
//! and the agreement and taxonomy once it comes back.

use std::collections::{BTreeMap, BTreeSet};

use crate::{cohen_kappa, Rng};

/// One output that may be drawn.
#[derive(Debug, Clone, PartialEq)]
pub struct Candidate {
    pub service: String,
    pub model: String,
    pub pair_id: String,
}

/// Splits `n` over strata in proportion to `sizes` (largest remainder; ties to the earlier stratum),
/// never giving a stratum more than it holds.
pub fn allocate(n: u64, sizes: &[u64]) -> Vec<u64> {
    let total: u64 = sizes.iter().sum();
    if total == 0 {
        return vec![0; sizes.len()];
    }
    let n = n.min(total);
    let exact: Vec<f64> = sizes.iter().map(|s| n as f64 * *s as f64 / total as f64).collect();
    let mut alloc: Vec<u64> = exact.iter().zip(sizes).map(|(e, s)| (e.floor() as u64).min(*s)).collect();
    let mut left = n - alloc.iter().sum::<u64>();
    let mut order: Vec<usize> = (0..sizes.len()).collect();
    order.sort_by(|&a, &b| (exact[b] - exact[b].floor()).total_cmp(&(exact[a] - exact[a].floor())).then(a.cmp(&b)));
    while left > 0 {
        let mut gave = false;
        for &i in &order {
            if left > 0 && alloc[i] < sizes[i] {
                alloc[i] += 1;
                left -= 1;
                gave = true;
            }
        }
        if !gave {
            break;
        }
    }
    alloc
}

fn shuffle<T>(v: &mut [T], rng: &mut Rng) {
    for i in (1..v.len()).rev() {
        let j = rng.below(i + 1);
        v.swap(i, j);
    }
}

/// Draws the sample: `per_service[s]` items from service s, spread as evenly as possible across
/// that service's models (round robin over a shuffled model order, random items within a model).
/// Deterministic for a seed; returns indices into `cands`, grouped by service then draw order.
pub fn draw(cands: &[Candidate], per_service: &BTreeMap<String, u64>, seed: u64) -> Vec<usize> {
    let mut rng = Rng::new(seed);
    let mut out = Vec::new();
    for (svc, quota) in per_service {
        let mut by_model: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
        for (i, c) in cands.iter().enumerate().filter(|(_, c)| &c.service == svc) {
            by_model.entry(c.model.as_str()).or_default().push(i);
        }
        let mut lists: Vec<Vec<usize>> = by_model.into_values().collect();
        for l in lists.iter_mut() {
            shuffle(l, &mut rng);
        }
        shuffle(&mut lists, &mut rng);
        let mut taken = 0u64;
        let mut round = 0usize;
        while taken < *quota {
            let mut any = false;
            for l in &lists {
                if taken < *quota && round < l.len() {
                    out.push(l[round]);
                    taken += 1;
                    any = true;
                }
            }
            if !any {
                break;
            }
            round += 1;
        }
    }
    out
}

pub const VERDICTS: &[&str] = &["usable", "partial", "unusable"];

/// One coded row of a returned sheet.
#[derive(Debug, Clone, PartialEq)]
pub struct Coded {
    pub sample_id: String,
    pub verdict: String,
    pub degenerate: bool,
    pub issue_codes: Vec<String>,
    pub attribution: String,
}

/// Parses a verdict cell: one of [`VERDICTS`] in any case; empty means not coded yet.
pub fn parse_verdict(s: &str) -> Result<Option<String>, String> {
    let v = s.trim().to_ascii_lowercase();
    if v.is_empty() {
        return Ok(None);
    }
    if VERDICTS.contains(&v.as_str()) {
        Ok(Some(v))
    } else {
        Err(format!("verdict `{}` is not one of {}", s.trim(), VERDICTS.join(", ")))
    }
}

/// A coding sheet's flag that is not yes or no.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct FlagError(pub String);

pub fn parse_flag(s: &str) -> Result<bool, FlagError> {
    match s.trim().to_ascii_lowercase().as_str() {
        "" | "no" | "n" | "false" | "0" => Ok(false),
        "yes" | "y" | "true" | "1" | "x" => Ok(true),
        other => Err(FlagError(format!("degenerate flag `{other}` is not yes/no"))),
    }
}

/// Issue codes: `;` or `,` separated; each `category/code` (or a bare category).
pub fn parse_codes(s: &str) -> Vec<String> {
    s.split([';', ',']).map(|c| c.trim().to_string()).filter(|c| !c.is_empty()).collect()
}

pub fn category(code: &str) -> &str {
    code.split(['/', ':']).next().unwrap_or(code).trim()
}

/// Agreement between two coders on the rows both coded.
#[derive(Debug, Clone, PartialEq)]
pub struct Agreement {
    pub n: usize,
    pub kappa3: Option<f64>,
    pub kappa_binary: Option<f64>,
    pub agree: usize,
}

pub fn agreement(a: &[Coded], b: &[Coded]) -> Agreement {
    let bm: BTreeMap<&str, &Coded> = b.iter().map(|c| (c.sample_id.as_str(), c)).collect();
    let (mut x, mut y) = (Vec::new(), Vec::new());
    for c in a {
        if let Some(d) = bm.get(c.sample_id.as_str()) {
            x.push(c.verdict.clone());
            y.push(d.verdict.clone());
        }
    }
    let bx: Vec<&str> = x.iter().map(|v| if v == "usable" { "usable" } else { "not usable" }).collect();
    let by: Vec<&str> = y.iter().map(|v| if v == "usable" { "usable" } else { "not usable" }).collect();
    Agreement {
        n: x.len(),
        kappa3: cohen_kappa(&x, &y).filter(|k| k.is_finite()),
        kappa_binary: cohen_kappa(&bx, &by).filter(|k| k.is_finite()),
        agree: x.iter().zip(&y).filter(|(p, q)| p == q).count(),
    }
}

/// Verdict shares and issue-category counts per value of a grouping (service, tier, type).
pub fn taxonomy(
    coded: &[Coded],
    group_of: impl Fn(&Coded) -> String,
) -> BTreeMap<String, (BTreeMap<&str, usize>, BTreeMap<String, usize>)> {
    let mut out: BTreeMap<String, (BTreeMap<&str, usize>, BTreeMap<String, usize>)> = BTreeMap::new();
    for c in coded {
        let e = out.entry(group_of(c)).or_default();
        *e.0.entry(c.verdict.as_str()).or_default() += 1;
        let cats: BTreeSet<&str> = c.issue_codes.iter().map(|s| category(s)).collect();
        for cat in cats {
            *e.1.entry(cat.to_string()).or_default() += 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allocation_is_proportional_and_exact() {
        assert_eq!(allocate(385, &[1318, 1429, 1519, 1841]).iter().sum::<u64>(), 385);
        assert_eq!(allocate(10, &[1, 1, 100]), vec![0, 0, 10]);
        assert_eq!(allocate(10, &[3, 3, 4]), vec![3, 3, 4]);
        assert_eq!(allocate(5, &[2, 0]), vec![2, 0]);
    }

    #[test]
    fn draw_spreads_evenly_across_models() {
        let mut cands = Vec::new();
        for m in ["a", "b", "c"] {
            for p in 0..50 {
                cands.push(Candidate { service: "s".into(), model: m.into(), pair_id: format!("p{p}") });
            }
        }
        let q: BTreeMap<String, u64> = [("s".to_string(), 31u64)].into();
        let idx = draw(&cands, &q, 7);
        assert_eq!(idx.len(), 31);
        let mut per: BTreeMap<&str, usize> = BTreeMap::new();
        for i in &idx {
            *per.entry(cands[*i].model.as_str()).or_default() += 1;
        }
        let (lo, hi) = (per.values().min().unwrap(), per.values().max().unwrap());
        assert!(hi - lo <= 1, "{per:?}");
        assert_eq!(idx, draw(&cands, &q, 7), "same seed, same sample");
        assert_ne!(idx, draw(&cands, &q, 8));
        let uniq: BTreeSet<usize> = idx.iter().copied().collect();
        assert_eq!(uniq.len(), idx.len(), "without replacement");
    }

    #[test]
    fn verdicts_and_flags() {
        assert_eq!(parse_verdict(" Usable ").unwrap().as_deref(), Some("usable"));
        assert_eq!(parse_verdict("").unwrap(), None);
        assert!(parse_verdict("maybe").unwrap_err().contains("`maybe`"));
        assert!(parse_flag("yes").unwrap());
        assert!(parse_flag("perhaps").is_err());
        assert_eq!(parse_codes("omission/missing-step; invalidity , "), vec!["omission/missing-step", "invalidity"]);
        assert_eq!(category("omission/missing-step"), "omission");
    }
}
