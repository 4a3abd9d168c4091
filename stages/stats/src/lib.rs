//! The study's statistics (SPEC §7, paper §III-F), each matching a named Python peer with that
//! peer's defaults, so a number in our report is the number a scipy/statsmodels script would print.
//!
//! Owns: the tests and the `stats` table's rows ([`study`]). Pure functions over typed rows: never
//! reads or writes files, and never lists the score metrics itself: it takes them as data
//! (`study::Params::metrics`, the score stage's registry), so a new metric needs no change here.
//!
//! Defaults matched (scipy 1.17, statsmodels 0.15, scikit-learn 1.9):
//! - [`friedman`]: `scipy.stats.friedmanchisquare` (average ranks within a block, tie-corrected
//!   chi-square, k − 1 df).
//! - [`wilcoxon`]: `scipy.stats.wilcoxon(x, y)` defaults: `zero_method="wilcox"` (zero differences
//!   dropped), `correction=False`, `method="auto"`: more than 50 pairs → normal approximation with tie
//!   correction; ≤ 50 without ties or zeros → exact null distribution; ≤ 13 with ties or zeros → exact
//!   sign-flip permutation (all 2ⁿ flips, what scipy's `PermutationMethod` enumerates); otherwise normal.
//! - [`mann_whitney`]: `scipy.stats.mannwhitneyu(x, y)` defaults: two-sided, `use_continuity=True`,
//!   `method="auto"`: exact when either sample has ≤ 8 values and there are no ties, else normal with
//!   tie correction. The statistic is U of `x`.
//! - [`spearman`]: `scipy.stats.spearmanr` (Pearson on average ranks, t distribution with n − 2 df).
//! - [`mcnemar`]: `statsmodels.stats.contingency_tables.mcnemar`; we pick `exact=True` (two-sided
//!   binomial on min(b, c)) when b + c < 25 and `exact=False, correction=True` ((|b−c|−1)²/(b+c),
//!   chi-square 1 df) otherwise.
//! - [`holm`]: `statsmodels.stats.multitest.multipletests(p, method="holm")[1]`.
//! - [`cohen_kappa`]: `sklearn.metrics.cohen_kappa_score` (unweighted).
//! - [`percentile`]: `numpy.percentile` default (`linear`).

use statrs::distribution::{ChiSquared, ContinuousCDF, Normal, StudentsT};

pub mod coding;
pub mod compare;
pub mod repair;
pub mod split;
pub mod study;

/// Upper tail of the standard normal.
pub fn normal_sf(z: f64) -> f64 {
    Normal::new(0.0, 1.0).expect("standard normal").sf(z)
}

/// Upper tail of chi-square with `df` degrees of freedom.
pub fn chi2_sf(x: f64, df: f64) -> f64 {
    if x.is_nan() {
        return f64::NAN;
    }
    if x <= 0.0 {
        return 1.0;
    }
    ChiSquared::new(df).expect("positive df").sf(x)
}

/// Upper tail of Student's t with `df` degrees of freedom.
pub fn t_sf(t: f64, df: f64) -> f64 {
    if t.is_nan() {
        return f64::NAN;
    }
    if t == f64::INFINITY {
        return 0.0;
    }
    if t == f64::NEG_INFINITY {
        return 1.0;
    }
    StudentsT::new(0.0, 1.0, df).expect("positive df").sf(t)
}

/// Average ranks (1-based) and the sizes of the tie groups, as `scipy.stats.rankdata(method="average")`.
pub fn rankdata(x: &[f64]) -> (Vec<f64>, Vec<usize>) {
    let mut idx: Vec<usize> = (0..x.len()).collect();
    idx.sort_by(|&a, &b| x[a].total_cmp(&x[b]));
    let mut ranks = vec![0.0; x.len()];
    let mut ties = Vec::new();
    let mut i = 0;
    while i < idx.len() {
        let mut j = i + 1;
        while j < idx.len() && x[idx[j]] == x[idx[i]] {
            j += 1;
        }
        let r = (i + 1 + j) as f64 / 2.0; // mean of ranks i+1 ..= j
        for &k in &idx[i..j] {
            ranks[k] = r;
        }
        ties.push(j - i);
        i = j;
    }
    (ranks, ties)
}

fn tie_term(ties: &[usize]) -> f64 {
    ties.iter().map(|&t| (t as f64).powi(3) - t as f64).sum()
}

/// A test's statistic and two-sided p-value, and how the p-value was obtained.
#[derive(Debug, Clone, PartialEq)]
pub struct TestResult {
    pub statistic: f64,
    pub p: f64,
    /// `exact`, `permutation`, `normal`, `chi2`, `t` or `binomial`.
    pub method: &'static str,
}

/// Friedman test; `blocks[i][j]` is treatment j's value in block i (complete blocks only).
/// None below 3 treatments or without blocks (scipy refuses those).
pub fn friedman(blocks: &[Vec<f64>]) -> Option<TestResult> {
    let n = blocks.len();
    let k = blocks.first()?.len();
    if k < 3 || blocks.iter().any(|b| b.len() != k) {
        return None;
    }
    let mut sums = vec![0.0; k];
    let mut ties = 0.0;
    for b in blocks {
        let (r, t) = rankdata(b);
        for (s, v) in sums.iter_mut().zip(r) {
            *s += v;
        }
        ties += tie_term(&t);
    }
    let (nf, kf) = (n as f64, k as f64);
    let c = 1.0 - ties / (kf * (kf * kf - 1.0) * nf);
    let ssbn: f64 = sums.iter().map(|s| s * s).sum();
    let statistic = (12.0 / (kf * nf * (kf + 1.0)) * ssbn - 3.0 * nf * (kf + 1.0)) / c;
    Some(TestResult { statistic, p: chi2_sf(statistic, kf - 1.0), method: "chi2" })
}

/// Wilcoxon signed-rank test of `x − y` with scipy's defaults (see the crate doc).
#[derive(Debug, Clone, PartialEq)]
pub struct Wilcoxon {
    /// min(R+, R−), what scipy reports for the two-sided test.
    pub statistic: f64,
    pub p: f64,
    pub method: &'static str,
    pub r_plus: f64,
    pub r_minus: f64,
    /// Non-zero differences: the pairs the test uses.
    pub n_nonzero: usize,
    /// Matched-pairs rank-biserial correlation (R+ − R−)/(R+ + R−): positive when x tends to exceed y.
    pub rank_biserial: f64,
}

/// Counts of subsets of {1..n} by sum: the exact null of R+ times 2ⁿ.
fn signed_rank_counts(n: usize) -> Vec<f64> {
    let max = n * (n + 1) / 2;
    let mut c = vec![0.0f64; max + 1];
    c[0] = 1.0;
    for i in 1..=n {
        for s in (i..=max).rev() {
            c[s] += c[s - i];
        }
    }
    c
}

pub fn wilcoxon(x: &[f64], y: &[f64]) -> Option<Wilcoxon> {
    if x.len() != y.len() || x.is_empty() {
        return None;
    }
    let d: Vec<f64> = x.iter().zip(y).map(|(a, b)| a - b).collect();
    let n_all = d.len();
    let n_zero = d.iter().filter(|v| **v == 0.0).count();
    let nz: Vec<f64> = d.iter().copied().filter(|v| *v != 0.0).collect();
    let abs: Vec<f64> = nz.iter().map(|v| v.abs()).collect();
    let (ranks, ties) = rankdata(&abs);
    let r_plus: f64 = nz.iter().zip(&ranks).filter(|(v, _)| **v > 0.0).map(|(_, r)| r).sum();
    let r_minus: f64 = nz.iter().zip(&ranks).filter(|(v, _)| **v < 0.0).map(|(_, r)| r).sum();
    let count = nz.len() as f64;
    let has_ties = ties.iter().any(|&t| t > 1);
    let method = if n_all > 50 {
        "normal"
    } else if !(has_ties || n_zero > 0) {
        "exact"
    } else if n_all <= 13 {
        "permutation"
    } else {
        "normal"
    };
    let p = match method {
        "exact" => {
            let counts = signed_rank_counts(nz.len());
            let total: f64 = 2f64.powi(nz.len() as i32);
            let mean = count * (count + 1.0) / 4.0;
            let cdf = |k: i64| -> f64 {
                if k < 0 {
                    return 0.0;
                }
                counts[..=(k as usize).min(counts.len() - 1)].iter().sum::<f64>() / total
            };
            let sf = |k: i64| -> f64 {
                let k = k.max(0) as usize;
                if k >= counts.len() {
                    return 0.0;
                }
                counts[k..].iter().sum::<f64>() / total
            };
            // scipy sums the shorter side of the mean and complements the other.
            let cdf_s = |k: i64| if (k as f64) <= mean { cdf(k) } else { 1.0 - sf(k + 1) };
            let sf_s = |k: i64| if (k as f64) <= mean { sf(k) } else { 1.0 - cdf(k - 1) };
            let p = 2.0 * sf_s(r_plus.floor() as i64).min(cdf_s(r_plus.ceil() as i64));
            p.clamp(0.0, 1.0)
        }
        "permutation" => {
            // Every sign assignment of the n differences (zeros included, as scipy flips them too).
            let m = 1usize << n_all;
            let mut rank_of = vec![0.0; n_all];
            let mut it = ranks.iter();
            for (i, v) in d.iter().enumerate() {
                if *v != 0.0 {
                    rank_of[i] = *it.next().expect("one rank per non-zero");
                }
            }
            let gamma = (f64::EPSILON * 100.0 * r_plus).abs();
            let (mut less, mut greater) = (0usize, 0usize);
            for mask in 0..m {
                let mut s = 0.0;
                for (i, v) in d.iter().enumerate() {
                    let positive = if mask >> i & 1 == 1 { -*v } else { *v };
                    if positive > 0.0 {
                        s += rank_of[i];
                    }
                }
                less += (s <= r_plus + gamma) as usize;
                greater += (s >= r_plus - gamma) as usize;
            }
            let p = 2.0 * (less as f64 / m as f64).min(greater as f64 / m as f64);
            p.clamp(0.0, 1.0)
        }
        _ => {
            let mn = count * (count + 1.0) * 0.25;
            let se = ((count * (count + 1.0) * (2.0 * count + 1.0) - tie_term(&ties) / 2.0) / 24.0).sqrt();
            let z = (r_plus - mn) / se;
            (2.0 * normal_sf(z.abs())).clamp(0.0, 1.0)
        }
    };
    let total = r_plus + r_minus;
    Some(Wilcoxon {
        statistic: r_plus.min(r_minus),
        p,
        method,
        r_plus,
        r_minus,
        n_nonzero: nz.len(),
        rank_biserial: if total > 0.0 { (r_plus - r_minus) / total } else { 0.0 },
    })
}

/// Holm step-down adjusted p-values, in input order (NaN entries stay NaN and are not counted).
pub fn holm(p: &[f64]) -> Vec<f64> {
    let mut idx: Vec<usize> = (0..p.len()).filter(|&i| !p[i].is_nan()).collect();
    idx.sort_by(|&a, &b| p[a].total_cmp(&p[b]));
    let m = idx.len();
    let mut out = vec![f64::NAN; p.len()];
    let mut running: f64 = 0.0;
    for (rank, &i) in idx.iter().enumerate() {
        running = running.max(p[i] * (m - rank) as f64);
        out[i] = running.min(1.0);
    }
    out
}

/// Counts of arrangements by U for samples of sizes m and n: coefficients of the Gaussian
/// binomial [m+n choose m]_q, exact in integers.
fn mwu_counts(m: usize, n: usize) -> Vec<i128> {
    let (m, n) = (m.min(n), m.max(n));
    let max = m * n;
    let mut c = vec![0i128; max + 1];
    c[0] = 1;
    for i in 1..=m {
        // multiply by (1 − q^(n+i)) ...
        let s = n + i;
        for j in (s..=max).rev() {
            c[j] -= c[j - s];
        }
        // ... and divide by (1 − q^i).
        for j in i..=max {
            c[j] += c[j - i];
        }
    }
    c
}

/// Mann–Whitney U with scipy's defaults (see the crate doc); the statistic is U of `x`.
pub fn mann_whitney(x: &[f64], y: &[f64]) -> Option<TestResult> {
    let (n1, n2) = (x.len(), y.len());
    if n1 == 0 || n2 == 0 {
        return None;
    }
    let all: Vec<f64> = x.iter().chain(y).copied().collect();
    let (ranks, ties) = rankdata(&all);
    let r1: f64 = ranks[..n1].iter().sum();
    let (f1, f2) = (n1 as f64, n2 as f64);
    let u1 = r1 - f1 * (f1 + 1.0) / 2.0;
    let u2 = f1 * f2 - u1;
    let u = u1.max(u2);
    let has_ties = ties.iter().any(|&t| t > 1);
    let exact = (n1 <= 8 || n2 <= 8) && !has_ties;
    let (p, method) = if exact {
        let counts = mwu_counts(n1, n2);
        let total: i128 = counts.iter().sum();
        let k = u as usize;
        let tail: i128 = counts[k.min(counts.len())..].iter().sum();
        (2.0 * tail as f64 / total as f64, "exact")
    } else {
        let n = f1 + f2;
        let s = (f1 * f2 / 12.0 * ((n + 1.0) - tie_term(&ties) / (n * (n - 1.0)))).sqrt();
        let z = (u - f1 * f2 / 2.0 - 0.5) / s;
        (2.0 * normal_sf(z), "normal")
    };
    Some(TestResult { statistic: u1, p: p.clamp(0.0, 1.0), method })
}

/// Cliff's δ = P(x > y) − P(x < y) over all cross pairs (= 2U₁/(n₁n₂) − 1).
pub fn cliffs_delta(x: &[f64], y: &[f64]) -> f64 {
    let all: Vec<f64> = x.iter().chain(y).copied().collect();
    let (ranks, _) = rankdata(&all);
    let (f1, f2) = (x.len() as f64, y.len() as f64);
    let u1 = ranks[..x.len()].iter().sum::<f64>() - f1 * (f1 + 1.0) / 2.0;
    2.0 * u1 / (f1 * f2) - 1.0
}

/// Spearman's ρ and its two-sided p (t approximation); None for constant input or n < 2, where
/// scipy returns NaN.
pub fn spearman(x: &[f64], y: &[f64]) -> Option<TestResult> {
    let n = x.len();
    if n != y.len() || n < 2 || x.iter().all(|v| *v == x[0]) || y.iter().all(|v| *v == y[0]) {
        return None;
    }
    let (rx, _) = rankdata(x);
    let (ry, _) = rankdata(y);
    let rho = pearson(&rx, &ry);
    let dof = n as f64 - 2.0;
    let t = rho * (dof / ((rho + 1.0) * (1.0 - rho))).max(0.0).sqrt();
    let p = if dof <= 0.0 { f64::NAN } else { (2.0 * t_sf(t.abs(), dof)).min(1.0) };
    Some(TestResult { statistic: rho, p, method: "t" })
}

/// Pearson's r in numpy's `corrcoef` order of operations (covariance over n - 1, then divided by
/// each standard deviation in turn), so rho agrees with scipy to the last bits.
fn pearson(x: &[f64], y: &[f64]) -> f64 {
    let n = x.len() as f64;
    let mx = x.iter().sum::<f64>() / n;
    let my = y.iter().sum::<f64>() / n;
    let (mut sxy, mut sxx, mut syy) = (0.0, 0.0, 0.0);
    for (a, b) in x.iter().zip(y) {
        let (da, db) = (a - mx, b - my);
        sxy += da * db;
        sxx += da * da;
        syy += db * db;
    }
    let f = n - 1.0;
    (sxy / f / (sxx / f).sqrt() / (syy / f).sqrt()).clamp(-1.0, 1.0)
}

/// Discordant pairs below which McNemar uses the exact binomial test.
pub const MCNEMAR_EXACT_BELOW: u64 = 25;

/// McNemar's test on the discordant counts b (first yes, second no) and c (first no, second yes).
pub fn mcnemar(b: u64, c: u64) -> TestResult {
    let n = b + c;
    if n < MCNEMAR_EXACT_BELOW {
        let k = b.min(c);
        if n == 0 {
            return TestResult { statistic: 0.0, p: 1.0, method: "binomial" };
        }
        let p = 2.0 * binom_half_cdf(k, n);
        TestResult { statistic: k as f64, p: p.min(1.0), method: "binomial" }
    } else {
        let d = (b as f64 - c as f64).abs() - 1.0;
        let stat = d * d / n as f64;
        TestResult { statistic: stat, p: chi2_sf(stat, 1.0), method: "chi2" }
    }
}

/// P(X ≤ k) for X ~ Binomial(n, ½), summed exactly in integers (n < 100 here).
fn binom_half_cdf(k: u64, n: u64) -> f64 {
    let mut c: u128 = 1; // C(n, 0)
    let mut sum: u128 = 1;
    for i in 1..=k {
        c = c * (n - i + 1) as u128 / i as u128;
        sum += c;
    }
    sum as f64 / 2f64.powi(n as i32)
}

/// P(X ≥ k) for X ~ Binomial(n, ½): the one-sided exact sign test of k successes in n (scipy's
/// `binomtest(k, n, alternative="greater")`), summed in log space so any n works.
pub fn binom_half_sf(k: u64, n: u64) -> f64 {
    if k == 0 {
        return 1.0;
    }
    if k > n {
        return 0.0;
    }
    let ln_fact: Vec<f64> = std::iter::once(0.0)
        .chain((1..=n).scan(0.0, |acc, i| {
            *acc += (i as f64).ln();
            Some(*acc)
        }))
        .collect();
    let ln_half_n = n as f64 * 0.5f64.ln();
    let terms: Vec<f64> =
        (k..=n).map(|i| ln_fact[n as usize] - ln_fact[i as usize] - ln_fact[(n - i) as usize] + ln_half_n).collect();
    let max = terms.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
    (max + terms.iter().map(|t| (t - max).exp()).sum::<f64>().ln()).exp().min(1.0)
}

/// Wilson score interval of k successes in n at `confidence` (statsmodels'
/// `proportion_confint(k, n, method="wilson")`); NaNs for n = 0.
pub fn wilson_ci(k: u64, n: u64, confidence: f64) -> (f64, f64) {
    if n == 0 {
        return (f64::NAN, f64::NAN);
    }
    let z = z_for_confidence(confidence);
    let (p, nf) = (k as f64 / n as f64, n as f64);
    let z2 = z * z;
    let denom = 1.0 + z2 / nf;
    let centre = (p + z2 / (2.0 * nf)) / denom;
    let half = z * (p * (1.0 - p) / nf + z2 / (4.0 * nf * nf)).sqrt() / denom;
    ((centre - half).max(0.0), (centre + half).min(1.0))
}

/// `numpy.percentile(v, q)` with the default linear interpolation; `v` need not be sorted.
pub fn percentile(v: &[f64], q: f64) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let pos = q / 100.0 * (s.len() - 1) as f64;
    let lo = pos.floor() as usize;
    let hi = pos.ceil() as usize;
    let frac = pos - lo as f64;
    s[lo] + (s[hi] - s[lo]) * frac
}

/// A small deterministic generator (xoshiro256** seeded by splitmix64) so bootstrap CIs are the
/// same on every machine and every version of every crate.
pub struct Rng([u64; 4]);

impl Rng {
    pub fn new(seed: u64) -> Self {
        let mut z = seed;
        let mut next = || {
            z = z.wrapping_add(0x9e3779b97f4a7c15);
            let mut x = z;
            x = (x ^ (x >> 30)).wrapping_mul(0xbf58476d1ce4e5b9);
            x = (x ^ (x >> 27)).wrapping_mul(0x94d049bb133111eb);
            x ^ (x >> 31)
        };
        Rng([next(), next(), next(), next()])
    }
    pub fn next_u64(&mut self) -> u64 {
        let s = &mut self.0;
        let result = s[1].wrapping_mul(5).rotate_left(7).wrapping_mul(9);
        let t = s[1] << 17;
        s[2] ^= s[0];
        s[3] ^= s[1];
        s[1] ^= s[2];
        s[0] ^= s[3];
        s[2] ^= t;
        s[3] = s[3].rotate_left(45);
        result
    }
    /// Uniform in 0..n (Lemire's multiply-shift; the tiny bias is irrelevant at n ≪ 2⁶⁴).
    pub fn below(&mut self, n: usize) -> usize {
        ((self.next_u64() as u128 * n as u128) >> 64) as usize
    }
}

/// Means of `resamples` bootstrap resamples of `values` (with replacement), from `seed`.
pub fn bootstrap_means(values: &[f64], seed: u64, resamples: usize) -> Vec<f64> {
    let mut rng = Rng::new(seed);
    let n = values.len();
    (0..resamples).map(|_| (0..n).map(|_| values[rng.below(n)]).sum::<f64>() / n as f64).collect()
}

/// Percentile bootstrap CI of the mean at `level` (e.g. 0.95); None for no values.
pub fn bootstrap_mean_ci(values: &[f64], seed: u64, resamples: usize, level: f64) -> Option<(f64, f64)> {
    if values.is_empty() || resamples == 0 {
        return None;
    }
    let means = bootstrap_means(values, seed, resamples);
    let alpha = (1.0 - level) / 2.0 * 100.0;
    Some((percentile(&means, alpha), percentile(&means, 100.0 - alpha)))
}

/// Unweighted Cohen's κ between two raters' labels; None when lengths differ or are 0.
/// As sklearn: the labels are the union of both raters'; perfect chance agreement gives NaN.
pub fn cohen_kappa<S: AsRef<str>>(a: &[S], b: &[S]) -> Option<f64> {
    if a.len() != b.len() || a.is_empty() {
        return None;
    }
    let mut labels: Vec<&str> = a.iter().chain(b).map(|s| s.as_ref()).collect();
    labels.sort_unstable();
    labels.dedup();
    let k = labels.len();
    let ix = |s: &str| labels.binary_search(&s).expect("label collected");
    let mut m = vec![vec![0.0f64; k]; k];
    for (x, y) in a.iter().zip(b) {
        m[ix(x.as_ref())][ix(y.as_ref())] += 1.0;
    }
    let n = a.len() as f64;
    let rows: Vec<f64> = m.iter().map(|r| r.iter().sum()).collect();
    let cols: Vec<f64> = (0..k).map(|j| m.iter().map(|r| r[j]).sum()).collect();
    // sklearn: 1 − Σ w·O / Σ w·E with w = 1 off the diagonal and E = outer(rows, cols)/n.
    let mut observed = 0.0;
    let mut expected = 0.0;
    for i in 0..k {
        for j in 0..k {
            if i != j {
                observed += m[i][j];
                expected += rows[i] * cols[j] / n;
            }
        }
    }
    Some(1.0 - observed / expected)
}

/// The study's size tiers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Tier {
    Small,
    Medium,
    Large,
}

impl Tier {
    pub const ALL: [Tier; 3] = [Tier::Small, Tier::Medium, Tier::Large];
    /// small ≤ 8B, medium 9–15B (anything above 8 up to 15), large > 15B.
    pub fn of(size_b: f64) -> Tier {
        if size_b <= 8.0 {
            Tier::Small
        } else if size_b <= 15.0 {
            Tier::Medium
        } else {
            Tier::Large
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            Tier::Small => "small",
            Tier::Medium => "medium",
            Tier::Large => "large",
        }
    }
    pub fn label(self) -> &'static str {
        match self {
            Tier::Small => "Small (≤ 8B)",
            Tier::Medium => "Medium (9–15B)",
            Tier::Large => "Large (> 15B)",
        }
    }
}

/// Unbiased pass@k (Chen et al. 2021): 1 − C(n−c, k)/C(n, k), as the product form of their numpy code.
pub fn pass_at_k(n: u64, c: u64, k: u64) -> f64 {
    if n < k || n - c < k {
        return 1.0;
    }
    let mut prod = 1.0;
    for i in (n - c + 1)..=n {
        prod *= 1.0 - k as f64 / i as f64;
    }
    1.0 - prod
}

/// Two-sided normal quantile z for a confidence level (0.95 → 1.959964…).
pub fn z_for_confidence(confidence: f64) -> f64 {
    Normal::new(0.0, 1.0).expect("standard normal").inverse_cdf(1.0 - (1.0 - confidence) / 2.0)
}

/// Sample size for estimating a proportion (worst case p = ½) at `confidence` and ± `margin`,
/// with the finite-population correction for a population of `population` items:
/// n₀ = z²·¼/e², n = ⌈n₀ / (1 + (n₀ − 1)/N)⌉. Without the correction (N → ∞), 95%/±5% gives 385.
pub fn sample_size(population: Option<u64>, confidence: f64, margin: f64) -> u64 {
    let z = z_for_confidence(confidence);
    let n0 = z * z * 0.25 / (margin * margin);
    let n = match population {
        Some(big_n) if big_n > 0 => n0 / (1.0 + (n0 - 1.0) / big_n as f64),
        _ => n0,
    };
    let n = n.ceil() as u64;
    match population {
        Some(big_n) => n.min(big_n),
        None => n,
    }
}

/// Arithmetic mean; NaN for no values.
pub fn mean(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len() as f64
}

/// Median (numpy's: mean of the middle two for even n).
pub fn median(v: &[f64]) -> f64 {
    percentile(v, 50.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tiers_follow_the_study() {
        assert_eq!(Tier::of(7.0), Tier::Small);
        assert_eq!(Tier::of(8.0), Tier::Small);
        assert_eq!(Tier::of(9.0), Tier::Medium);
        assert_eq!(Tier::of(15.0), Tier::Medium);
        assert_eq!(Tier::of(27.0), Tier::Large);
    }

    #[test]
    fn sample_size_matches_the_study() {
        assert_eq!(sample_size(None, 0.95, 0.05), 385);
        assert_eq!(sample_size(None, 0.95, 0.10), 97);
        // FPC shrinks it for a finite population, never above N.
        assert_eq!(sample_size(Some(53_808), 0.95, 0.05), 382);
        assert_eq!(sample_size(Some(1_000), 0.95, 0.05), 278);
        assert_eq!(sample_size(Some(50), 0.95, 0.05), 45);
    }

    #[test]
    fn pass_at_k_edges() {
        assert_eq!(pass_at_k(5, 0, 1), 0.0);
        assert_eq!(pass_at_k(5, 5, 1), 1.0);
        assert!((pass_at_k(10, 3, 1) - 0.3).abs() < 1e-12);
        assert!((pass_at_k(4, 1, 2) - 0.5).abs() < 1e-12);
    }

    #[test]
    fn mwu_counts_sum_to_binomial() {
        let c = mwu_counts(3, 5);
        assert_eq!(c.iter().sum::<i128>(), 56);
        assert_eq!(c.len(), 16);
        assert!(c.iter().all(|v| *v > 0));
    }

    #[test]
    fn rng_is_deterministic() {
        let a = bootstrap_means(&[1.0, 2.0, 3.0], 7, 5);
        let b = bootstrap_means(&[1.0, 2.0, 3.0], 7, 5);
        assert_eq!(a, b);
        assert_ne!(a, bootstrap_means(&[1.0, 2.0, 3.0], 8, 5));
    }
}
