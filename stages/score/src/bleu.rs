//! sacrebleu's `sentence_bleu` (13a tokeniser, `exp` smoothing, effective order) as of sacrebleu 2.x.

use crate::ngrams::{self, Vocab, MAX_ORDER};
use crate::text::{py_rstrip, py_split};
use rustc_hash::FxHashMap;

/// sacrebleu's `Tokenizer13a` after `rstrip`, returning the tokens of its space-joined output.
pub fn tokenize_13a(line: &str) -> Vec<String> {
    let mut line = py_rstrip(line).replace("<skipped>", "").replace("-\n", "").replace('\n', " ");
    if line.contains('&') {
        line = line.replace("&quot;", "\"").replace("&amp;", "&").replace("&lt;", "<").replace("&gt;", ">");
    }
    // The four regex passes of TokenizerRegexp, each a left-to-right scan of non-overlapping matches
    // exactly as Python's re.sub performs them.
    let mut s: Vec<char> = Vec::with_capacity(line.len() * 2 + 2);
    s.push(' ');
    for c in line.chars() {
        if is_13a_punct(c) {
            s.extend([' ', c, ' ']);
        } else {
            s.push(c);
        }
    }
    s.push(' ');
    let is_digit = |c: char| c.is_ascii_digit();
    let is_pc = |c: char| c == '.' || c == ',';
    // ([^0-9])([\.,]) -> '\1 \2 '
    s = pair_pass(&s, |a, b| !is_digit(a) && is_pc(b), |a, b, o| o.extend([a, ' ', b, ' ']));
    // ([\.,])([^0-9]) -> ' \1 \2'
    s = pair_pass(&s, |a, b| is_pc(a) && !is_digit(b), |a, b, o| o.extend([' ', a, ' ', b]));
    // ([0-9])(-) -> '\1 \2 '
    s = pair_pass(&s, |a, b| is_digit(a) && b == '-', |a, b, o| o.extend([a, ' ', b, ' ']));
    let joined: String = s.into_iter().collect();
    py_split(&joined).map(str::to_owned).collect()
}

/// `[\{-\~\[-\` -\&\(-\+\:-\@\/]`
#[inline]
fn is_13a_punct(c: char) -> bool {
    matches!(c, '{'..='~' | '['..='`' | ' '..='&' | '('..='+' | ':'..='@' | '/')
}

fn pair_pass(s: &[char], hit: impl Fn(char, char) -> bool, emit: impl Fn(char, char, &mut Vec<char>)) -> Vec<char> {
    let mut out = Vec::with_capacity(s.len() + s.len() / 4);
    let mut i = 0;
    while i < s.len() {
        if i + 1 < s.len() && hit(s[i], s[i + 1]) {
            emit(s[i], s[i + 1], &mut out);
            i += 2;
        } else {
            out.push(s[i]);
            i += 1;
        }
    }
    out
}

/// A text's 13a tokens with their n-gram counts, ready to serve as reference or hypothesis.
#[derive(Debug, Clone, Default)]
pub struct BleuSide {
    vocab: Vocab,
    counts: [FxHashMap<u128, u32>; MAX_ORDER],
}

impl BleuSide {
    pub fn new(lj: &str) -> Self {
        let toks = tokenize_13a(lj);
        let vocab = Vocab::new(toks.iter().map(String::as_str));
        let counts = ngrams::count(&vocab.ids, |_, _| false);
        BleuSide { vocab, counts }
    }
}

/// sacrebleu's `my_log`.
fn my_log(x: f64) -> f64 {
    if x == 0.0 {
        -9999999999.0
    } else {
        x.ln()
    }
}

/// Sentence BLEU / 100 of `hyp` against `reference`.
pub fn bleu(reference: &BleuSide, hyp: &BleuSide) -> f64 {
    let cand = reference.vocab.translate(&hyp.vocab);
    let correct = ngrams::clipped_matches(&cand, &reference.counts, |_, _| false);
    let sys_len = hyp.vocab.len();
    let ref_len = reference.vocab.len();
    let total: Vec<u64> = (1..=MAX_ORDER).map(|n| (sys_len + 1).saturating_sub(n) as u64).collect();
    compute_bleu(&correct, &total, sys_len, ref_len) / 100.0
}

/// `BLEU.compute_bleu` with smooth_method='exp', effective_order=True.
fn compute_bleu(correct: &[u64], total: &[u64], sys_len: usize, ref_len: usize) -> f64 {
    let mut bp = 1.0;
    if sys_len < ref_len {
        bp = if sys_len > 0 { (1.0 - ref_len as f64 / sys_len as f64).exp() } else { 0.0 };
    }
    if correct.iter().all(|&c| c == 0) {
        return 0.0;
    }
    let mut precisions = [0.0f64; MAX_ORDER];
    let mut smooth_mteval = 1.0f64;
    let mut eff_order = MAX_ORDER;
    for n in 1..=MAX_ORDER {
        if total[n - 1] == 0 {
            break;
        }
        eff_order = n;
        if correct[n - 1] == 0 {
            smooth_mteval *= 2.0;
            precisions[n - 1] = 100.0 / (smooth_mteval * total[n - 1] as f64);
        } else {
            precisions[n - 1] = 100.0 * correct[n - 1] as f64 / total[n - 1] as f64;
        }
    }
    let mut sum = 0.0;
    for p in &precisions[..eff_order] {
        sum += my_log(*p);
    }
    bp * (sum / eff_order as f64).exp()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokenizer_13a_cases() {
        assert_eq!(tokenize_13a("Hello, world."), ["Hello", ",", "world", "."]);
        assert_eq!(tokenize_13a("v1.2,3 x-1 3-4 a.b"), ["v1.2,3", "x-1", "3", "-", "4", "a", ".", "b"]);
        assert_eq!(
            tokenize_13a("run: echo &quot;hi&quot; ${{ x }}"),
            ["run", ":", "echo", "\"", "hi", "\"", "$", "{", "{", "x", "}", "}"]
        );
    }

    #[test]
    fn identical_is_one_and_disjoint_is_zero() {
        let a = BleuSide::new("on: push jobs: build: runs-on: ubuntu-latest");
        assert!((bleu(&a, &a) - 1.0).abs() < 1e-12);
        let b = BleuSide::new("zzz qqq");
        assert_eq!(bleu(&a, &b), 0.0);
    }
}
