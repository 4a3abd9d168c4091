//! DevOps-Gym's five similarity measures between a continuation and the true suffix, and their
//! thresholds: s > 0.7, t > 30, p > 30, l > 30, b > 0.5; any one over makes the sample
//! high-risk (arXiv 2601.20882, §3.1 and Appendix B, as the seed summary quotes them).
//!
//! The appendix's formulas were not readable here, so each measure is the standard one its letter
//! and scale name, over the first |suffix| whitespace tokens of the continuation (c) and the true
//! suffix (r), n = |r|:
//! - s, edit similarity in [0, 1]: 1 − Levenshtein(c', r') / max(|c'|, |r'|) over code points of
//!   the tokens joined by single spaces (c', r');
//! - t, token match in %: positions i < n with c[i] = r[i], over n;
//! - p, prefix match in %: the longest common prefix of c and r in tokens, over n;
//! - l, LCS in %: the longest common subsequence of c and r in tokens, over n;
//! - b, BLEU in [0, 1]: sentence BLEU of c' against r' (sacrebleu defaults: 13a, exp smoothing)
//!   over 100.
//!
//! `peers/contamination.py` computes the same from rapidfuzz and sacrebleu; the crate's
//! `peer_agree` test holds the two equal on real references.

use doc2ci_score::{edit_similarity, py_split, sentence_bleu};
use serde::{Deserialize, Serialize};

/// The five values of one sample.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Measures {
    pub s: f64,
    pub t: f64,
    pub p: f64,
    pub l: f64,
    pub b: f64,
}

/// (measure, threshold): a value strictly above its threshold flags the sample.
pub const THRESHOLDS: [(&str, f64); 5] = [("s", 0.7), ("t", 30.0), ("p", 30.0), ("l", 30.0), ("b", 0.5)];

impl Measures {
    pub fn get(&self, name: &str) -> f64 {
        match name {
            "s" => self.s,
            "t" => self.t,
            "p" => self.p,
            "l" => self.l,
            "b" => self.b,
            _ => panic!("no measure {name}"),
        }
    }

    /// The measures over their thresholds, in the paper's order.
    pub fn flags(&self) -> Vec<&'static str> {
        THRESHOLDS.iter().filter(|(m, th)| self.get(m) > *th).map(|(m, _)| *m).collect()
    }

    pub fn high_risk(&self) -> bool {
        !self.flags().is_empty()
    }
}

/// The measures of `continuation` (any text; its first |suffix| tokens count) against `suffix`.
pub fn measure(suffix: &[String], continuation: &str) -> Measures {
    let n = suffix.len();
    let c: Vec<&str> = py_split(continuation).take(n).collect();
    let r: Vec<&str> = suffix.iter().map(String::as_str).collect();
    if n == 0 {
        return Measures { s: 0.0, t: 0.0, p: 0.0, l: 0.0, b: 0.0 };
    }
    let (cj, rj) = (c.join(" "), r.join(" "));
    let pct = |k: usize| 100.0 * k as f64 / n as f64;
    Measures {
        s: edit_similarity(&cj, &rj),
        t: pct(c.iter().zip(&r).filter(|(a, b)| a == b).count()),
        p: pct(c.iter().zip(&r).take_while(|(a, b)| a == b).count()),
        l: pct(lcs(&c, &r)),
        b: sentence_bleu(&rj, &cj),
    }
}

/// Length of the longest common subsequence (n ≤ a few hundred tokens: the plain table).
fn lcs(a: &[&str], b: &[&str]) -> usize {
    let mut prev = vec![0usize; b.len() + 1];
    let mut cur = vec![0usize; b.len() + 1];
    for x in a {
        for (j, y) in b.iter().enumerate() {
            cur[j + 1] = if x == y { prev[j] + 1 } else { cur[j].max(prev[j + 1]) };
        }
        std::mem::swap(&mut prev, &mut cur);
    }
    prev[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn toks(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn the_true_suffix_scores_the_maximum_and_silence_the_minimum() {
        let r = toks("runs-on: ubuntu-latest steps: - uses: actions/checkout@v4 - run: make test");
        let m =
            measure(&r, "runs-on:  ubuntu-latest\n  steps:\n  - uses: actions/checkout@v4\n  - run: make test\nmore");
        assert_eq!((m.s, m.t, m.p, m.l), (1.0, 100.0, 100.0, 100.0));
        assert!((m.b - 1.0).abs() < 1e-12, "{m:?}");
        assert_eq!(m.flags(), ["s", "t", "p", "l", "b"]);
        let z = measure(&r, "");
        assert_eq!((z.s, z.t, z.p, z.l, z.b), (0.0, 0.0, 0.0, 0.0, 0.0));
        assert!(!z.high_risk());
    }

    #[test]
    fn each_measure_counts_what_its_name_says() {
        let r = toks("a b c d e f g h i j");
        // One token dropped at the front: nothing matches by position, the LCS keeps 9 of 10.
        let m = measure(&r, "b c d e f g h i j");
        assert_eq!((m.t, m.p, m.l), (0.0, 0.0, 90.0));
        // One token changed in the middle: 9 positions, a prefix of 4.
        let m = measure(&r, "a b c d X f g h i j");
        assert_eq!((m.t, m.p, m.l), (90.0, 40.0, 90.0));
        assert!((m.s - (1.0 - 1.0 / 19.0)).abs() < 1e-12);
        // Only the first |suffix| tokens of the continuation count.
        assert_eq!(measure(&r, "a b c d e f g h i j k l m").t, 100.0);
    }

    #[test]
    fn a_value_at_its_threshold_does_not_flag() {
        let m = Measures { s: 0.7, t: 30.0, p: 30.0, l: 30.0, b: 0.5 };
        assert!(!m.high_risk());
        assert_eq!(Measures { l: 30.0001, ..m }.flags(), ["l"]);
    }
}
