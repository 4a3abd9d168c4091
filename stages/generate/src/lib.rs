//! Generation as the study did it (SPEC §4): the exact zero-shot prompt, its few-shot and
//! retrieval variants, the schema-guided repair prompt, markdown-fence stripping and the
//! detection of degenerate outputs. Pure: no I/O, no model calls.
//!
//! Owns: every word a model is sent, and what of its answer is kept. Never calls a model or a
//! file: `libs/llm` and the engine's generate job do.

mod answer;
mod bm25;
pub mod finetune;

use doc2ci_rows::{collapse_ws, normalize_reference, Pair};
use serde::{Deserialize, Serialize};

pub use answer::{answer_row, custom_id, parse_custom_id, Answer};
pub use bm25::Bm25;

/// Part of every generate/repair cache key; the crate's code version already changes with any
/// edit, this names a deliberate change of what the prompts say.
pub const PROMPT_VERSION: u32 = 1;

/// The study's system message, verbatim.
pub const SYSTEM: &str = "You are a highly skilled software developer and DevOps engineer.";

/// The study's instruction, verbatim; `{Service}` is the service's display name.
pub const INSTRUCTION: &str = "Given the description below, generate a minimal and single valid {Service} YAML configuration. Do not provide any reasoning. Only output the single YAML configuration, with no comments, markdown, or extra formatting. The YAML must match the described task exactly. Do not add any unneeded directives unless told.";

/// One chat message; the engine converts it to the backend's own type.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Msg {
    pub role: String,
    pub content: String,
}

impl Msg {
    pub fn new(role: &str, content: impl Into<String>) -> Self {
        Self { role: role.into(), content: content.into() }
    }
}

/// `{Title}: {Description}`: the study's input, fields as stored (no re-spacing).
pub fn task_text(title: &str, description: &str) -> String {
    format!("{title}: {description}")
}

/// The user message of the zero-shot prompt: instruction, one blank line, the task.
pub fn user_prompt(service_display: &str, title: &str, description: &str) -> String {
    format!("{}\n\n{}", INSTRUCTION.replace("{Service}", service_display), task_text(title, description))
}

/// The study's zero-shot prompt for one pair.
pub fn zero_shot(service_display: &str, pair: &Pair) -> Vec<Msg> {
    vec![Msg::new("system", SYSTEM), Msg::new("user", user_prompt(service_display, &pair.title, &pair.description))]
}

/// Few-shot and retrieval switches of a model configuration.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PromptOptions {
    /// Worked examples (same service) given as earlier user/assistant turns.
    pub few_shot: usize,
    /// Documentation sections (same service) quoted before the instruction; 0 = off.
    pub retrieval: usize,
    /// Each quoted section is cut to this many characters (small models have small contexts).
    pub retrieval_chars: usize,
}

/// Copies of a pair never serve as its example or context: they would hand over the answer.
/// A copy shares the whitespace-collapsed title+description, or the normalised reference.
pub fn is_copy(a: &Pair, b: &Pair) -> bool {
    a.pair_id == b.pair_id
        || (collapse_ws(&a.title) == collapse_ws(&b.title)
            && collapse_ws(&a.description) == collapse_ws(&b.description))
        || normalize_reference(&a.reference) == normalize_reference(&b.reference)
}

/// Builds the prompts of one service: the pairs are the pool of examples and documentation.
pub struct Prompter<'a> {
    display: String,
    pairs: &'a [Pair],
    opts: PromptOptions,
    index: Option<Bm25>,
}

impl<'a> Prompter<'a> {
    pub fn new(service_display: &str, pairs: &'a [Pair], opts: PromptOptions) -> Self {
        let index = (opts.retrieval > 0).then(|| Bm25::new(pairs.iter().map(section_text)));
        Self { display: service_display.to_string(), pairs, opts, index }
    }

    pub fn display(&self) -> &str {
        &self.display
    }

    /// The messages for `pair`: zero-shot unless the options add examples or documentation.
    pub fn messages(&self, pair: &Pair) -> Vec<Msg> {
        let mut msgs = vec![Msg::new("system", SYSTEM)];
        for ex in few_shot_examples(self.pairs, pair, self.opts.few_shot) {
            msgs.push(Msg::new("user", user_prompt(&self.display, &ex.title, &ex.description)));
            msgs.push(Msg::new("assistant", normalize_reference(&ex.reference)));
        }
        let mut user = String::new();
        if let Some(index) = &self.index {
            let hits = self.retrieve(index, pair);
            if !hits.is_empty() {
                user.push_str(&format!("Relevant {} documentation:\n\n", self.display));
                for p in hits {
                    user.push_str(&quote_section(p, self.opts.retrieval_chars));
                    user.push_str("\n\n");
                }
            }
        }
        user.push_str(&user_prompt(&self.display, &pair.title, &pair.description));
        msgs.push(Msg::new("user", user));
        msgs
    }

    /// The `retrieval` most similar sections by BM25 over title and prose, never a copy of `pair`.
    pub fn retrieve(&self, index: &Bm25, pair: &Pair) -> Vec<&'a Pair> {
        let ranked = index.rank(&section_query(pair));
        ranked
            .into_iter()
            .map(|(i, _)| &self.pairs[i])
            .filter(|p| !is_copy(p, pair))
            .take(self.opts.retrieval)
            .collect()
    }

    pub fn index(&self) -> Option<&Bm25> {
        self.index.as_ref()
    }
}

fn section_text(p: &Pair) -> String {
    format!("{} {} {}", p.title, p.description, p.reference)
}

fn section_query(p: &Pair) -> String {
    format!("{} {}", p.title, p.description)
}

/// A documentation section as quoted in a retrieval prompt, cut at `max_chars` (0 = whole).
fn quote_section(p: &Pair, max_chars: usize) -> String {
    let text = format!("## {}\n{}\n\n{}", p.title.trim(), p.description.trim(), normalize_reference(&p.reference));
    if max_chars == 0 || text.chars().count() <= max_chars {
        return text;
    }
    let cut: String = text.chars().take(max_chars).collect();
    format!("{cut}\n…")
}

/// `k` examples for `pair` from the same service's pairs: a fixed pseudo-random order seeded
/// by the pair (deterministic across runs and machines, different for each pair), skipping
/// the pair itself and every copy of it.
pub fn few_shot_examples<'p>(pairs: &'p [Pair], pair: &Pair, k: usize) -> Vec<&'p Pair> {
    if k == 0 {
        return Vec::new();
    }
    let mut cands: Vec<(String, &Pair)> = pairs
        .iter()
        .filter(|p| p.service == pair.service && !is_copy(p, pair) && !p.reference.trim().is_empty())
        .map(|p| (blake3::hash(format!("{}\u{0}{}", pair.pair_id, p.pair_id).as_bytes()).to_hex().to_string(), p))
        .collect();
    cands.sort_by(|a, b| a.0.cmp(&b.0));
    // Examples that are copies of each other would waste a slot.
    let mut out: Vec<&Pair> = Vec::new();
    for (_, p) in cands {
        if out.iter().any(|o| is_copy(o, p)) {
            continue;
        }
        out.push(p);
        if out.len() == k {
            break;
        }
    }
    out
}

/// The repair prompt: the original conversation, the model's own answer, then the validator's
/// errors (each with its instance path) and the request for a corrected file.
pub fn repair_messages(original: &[Msg], service_display: &str, output: &str, errors: &[String]) -> Vec<Msg> {
    repair_messages_with_lint(original, service_display, output, errors, &[])
}

/// As [`repair_messages`], with the lint stage's findings quoted after the schema errors
/// (`[stages.repair] feedback = ["schema", "lint"]`); without findings, the same prompt.
pub fn repair_messages_with_lint(
    original: &[Msg],
    service_display: &str,
    output: &str,
    errors: &[String],
    lint: &[String],
) -> Vec<Msg> {
    let mut msgs = original.to_vec();
    msgs.push(Msg::new("assistant", output));
    let text = if lint.is_empty() {
        repair_instruction(service_display, errors)
    } else {
        lint_repair_instruction(service_display, errors, lint)
    };
    msgs.push(Msg::new("user", text));
    msgs
}

fn bullet_list(s: &mut String, items: &[String]) {
    for e in items.iter().take(MAX_REPAIR_ERRORS) {
        s.push_str("- ");
        s.push_str(e.trim());
        s.push('\n');
    }
    if items.len() > MAX_REPAIR_ERRORS {
        s.push_str(&format!("- … and {} more\n", items.len() - MAX_REPAIR_ERRORS));
    }
}

fn lint_repair_instruction(service_display: &str, errors: &[String], lint: &[String]) -> String {
    let mut s = format!("The YAML configuration above is not a valid {service_display} configuration.");
    if !errors.is_empty() {
        s.push_str(&format!(
            " The {service_display} schema validator reported these errors (instance path: message):\n"
        ));
        bullet_list(&mut s, errors);
    }
    s.push_str(&format!(
        "\nThe {service_display} linter reported these problems (tool, line, column: message [rule]):\n"
    ));
    bullet_list(&mut s, lint);
    s.push_str(&format!(
        "\nFix these errors. Output the single corrected {service_display} YAML configuration that still matches the described task exactly, with no comments, markdown, or extra formatting. Do not provide any reasoning."
    ));
    s
}

/// Errors beyond this many are summarised: a long list only dilutes a small model's context.
pub const MAX_REPAIR_ERRORS: usize = 20;

pub fn repair_instruction(service_display: &str, errors: &[String]) -> String {
    let mut s = format!("The YAML configuration above is not a valid {service_display} configuration. The {service_display} schema validator reported these errors (instance path: message):\n");
    bullet_list(&mut s, errors);
    s.push_str(&format!(
        "\nFix these errors. Output the single corrected {service_display} YAML configuration that still matches the described task exactly, with no comments, markdown, or extra formatting. Do not provide any reasoning."
    ));
    s
}

/// Markdown fences removed the way the study did: the body of the first fenced block (its
/// ```` ```yaml ```` / ```` ``` ```` lines dropped, the body's own newline kept), or, when the
/// model wrote no fence, the text as it came. An unclosed fence (output cut at the token cap)
/// keeps everything after the opening line.
pub fn strip_fences(raw: &str) -> String {
    let lines: Vec<&str> = raw.split_inclusive('\n').collect();
    let is_fence = |l: &str| l.trim_start().starts_with("```") || l.trim_start().starts_with("~~~");
    let Some(open) = lines.iter().position(|l| is_fence(l)) else {
        return raw.to_string();
    };
    let body_start = open + 1;
    let close = lines[body_start..].iter().position(|l| l.trim() == "```" || l.trim() == "~~~").map(|c| body_start + c);
    let body: String = match close {
        Some(c) => lines[body_start..c].concat(),
        None => lines[body_start..].concat(),
    };
    // A body on the fence line itself (```yaml on: push```) is rare but seen in small models.
    if body.trim().is_empty() {
        let inline = raw.trim().trim_start_matches("```").trim_end_matches("```");
        let inline = inline.strip_prefix("yaml").or_else(|| inline.strip_prefix("yml")).unwrap_or(inline);
        return inline.trim().to_string();
    }
    body
}

/// Why an output is not a usable answer (the study's "degenerate" flag).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Degenerate {
    /// Nothing, or only whitespace.
    Empty,
    /// Prose without any YAML key: an explanation or a refusal instead of a file.
    Prose,
    /// One line or phrase repeated until the token cap (small models under greedy decoding).
    Repetitive,
}

impl Degenerate {
    pub fn as_str(self) -> &'static str {
        match self {
            Degenerate::Empty => "empty",
            Degenerate::Prose => "prose",
            Degenerate::Repetitive => "repetitive",
        }
    }
}

/// Classifies a fence-stripped output. `hit_cap`: the backend stopped at the token cap, which
/// lowers the bar for calling a repeated tail a loop.
pub fn degenerate(output: &str, hit_cap: bool) -> Option<Degenerate> {
    if output.trim().is_empty() {
        return Some(Degenerate::Empty);
    }
    if is_repetitive(output, hit_cap) {
        return Some(Degenerate::Repetitive);
    }
    if !output.lines().any(looks_like_yaml) {
        return Some(Degenerate::Prose);
    }
    None
}

/// A line a YAML file could hold: `key:` / `key: value` with a single-token key (optionally a
/// list item), a bare list item, or a document marker. Prose such as "Here is the file:" has
/// spaces in its would-be key.
pub fn looks_like_yaml(line: &str) -> bool {
    let t = line.trim();
    if t == "---" || t.starts_with("- ") || t == "-" {
        return true;
    }
    let t = t.strip_prefix("- ").unwrap_or(t);
    let Some(colon) = t.find(':') else { return false };
    let key = t[..colon].trim_matches(|c| c == '"' || c == '\'');
    let after = &t[colon + 1..];
    !key.is_empty() && !key.contains(' ') && (after.is_empty() || after.starts_with(' ') || after.starts_with('\t'))
}

fn is_repetitive(text: &str, hit_cap: bool) -> bool {
    let lines: Vec<&str> = text.lines().map(str::trim).filter(|l| !l.is_empty()).collect();
    // A run of the same line at the end: the loop the model never left.
    if let Some(last) = lines.last() {
        let run = lines.iter().rev().take_while(|l| l == &last).count();
        if run >= if hit_cap { 4 } else { 8 } {
            return true;
        }
    }
    // One line dominating the output (a loop of a few alternating lines).
    let mut counts: std::collections::HashMap<&str, usize> = std::collections::HashMap::new();
    for l in &lines {
        if l.len() >= 3 {
            *counts.entry(l).or_default() += 1;
        }
    }
    if let Some(&max) = counts.values().max() {
        if max >= 8 && max * 10 >= lines.len() * 4 {
            return true;
        }
    }
    // A short unit repeated inside a line (no newlines to count).
    hit_cap && periodic_tail(text)
}

/// The last 240 characters are one unit of at most 60 characters repeated.
fn periodic_tail(text: &str) -> bool {
    let chars: Vec<char> = text.trim_end().chars().collect();
    if chars.len() < 240 {
        return false;
    }
    let tail = &chars[chars.len() - 240..];
    (1..=60).any(|p| (p..tail.len()).all(|i| tail[i] == tail[i - p]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fences_are_stripped_like_the_study() {
        assert_eq!(strip_fences("```yaml\non: push\njobs: {}\n```"), "on: push\njobs: {}\n");
        assert_eq!(strip_fences("```yml\non: push\n```\n"), "on: push\n");
        assert_eq!(strip_fences("Here you go:\n```\na: 1\n```\nThanks"), "a: 1\n");
        assert_eq!(strip_fences("on: push\n"), "on: push\n");
        assert_eq!(strip_fences("```yaml\non: push\njobs:\n  a:"), "on: push\njobs:\n  a:", "cut at the cap");
        assert_eq!(strip_fences("```yaml on: push```"), "on: push");
    }

    #[test]
    fn degenerate_kinds() {
        assert_eq!(degenerate("  \n", false), Some(Degenerate::Empty));
        assert_eq!(degenerate("I cannot help with that request.", false), Some(Degenerate::Prose));
        assert_eq!(
            degenerate("Here is the configuration you asked for:\nIt runs tests.", false),
            Some(Degenerate::Prose)
        );
        let looped = format!("on: push\njobs:\n{}", "# This workflow runs on push\n".repeat(20));
        assert_eq!(degenerate(&looped, true), Some(Degenerate::Repetitive));
        assert_eq!(degenerate(&"abc ".repeat(100), true), Some(Degenerate::Repetitive));
        let ok = "on: push\njobs:\n  a:\n    runs-on: ubuntu-latest\n    steps:\n      - uses: actions/checkout@v4\n  b:\n    runs-on: ubuntu-latest\n    steps:\n      - uses: actions/checkout@v4\n";
        assert_eq!(degenerate(ok, false), None);
        assert_eq!(degenerate("- name: x\n  run: y\n", false), None);
    }
}
