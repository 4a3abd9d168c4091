//! ROUGE-L F1 as pytorch-ignite's `RougeL(alpha=0.5)` computes it for one candidate and one reference.

use crate::ngrams::Vocab;

/// Length of the longest common subsequence of two id sequences, bit-parallel (Hyyrö 2004) over the
/// pattern `a` so long workflows cost O(|a|/64 · |b|) word operations. Ids `u32::MAX` in `b` match
/// nothing.
pub fn lcs_len(a: &[u32], alphabet: usize, b: &[u32]) -> usize {
    if a.is_empty() || b.is_empty() {
        return 0;
    }
    let words = a.len().div_ceil(64);
    let mut peq = vec![0u64; alphabet * words];
    for (i, &c) in a.iter().enumerate() {
        peq[c as usize * words + i / 64] |= 1u64 << (i % 64);
    }
    let mut v = vec![!0u64; words];
    for &c in b {
        if c == u32::MAX {
            continue;
        }
        let m = &peq[c as usize * words..(c as usize + 1) * words];
        let mut carry = 0u64;
        for (vw, &mw) in v.iter_mut().zip(m) {
            let u = *vw & mw;
            let (s1, c1) = vw.overflowing_add(u);
            let (s2, c2) = s1.overflowing_add(carry);
            carry = (c1 | c2) as u64;
            *vw = s2 | (*vw - u);
        }
    }
    let tail = a.len() % 64;
    let mut ones: usize = v.iter().map(|w| w.count_ones() as usize).sum();
    if tail != 0 {
        // Bits above the pattern's end stay set; they are not part of it.
        ones -= (v[words - 1] >> tail).count_ones() as usize;
    }
    a.len() - ones
}

/// ROUGE-L F with alpha 0.5 of the candidate against the reference, both as whitespace tokens.
pub fn rouge_l(reference: &Vocab, candidate: &Vocab) -> f64 {
    let cand = reference.translate(candidate);
    let m = lcs_len(&reference.ids, reference.index.len(), &cand) as f64;
    let nc = candidate.len();
    let nr = reference.len();
    let p = if nc > 0 { m / nc as f64 } else { 0.0 };
    let r = if nr > 0 { m / nr as f64 } else { 0.0 };
    let pr = p * r;
    if pr > 0.0 {
        pr / ((1.0 - 0.5) * p + 0.5 * r)
    } else {
        0.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn naive(a: &[u32], b: &[u32]) -> usize {
        let mut dp = vec![vec![0usize; b.len() + 1]; a.len() + 1];
        for i in 1..=a.len() {
            for j in 1..=b.len() {
                dp[i][j] = if a[i - 1] == b[j - 1] { dp[i - 1][j - 1] + 1 } else { dp[i - 1][j].max(dp[i][j - 1]) };
            }
        }
        dp[a.len()][b.len()]
    }

    #[test]
    fn bit_parallel_lcs_matches_dynamic_programming() {
        let mut seed = 0x9e3779b97f4a7c15u64;
        let mut next = |m: u64| crate::xorshift::below(&mut seed, m);
        for round in 0..300 {
            let alpha = 1 + next(6) as u32;
            let la = next(200) as usize + (round % 3) * 64;
            let lb = next(200) as usize;
            let a: Vec<u32> = (0..la).map(|_| next(alpha as u64) as u32).collect();
            let b: Vec<u32> = (0..lb).map(|_| next(alpha as u64) as u32).collect();
            assert_eq!(lcs_len(&a, alpha as usize, &b), naive(&a, &b), "round {round}");
        }
    }

    #[test]
    fn f1_of_partial_overlap() {
        let r = Vocab::new("a b c d".split(' '));
        let c = Vocab::new("a c x".split(' '));
        // LCS 2, P = 2/3, R = 1/2, F = 2PR/(P+R) = 4/7.
        assert!((rouge_l(&r, &c) - 4.0 / 7.0).abs() < 1e-15);
    }
}
