//! Okapi BM25 over lower-cased alphanumeric words: deterministic, no model, and good at what
//! retrieval needs here (sections that name the same keys and actions as the description).

use std::collections::HashMap;

pub struct Bm25 {
    docs: Vec<HashMap<String, u32>>,
    lens: Vec<f64>,
    avg_len: f64,
    df: HashMap<String, u32>,
}

const K1: f64 = 1.2;
const B: f64 = 0.75;

pub fn tokens(s: &str) -> Vec<String> {
    s.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()).map(|w| w.to_lowercase()).collect()
}

impl Bm25 {
    pub fn new<I: IntoIterator<Item = S>, S: AsRef<str>>(docs: I) -> Self {
        let mut out = Bm25 { docs: Vec::new(), lens: Vec::new(), avg_len: 0.0, df: HashMap::new() };
        for d in docs {
            let mut tf: HashMap<String, u32> = HashMap::new();
            let toks = tokens(d.as_ref());
            out.lens.push(toks.len() as f64);
            for t in toks {
                *tf.entry(t).or_default() += 1;
            }
            for t in tf.keys() {
                *out.df.entry(t.clone()).or_default() += 1;
            }
            out.docs.push(tf);
        }
        out.avg_len = if out.lens.is_empty() { 0.0 } else { out.lens.iter().sum::<f64>() / out.lens.len() as f64 };
        out
    }

    /// Documents by descending score, ties by position; documents sharing no word are left out.
    pub fn rank(&self, query: &str) -> Vec<(usize, f64)> {
        let n = self.docs.len() as f64;
        let mut q = tokens(query);
        q.sort();
        q.dedup();
        let mut scored: Vec<(usize, f64)> = self
            .docs
            .iter()
            .enumerate()
            .map(|(i, tf)| {
                let s: f64 = q
                    .iter()
                    .filter_map(|t| {
                        let f = *tf.get(t)? as f64;
                        let df = *self.df.get(t)? as f64;
                        let idf = ((n - df + 0.5) / (df + 0.5) + 1.0).ln();
                        Some(idf * f * (K1 + 1.0) / (f + K1 * (1.0 - B + B * self.lens[i] / self.avg_len.max(1e-9))))
                    })
                    .sum();
                (i, s)
            })
            .filter(|(_, s)| *s > 0.0)
            .collect();
        scored.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        scored
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranks_by_shared_rare_words() {
        let idx = Bm25::new([
            "cache node modules with actions cache",
            "matrix of operating systems",
            "upload artifact after build",
        ]);
        let r = idx.rank("How do I cache dependencies?");
        assert_eq!(r[0].0, 0);
        assert_eq!(r.len(), 1);
        assert!(idx.rank("nothing shared here zzz").is_empty());
    }
}
