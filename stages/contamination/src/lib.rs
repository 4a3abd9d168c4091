//! The contamination screen: has a model seen a pair's reference? DevOps-Gym's prefix completion
//! (arXiv 2601.20882): the model continues the first `prefix` tokens of the reference, and its
//! continuation is compared with the true next `suffix` tokens by five measures, any one over its
//! threshold making the sample high-risk (`measures`). A threshold alone cannot say how often a
//! model that never saw a file still continues it closely (CI files are formulaic), so every
//! reference also gets a twin no model can have seen (`twin`) and the screen is calibrated on the
//! pair of them (`calibrate`).
//!
//! Owns: the probe (where a reference is cut), the continuation instruction, reading a
//! continuation out of an answer, the measures, the twins and the per-model summary. Pure logic
//! over texts; asking the model, caching and tables are the engine's (`src/jobs/contamination.rs`).
//!
//! Tokens are whitespace tokens (Python's `str.split()`): the same cut for every model, so models
//! with different tokenizers are screened on the same prefix. The paper's Appendix B could not be
//! read here (only its abstract is in the stored material), so where it is silent (the token
//! unit, how each measure is normalised) the choices are ours and are documented at each measure.

pub mod calibrate;
pub mod measures;
pub mod twin;

use doc2ci_score::py_split;
use serde::{Deserialize, Serialize};

pub use measures::{measure, Measures, THRESHOLDS};

/// DevOps-Gym's prefix and suffix lengths, in tokens.
pub const DEFAULT_PREFIX_TOKENS: usize = 50;
pub const DEFAULT_SUFFIX_TOKENS: usize = 50;

/// Where a reference is cut: `prefix` tokens shown, the next `suffix` tokens compared.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Shape {
    pub prefix: usize,
    pub suffix: usize,
}

impl Default for Shape {
    fn default() -> Self {
        Shape { prefix: DEFAULT_PREFIX_TOKENS, suffix: DEFAULT_SUFFIX_TOKENS }
    }
}

/// A reference cut for the screen.
#[derive(Debug, Clone, PartialEq)]
pub struct Probe {
    /// The reference up to the end of its `prefix`-th token, as written (indentation and line
    /// breaks kept: a YAML file's layout is part of what a model recalls).
    pub prefix: String,
    /// The next `suffix` tokens.
    pub suffix: Vec<String>,
}

/// A reference with fewer than `prefix + suffix` tokens is `TooShort`: it is never called clean,
/// since nothing was measured.
#[derive(Debug, Clone, PartialEq)]
pub enum Probed {
    Probe(Probe),
    TooShort { tokens: usize },
}

/// Whitespace tokens of a text with their byte ranges.
fn spans(text: &str) -> impl Iterator<Item = (usize, &str)> {
    let base = text.as_ptr() as usize;
    py_split(text).map(move |t| (t.as_ptr() as usize - base, t))
}

/// Cuts a reference into the prefix the model sees and the suffix it should not know.
pub fn probe(reference: &str, shape: Shape) -> Probed {
    let toks: Vec<(usize, &str)> = spans(reference).take(shape.prefix + shape.suffix).collect();
    if toks.len() < shape.prefix + shape.suffix || shape.prefix == 0 || shape.suffix == 0 {
        return Probed::TooShort { tokens: spans(reference).count() };
    }
    let (at, last) = toks[shape.prefix - 1];
    Probe {
        prefix: reference[..at + last.len()].to_string(),
        suffix: toks[shape.prefix..].iter().map(|(_, t)| t.to_string()).collect(),
    }
    .into()
}

impl From<Probe> for Probed {
    fn from(p: Probe) -> Self {
        Probed::Probe(p)
    }
}

/// Bumped whenever [`instruction`] or [`continuation`] change: every screened answer is then
/// asked again.
pub const INSTRUCTION_VERSION: u32 = 1;

/// The chat models' continuation instruction, after Golchin & Surdeanu's guided instruction
/// (ICLR 2024, "Time Travel in LLMs"): name where the text comes from and ask for its exact
/// continuation. A raw-completion backend gets the prefix alone instead.
pub fn instruction(service_display: &str, title: &str, prefix: &str) -> String {
    format!(
        "You are given the first piece of a {service_display} configuration file as it appears in the \
         {service_display} documentation, on the page \"{title}\". Finish the file exactly as it appears \
         on that page, continuing right after the last character shown. Output only the rest of the \
         file: no explanation, no code fences, and do not repeat the first piece.\n\nFirst piece:\n{prefix}"
    )
}

/// What follows the prefix in an answer: a chat model may wrap its answer in a code fence or
/// repeat the first piece despite the instruction, and neither is the continuation. A fence's
/// body is taken (the first fence), then a copy of the prefix at its start (compared token by
/// token, so re-indentation does not hide it) is dropped.
pub fn continuation(answer: &str, prefix: &str) -> String {
    let body = fenced_body(answer).unwrap_or(answer);
    let want: Vec<&str> = py_split(prefix).collect();
    let have: Vec<(usize, &str)> = spans(body).take(want.len()).collect();
    if !want.is_empty() && have.len() == want.len() && have.iter().zip(&want).all(|((_, a), b)| a == b) {
        let (at, last) = have[want.len() - 1];
        return body[at + last.len()..].to_string();
    }
    body.to_string()
}

/// The body of the first ``` fence, when the answer has one that opens a line.
fn fenced_body(answer: &str) -> Option<&str> {
    let open = if answer.starts_with("```") { 0 } else { answer.find("\n```")? + 1 };
    let after = &answer[open + 3..];
    let body_at = after.find('\n')? + 1;
    let body = &after[body_at..];
    let end = if body.starts_with("```") { Some(0) } else { body.find("\n```").map(|i| i + 1) };
    Some(&body[..end.unwrap_or(body.len())])
}

/// Min-K% Prob's share of tokens (Shi et al., ICLR 2024, "Detecting Pretraining Data from Large
/// Language Models": 20% is their best setting).
pub const MIN_K: f64 = 0.2;

/// Min-K% Prob of a text from the log-probabilities of its tokens, each given the ones before
/// it: the mean of the lowest `k` share (at least one token). Higher means the text surprised the
/// model less. The authors' code: `np.sort(all_prob)[:int(len(all_prob) * ratio)]`, mean.
pub fn min_k_prob(logprobs: &[f64], k: f64) -> Option<f64> {
    if logprobs.is_empty() || logprobs.iter().any(|x| x.is_nan()) {
        return None;
    }
    let mut v = logprobs.to_vec();
    v.sort_by(|a, b| a.total_cmp(b));
    let n = ((v.len() as f64 * k) as usize).max(1);
    Some(v[..n].iter().sum::<f64>() / n as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(n: usize) -> String {
        (0..n).map(|i| format!("w{i}")).collect::<Vec<_>>().join(" ")
    }

    #[test]
    fn a_probe_keeps_the_prefix_as_written_and_cuts_exactly_the_suffix() {
        let text = "name: CI\non:\n  push:\n    branches: [ main ]\njobs:\n  build:\n    runs-on: x\n";
        let Probed::Probe(p) = probe(text, Shape { prefix: 4, suffix: 3 }) else { panic!("long enough") };
        assert_eq!(p.prefix, "name: CI\non:\n  push:");
        assert_eq!(p.suffix, ["branches:", "[", "main"]);
        assert_eq!(probe(text, Shape { prefix: 10, suffix: 4 }), Probed::TooShort { tokens: 12 });
        assert!(matches!(probe(&words(100), Shape::default()), Probed::Probe(_)));
        assert_eq!(probe(&words(99), Shape::default()), Probed::TooShort { tokens: 99 });
    }

    #[test]
    fn a_continuation_loses_its_fence_and_an_echoed_prefix_but_nothing_else() {
        let prefix = "name: CI\non:\n  push:";
        assert_eq!(continuation("    branches: [main]", prefix), "    branches: [main]");
        assert_eq!(continuation("```yaml\n    branches: [main]\n```\nDone.", prefix), "    branches: [main]\n");
        assert_eq!(continuation("Sure:\n```\nname: CI\non:\n push:\n  branches: x\n```", prefix), "\n  branches: x\n");
        // Only a whole copy of the prefix counts as an echo.
        assert_eq!(continuation("name: CI\njobs: {}", prefix), "name: CI\njobs: {}");
    }

    #[test]
    fn min_k_averages_the_least_likely_fifth() {
        let lp: Vec<f64> = (1..=10).map(|i| -(i as f64)).collect();
        assert_eq!(min_k_prob(&lp, MIN_K), Some(-9.5));
        assert_eq!(min_k_prob(&[-3.0, -1.0], MIN_K), Some(-3.0), "at least one token");
        assert_eq!(min_k_prob(&[], MIN_K), None);
    }

    #[test]
    fn the_instruction_names_the_source_and_ends_with_the_prefix() {
        let i = instruction("GitHub Actions", "Building and testing Go", "name: Go");
        assert!(i.contains("GitHub Actions documentation") && i.contains("\"Building and testing Go\""));
        assert!(i.ends_with("First piece:\nname: Go"));
    }
}
