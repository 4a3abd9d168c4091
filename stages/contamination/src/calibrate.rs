//! The screen calibrated on twins, per model and service. A high-risk rate alone mixes recall with
//! how predictable CI files are; the twins (same files, edits no model saw) measure the second:
//! - the high-risk rate on real references and on twins (the false-positive rate), Wilson 95% CIs;
//! - the sign test that real references are flagged more often than their own twins: over the
//!   pairs where exactly one of the two is flagged, one-sided exact binomial (scipy's
//!   `binomtest(real_only, real_only + twin_only, alternative="greater")`), with a bootstrap CI of
//!   the paired difference of the two rates;
//! - where the backend scored both texts token by token, the ROC AUC of Min-K% Prob separating
//!   real from twin (0.5: nothing recalled), with a bootstrap CI over pairs.

use std::collections::BTreeMap;

use doc2ci_rows::Contamination;
use doc2ci_stats::study::StatRow;
use doc2ci_stats::{binom_half_sf, cliffs_delta, percentile, Rng};
use serde::{Deserialize, Serialize};

/// One pair as screened for one model: each verdict (high-risk or not) where that text was
/// measured, and each Min-K% score where it was scored.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Screened {
    pub real: Option<bool>,
    pub twin: Option<bool>,
    pub real_min_k: Option<f64>,
    pub twin_min_k: Option<f64>,
}

/// A proportion with its Wilson 95% interval.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Rate {
    pub k: u64,
    pub n: u64,
    pub rate: f64,
    pub lo: f64,
    pub hi: f64,
}

/// A value with a 95% bootstrap interval.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Estimate {
    pub value: f64,
    pub lo: f64,
    pub hi: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// High-risk rates over every measured reference and every measured twin.
    pub real: Rate,
    pub twin: Rate,
    /// Pairs with both measured: the sign test's and the difference's.
    pub pairs: u64,
    /// Pairs flagged on the real reference only, and on the twin only.
    pub real_only: u64,
    pub twin_only: u64,
    /// One-sided exact sign test p-value (real flagged more than twin).
    pub sign_p: f64,
    /// Real rate − twin rate over the pairs.
    pub difference: Estimate,
    /// Pairs with both Min-K% scores, and their AUC.
    pub min_k_pairs: u64,
    pub auc: Option<Estimate>,
}

/// statsmodels' `proportion_confint(k, n, method="wilson")` at 95%, as a [`Rate`].
pub fn wilson(k: u64, n: u64) -> Rate {
    let rate = if n == 0 { f64::NAN } else { k as f64 / n as f64 };
    let (lo, hi) = doc2ci_stats::wilson_ci(k, n, 0.95);
    Rate { k, n, rate, lo, hi }
}

/// ROC AUC of scores where `positive` should score higher (sklearn's `roc_auc_score`: ties count
/// half), which is (1 + Cliff's δ) / 2; None without both classes.
pub fn auc(positive: &[f64], negative: &[f64]) -> Option<f64> {
    (!positive.is_empty() && !negative.is_empty()).then(|| (1.0 + cliffs_delta(positive, negative)) / 2.0)
}

/// The percentile interval of `stat` over `resamples` resamples of the pairs (with replacement).
fn bootstrap(
    n: usize,
    seed: u64,
    resamples: usize,
    mut stat: impl FnMut(&[usize]) -> Option<f64>,
) -> Option<(f64, f64)> {
    let mut rng = Rng::new(seed);
    let mut idx = vec![0usize; n];
    let values: Vec<f64> = (0..resamples)
        .filter_map(|_| {
            idx.iter_mut().for_each(|i| *i = rng.below(n));
            stat(&idx)
        })
        .collect();
    (!values.is_empty()).then(|| (percentile(&values, 2.5), percentile(&values, 97.5)))
}

/// The calibrated screen of one model and service. `seed` and `resamples` fix the bootstrap.
pub fn summarize(screened: &[Screened], seed: u64, resamples: usize) -> Summary {
    let rate = |f: &dyn Fn(&Screened) -> Option<bool>| {
        let v: Vec<bool> = screened.iter().filter_map(f).collect();
        wilson(v.iter().filter(|x| **x).count() as u64, v.len() as u64)
    };
    let both: Vec<(bool, bool)> = screened.iter().filter_map(|p| Some((p.real?, p.twin?))).collect();
    let real_only = both.iter().filter(|(r, t)| *r && !*t).count() as u64;
    let twin_only = both.iter().filter(|(r, t)| *t && !*r).count() as u64;
    let diff_of = |idx: &[usize]| {
        (!idx.is_empty())
            .then(|| idx.iter().map(|&i| f64::from(both[i].0) - f64::from(both[i].1)).sum::<f64>() / idx.len() as f64)
    };
    let all: Vec<usize> = (0..both.len()).collect();
    let difference = match (diff_of(&all), bootstrap(both.len(), seed, resamples, diff_of)) {
        (Some(value), Some((lo, hi))) => Estimate { value, lo, hi },
        _ => Estimate { value: f64::NAN, lo: f64::NAN, hi: f64::NAN },
    };
    let scored: Vec<(f64, f64)> = screened.iter().filter_map(|p| Some((p.real_min_k?, p.twin_min_k?))).collect();
    let auc_of = |idx: &[usize]| {
        let (r, t): (Vec<f64>, Vec<f64>) = idx.iter().map(|&i| scored[i]).unzip();
        auc(&r, &t)
    };
    let all_scored: Vec<usize> = (0..scored.len()).collect();
    let auc_est = auc_of(&all_scored).map(|value| {
        let (lo, hi) = bootstrap(scored.len(), seed ^ 0xa0c, resamples, auc_of).unwrap_or((value, value));
        Estimate { value, lo, hi }
    });
    Summary {
        real: rate(&|p| p.real),
        twin: rate(&|p| p.twin),
        pairs: both.len() as u64,
        real_only,
        twin_only,
        sign_p: binom_half_sf(real_only, real_only + twin_only),
        difference,
        min_k_pairs: scored.len() as u64,
        auc: auc_est,
    }
}

/// One (service, model) partition's rows as pairs: a text counts where it was measured.
pub fn screened(rows: &[Contamination]) -> Vec<Screened> {
    let mut by_pair: BTreeMap<&str, Screened> = BTreeMap::new();
    for r in rows {
        let e = by_pair.entry(r.pair_id.as_str()).or_insert(Screened {
            real: None,
            twin: None,
            real_min_k: None,
            twin_min_k: None,
        });
        let verdict = match r.status.as_str() {
            "high_risk" => Some(true),
            "clean" => Some(false),
            _ => None,
        };
        match r.variant.as_str() {
            "real" => (e.real, e.real_min_k) = (verdict, r.min_k.filter(|_| verdict.is_some())),
            "twin" => (e.twin, e.twin_min_k) = (verdict, r.min_k.filter(|_| verdict.is_some())),
            _ => {}
        }
    }
    by_pair.into_values().collect()
}

/// The summary as `stats` rows (`metric = "contamination"`): the two rates, the sign test and,
/// where scored, the Min-K% AUC.
pub fn stat_rows(service: &str, model: &str, s: &Summary) -> Vec<StatRow> {
    let row =
        |test: &str, group_b: &str, n: u64, effect: f64, effect_name: &str, (lo, hi): (f64, f64), method: &str| {
            StatRow {
                test: test.into(),
                service: service.into(),
                metric: "contamination".into(),
                group_a: model.into(),
                group_b: group_b.into(),
                n,
                statistic: None,
                p: None,
                p_holm: None,
                effect: Some(effect).filter(|x| x.is_finite()),
                effect_name: effect_name.into(),
                ci_low: Some(lo).filter(|x| x.is_finite()),
                ci_high: Some(hi).filter(|x| x.is_finite()),
                b: None,
                c: None,
                method: method.into(),
            }
        };
    let mut out = vec![
        row("contamination_rate", "real", s.real.n, s.real.rate, "high_risk_rate", (s.real.lo, s.real.hi), "wilson"),
        row("contamination_rate", "twin", s.twin.n, s.twin.rate, "high_risk_rate", (s.twin.lo, s.twin.hi), "wilson"),
    ];
    let mut sign = row(
        "contamination_sign",
        "twin",
        s.pairs,
        s.difference.value,
        "rate_difference",
        (s.difference.lo, s.difference.hi),
        "binomial (one-sided)",
    );
    (sign.statistic, sign.p, sign.b, sign.c) =
        (Some(s.real_only as f64), Some(s.sign_p), Some(s.real_only), Some(s.twin_only));
    out.push(sign);
    if let Some(a) = s.auc {
        out.push(row("contamination_auc", "twin", s.min_k_pairs, a.value, "auc", (a.lo, a.hi), "bootstrap"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-12
    }

    /// Values from scipy 1.17.1, statsmodels 0.15.0 and scikit-learn 1.9.1:
    /// `binomtest(9, 12, alternative="greater")`, `binomtest(30, 45, ...)`,
    /// `proportion_confint(7, 40, method="wilson")`, `(0, 25)`, `roc_auc_score` below.
    #[test]
    fn the_statistics_equal_their_python_values() {
        assert!(close(binom_half_sf(9, 12), 0.072998046875));
        assert!((binom_half_sf(30, 45) - 0.017848901777597348).abs() < 1e-12);
        assert_eq!(binom_half_sf(0, 0), 1.0);
        let r = wilson(7, 40);
        assert!(close(r.lo, 0.0874541374603592) && close(r.hi, 0.3194999033178772), "{r:?}");
        let r = wilson(0, 25);
        assert!(close(r.lo, 0.0) && close(r.hi, 0.13319225093904855), "{r:?}");
        assert!(close(auc(&[0.9, 0.5, 0.3], &[0.5, 0.2, 0.1]).unwrap(), 0.8333333333333334));
    }

    #[test]
    fn rates_count_every_measured_text_and_the_sign_test_only_pairs_with_both() {
        let row = |id: &str, variant: &str, status: &str| Contamination {
            pair_id: id.into(),
            variant: variant.into(),
            status: status.into(),
            min_k: Some(-1.0),
            ..Contamination::default()
        };
        let rows = [
            row("a", "real", "high_risk"),
            row("a", "twin", "clean"),
            row("b", "real", "high_risk"),
            row("b", "twin", "no_twin"),
            row("c", "real", "too_short"),
            row("c", "twin", "no_twin"),
            row("d", "real", "clean"),
            row("d", "twin", "error"),
        ];
        let s = summarize(&screened(&rows), 1, 100);
        assert_eq!((s.real.k, s.real.n, s.twin.k, s.twin.n), (2, 3, 0, 1));
        assert_eq!((s.pairs, s.real_only, s.twin_only, s.min_k_pairs), (1, 1, 0, 1));
    }

    #[test]
    fn a_model_that_recalls_every_real_file_and_no_twin_is_told_apart_and_one_that_recalls_nothing_is_not() {
        let recall: Vec<Screened> = (0..40)
            .map(|i| Screened {
                real: Some(i % 2 == 0),
                twin: Some(false),
                real_min_k: Some(-1.0 + i as f64 * 1e-3),
                twin_min_k: Some(-5.0),
            })
            .collect();
        let s = summarize(&recall, 7, 500);
        assert_eq!((s.real.k, s.twin.k, s.real_only, s.twin_only), (20, 0, 20, 0));
        assert!(s.sign_p < 1e-5 && s.difference.lo > 0.3, "{s:?}");
        assert_eq!(s.auc.unwrap().value, 1.0);
        let rows = stat_rows("github-actions", "m", &s);
        assert_eq!(
            rows.iter().map(|r| r.test.as_str()).collect::<Vec<_>>(),
            ["contamination_rate", "contamination_rate", "contamination_sign", "contamination_auc"]
        );
        assert_eq!((rows[2].b, rows[2].c, rows[2].p), (Some(20), Some(0), Some(s.sign_p)));
        let chance: Vec<Screened> = (0..200)
            .map(|i| Screened {
                real: Some(i % 7 == 0),
                twin: Some(i % 7 == 1),
                real_min_k: Some((i * 37 % 101) as f64),
                twin_min_k: Some((i * 53 % 101) as f64),
            })
            .collect();
        let s = summarize(&chance, 7, 500);
        assert!(s.sign_p > 0.3 && s.difference.lo < 0.0 && s.difference.hi > 0.0, "{s:?}");
        let a = s.auc.unwrap();
        assert!(a.lo < 0.5 && a.hi > 0.5, "{a:?}");
    }
}
