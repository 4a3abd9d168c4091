//! CrystalBLEU as the `crystalbleu` package computes it (its fork of NLTK's `sentence_bleu` with
//! `ignoring`, BLEU-4 uniform weights, no smoothing), over whitespace tokens of `lj`.

use crate::ngrams::{self, Vocab, MAX_ORDER};
use crate::text::{lj, py_split};
use rustc_hash::{FxHashMap, FxHashSet};

/// The service-wide set of trivially shared n-grams that CrystalBLEU ignores.
///
/// Built once per service because it depends on the whole reference corpus, and it changes every
/// pair's score when a reference is added or removed: the engine must treat it as an input of the
/// score partition.
#[derive(Debug, Clone, Default)]
pub struct CrystalContext {
    index: FxHashMap<Box<str>, u32>,
    ignored: [FxHashSet<u128>; MAX_ORDER],
    list: Vec<(Vec<String>, u64)>,
}

impl CrystalContext {
    /// How many of the most frequent n-grams are ignored (the CrystalBLEU paper's k).
    pub const K: usize = 500;

    /// From the service's references (raw text, as stored) in source order.
    pub fn from_references<I, S>(references: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        Self::from_lj_texts(references.into_iter().map(|r| lj(r.as_ref())), Self::K)
    }

    /// From texts already passed through `lj`, in source order, keeping the `k` most frequent n-grams.
    pub fn from_lj_texts<I, S>(texts: I, k: usize) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let mut vocab: FxHashMap<Box<str>, u32> = FxHashMap::default();
        let mut words: Vec<Box<str>> = Vec::new();
        // (order, packed ids) -> (count, first-seen rank): the rank reproduces the insertion order of
        // Python's Counter, which `most_common` keeps for ties.
        let mut freq: FxHashMap<(u8, u128), (u64, u64)> = FxHashMap::default();
        let mut seen = 0u64;
        for t in texts {
            let ids: Vec<u32> = py_split(t.as_ref())
                .map(|w| {
                    if let Some(&id) = vocab.get(w) {
                        id
                    } else {
                        let id = words.len() as u32;
                        words.push(Box::from(w));
                        vocab.insert(Box::from(w), id);
                        id
                    }
                })
                .collect();
            for n in 1..=MAX_ORDER {
                if ids.len() < n {
                    break;
                }
                for s in 0..=ids.len() - n {
                    let e = freq.entry((n as u8, ngrams::key(&ids[s..s + n]))).or_insert_with(|| {
                        seen += 1;
                        (0, seen)
                    });
                    e.0 += 1;
                }
            }
        }
        let mut all: Vec<((u8, u128), (u64, u64))> = freq.into_iter().collect();
        all.sort_unstable_by(|a, b| b.1 .0.cmp(&a.1 .0).then(a.1 .1.cmp(&b.1 .1)));
        all.truncate(k);
        let mut ctx = CrystalContext::default();
        for ((n, packed), (count, _)) in all {
            let n = n as usize;
            let toks: Vec<String> =
                (0..n).map(|i| words[((packed >> (32 * (n - 1 - i))) & 0xffff_ffff) as usize].to_string()).collect();
            let cids: Vec<u32> = toks
                .iter()
                .map(|t| {
                    let next = ctx.index.len() as u32;
                    *ctx.index.entry(Box::from(t.as_str())).or_insert(next)
                })
                .collect();
            ctx.ignored[n - 1].insert(ngrams::key(&cids));
            ctx.list.push((toks, count));
        }
        ctx
    }

    /// The ignored n-grams with their corpus counts, most frequent first.
    pub fn ignored(&self) -> &[(Vec<String>, u64)] {
        &self.list
    }

    /// Per order, which n-gram start positions of `vocab`'s token sequence are ignored.
    fn mask(&self, vocab: &Vocab) -> [Vec<bool>; MAX_ORDER] {
        let mut map = vec![u32::MAX; vocab.index.len()];
        for (tok, &id) in &vocab.index {
            if let Some(&c) = self.index.get(tok) {
                map[id as usize] = c;
            }
        }
        let cids: Vec<u32> = vocab.ids.iter().map(|&i| map[i as usize]).collect();
        let mut out: [Vec<bool>; MAX_ORDER] = Default::default();
        for n in 1..=MAX_ORDER {
            if cids.len() < n || self.ignored[n - 1].is_empty() {
                out[n - 1] = vec![false; (cids.len() + 1).saturating_sub(n)];
                continue;
            }
            out[n - 1] = cids
                .windows(n)
                .map(|g| !g.contains(&u32::MAX) && self.ignored[n - 1].contains(&ngrams::key(g)))
                .collect();
        }
        out
    }
}

/// Whitespace tokens of one text with what CrystalBLEU and ROUGE-L need of them.
#[derive(Debug, Clone, Default)]
pub struct WordSide {
    pub vocab: Vocab,
    ignored: [Vec<bool>; MAX_ORDER],
    kept: [u64; MAX_ORDER],
    counts: [FxHashMap<u128, u32>; MAX_ORDER],
}

impl WordSide {
    pub fn new(lj: &str, ctx: &CrystalContext) -> Self {
        let vocab = Vocab::new(py_split(lj));
        let ignored = ctx.mask(&vocab);
        let counts = ngrams::count(&vocab.ids, |n, s| ignored[n - 1][s]);
        let kept = std::array::from_fn(|i| ignored[i].iter().filter(|&&x| !x).count() as u64);
        WordSide { vocab, ignored, kept, counts }
    }
}

/// CrystalBLEU of `hyp` against `reference` (both built with the same context).
pub fn crystal_bleu(reference: &WordSide, hyp: &WordSide) -> f64 {
    let cand = reference.vocab.translate(&hyp.vocab);
    let num = ngrams::clipped_matches(&cand, &reference.counts, |n, s| hyp.ignored[n - 1][s]);
    if num[0] == 0 {
        return 0.0;
    }
    let hyp_len = hyp.vocab.len();
    let ref_len = reference.vocab.len();
    let bp = if hyp_len > ref_len {
        1.0
    } else if hyp_len == 0 {
        0.0
    } else {
        (1.0 - ref_len as f64 / hyp_len as f64).exp()
    };
    let terms: Vec<f64> = (0..MAX_ORDER)
        .map(|i| {
            let den = hyp.kept[i].max(1);
            // NLTK's method0 stands in the smallest normal float for a zero precision.
            let p = if num[i] == 0 { f64::MIN_POSITIVE } else { num[i] as f64 / den as f64 };
            0.25 * p.ln()
        })
        .collect();
    bp * fsum(&terms).exp()
}

/// Stands in for Python's `math.fsum` (correctly rounded); Neumaier compensation keeps four terms
/// within an ulp of it.
fn fsum(xs: &[f64]) -> f64 {
    let mut s = 0.0f64;
    let mut c = 0.0f64;
    for &x in xs {
        let t = s + x;
        if s.abs() >= x.abs() {
            c += (s - t) + x;
        } else {
            c += (x - t) + s;
        }
        s = t;
    }
    s + c
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ties_go_to_first_seen() {
        // "a" and "b" both occur twice; "b" is seen first.
        let ctx = CrystalContext::from_lj_texts(["b a", "a b"], 1);
        assert_eq!(ctx.ignored()[0].0, vec!["b".to_string()]);
        let ctx = CrystalContext::from_lj_texts(["x y", "x y", "z"], 3);
        let got: Vec<String> = ctx.ignored().iter().map(|(t, _)| t.join(" ")).collect();
        assert_eq!(got, ["x", "y", "x y"]);
    }

    #[test]
    fn ignored_ngrams_do_not_count() {
        let ctx = CrystalContext::from_lj_texts(["on push"], 1);
        let r = WordSide::new("on push jobs build steps run", &ctx);
        let h = WordSide::new("on push jobs build steps run", &ctx);
        assert!((crystal_bleu(&r, &h) - 1.0).abs() < 1e-12);
        let h2 = WordSide::new("on on on on", &ctx);
        assert_eq!(crystal_bleu(&r, &h2), 0.0);
    }
}
