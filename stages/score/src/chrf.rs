//! sacrebleu's `CHRF(lowercase=True, whitespace=True, eps_smoothing=True)` sentence score (char order 6,
//! no word n-grams, beta 2).

use rustc_hash::FxHashMap;

const ORDER: usize = 6;
const BETA2: f64 = 4.0;
const EPS: f64 = 1e-16;

/// Character n-gram counts of one lowercased text, per order.
#[derive(Debug, Clone, Default)]
pub struct ChrfSide {
    counts: Vec<FxHashMap<u128, u32>>,
    totals: [u64; ORDER],
}

impl ChrfSide {
    pub fn new(lj: &str) -> Self {
        let chars: Vec<char> = lj.to_lowercase().chars().collect();
        let mut counts = Vec::with_capacity(ORDER);
        let mut totals = [0u64; ORDER];
        for n in 1..=ORDER {
            let mut m: FxHashMap<u128, u32> = FxHashMap::default();
            if chars.len() >= n {
                for w in chars.windows(n) {
                    // 21 bits hold any code point; six of them fit in 126 bits.
                    let k = w.iter().fold(0u128, |k, &c| (k << 21) | c as u128);
                    *m.entry(k).or_insert(0) += 1;
                }
                totals[n - 1] = (chars.len() + 1 - n) as u64;
            }
            counts.push(m);
        }
        ChrfSide { counts, totals }
    }
}

/// chrF / 100 of `hyp` against `reference`.
pub fn chrf(reference: &ChrfSide, hyp: &ChrfSide) -> f64 {
    let mut score = 0.0f64;
    for i in 0..ORDER {
        let r = &reference.counts[i];
        let h = &hyp.counts[i];
        // sacrebleu counts no hypothesis n-grams of an order the reference lacks.
        let n_hyp = if r.is_empty() { 0 } else { hyp.totals[i] };
        let n_ref = reference.totals[i];
        let n_match: u64 = if r.len() <= h.len() {
            r.iter().map(|(k, &rc)| h.get(k).map_or(0, |&hc| hc.min(rc)) as u64).sum()
        } else {
            h.iter().map(|(k, &hc)| r.get(k).map_or(0, |&rc| hc.min(rc)) as u64).sum()
        };
        let prec = if n_hyp > 0 { n_match as f64 / n_hyp as f64 } else { EPS };
        let rec = if n_ref > 0 { n_match as f64 / n_ref as f64 } else { EPS };
        let denom = BETA2 * prec + rec;
        score += if denom > 0.0 { (1.0 + BETA2) * prec * rec / denom } else { EPS };
    }
    100.0 * score / ORDER as f64 / 100.0
}
