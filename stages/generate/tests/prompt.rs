//! The prompts against the SPEC's own words, and the rules on examples, context and folds.

use std::collections::HashSet;

use doc2ci_generate::*;
use doc2ci_rows::{pair_id, Pair};

fn pair(service: &str, title: &str, desc: &str, reference: &str, pos: u64) -> Pair {
    Pair {
        pair_id: pair_id(service, title, desc, reference),
        service: service.into(),
        url: format!("https://example.com/{pos}"),
        title: title.into(),
        description: desc.into(),
        reference: reference.into(),
        n_copies: 1,
        urls: vec![],
        source: "docs".into(),
        source_id: pos.to_string(),
        source_ids: vec![pos.to_string()],
        position: pos,
        leak: None,
        published: None,
        published_source: None,
        not_before: None,
    }
}

/// The exact prompt, character for character, as SPEC §4 words it.
#[test]
fn zero_shot_prompt_is_the_spec_text() {
    let p = pair("github-actions", "Caching dependencies", "Use actions/cache to\nspeed up  builds.", "on: push\n", 0);
    let m = zero_shot("GitHub Actions", &p);
    assert_eq!(m.len(), 2);
    assert_eq!(m[0].role, "system");
    assert_eq!(m[0].content, "You are a highly skilled software developer and DevOps engineer.");
    assert_eq!(m[1].role, "user");
    let expected = "Given the description below, generate a minimal and single valid GitHub Actions YAML configuration. \
Do not provide any reasoning. Only output the single YAML configuration, with no comments, markdown, or extra formatting. \
The YAML must match the described task exactly. Do not add any unneeded directives unless told.\n\nCaching dependencies: Use actions/cache to\nspeed up  builds.";
    assert_eq!(m[1].content, expected);
}

/// The same comparison against the SPEC file itself (its markdown wraps lines; inline code
/// spans are joined with single spaces), so a drift on either side fails.
#[test]
fn prompt_matches_the_spec_file() {
    let spec = std::path::Path::new(&std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"))
        .join("../../../shared/SPEC.md");
    let Ok(text) = std::fs::read_to_string(&spec) else {
        panic!("SPEC missing at {}", spec.display());
    };
    let sec = &text[text.find("## 4. Generation").expect("§4")..];
    let joined = sec.replace('\n', " ");
    let spans: Vec<&str> = joined.split('`').collect();
    let system = spans.iter().position(|s| s.trim_end().ends_with("System:")).map(|i| spans[i + 1]).unwrap();
    let user = spans.iter().position(|s| s.trim_end().ends_with("User:")).map(|i| spans[i + 1]).unwrap();
    assert_eq!(system, SYSTEM);
    assert_eq!(user, INSTRUCTION);
    assert!(sec.contains("followed by a blank line and `{Title}: {Description}`"));
    let p = pair("travis-ci", "T", "D", "x: 1", 0);
    assert_eq!(zero_shot("Travis CI", &p)[1].content, format!("{}\n\nT: D", user.replace("{Service}", "Travis CI")));
}

fn corpus() -> Vec<Pair> {
    vec![
        pair("gha", "Caching", "Cache npm dependencies with actions cache.", "on: push\njobs: {a: 1}", 0),
        pair("gha", "Caching", "Cache   npm dependencies with actions cache.", "on: push\njobs: {b: 2}", 1), // copy: same description
        pair("gha", "Other title", "Different prose.", "on: push\njobs: {a: 1}  \n", 2), // copy: same reference
        pair("gha", "Cache pip", "Cache pip dependencies with actions cache for Python.", "on: push\njobs: {c: 3}", 3),
        pair("gha", "Matrix", "Run a matrix of node versions.", "on: push\njobs: {d: 4}", 4),
        pair("gha", "Artifacts", "Upload build artifacts.", "on: push\njobs: {e: 5}", 5),
        pair("gha", "Services", "Use a postgres service container.", "on: push\njobs: {f: 6}", 6),
    ]
}

#[test]
fn few_shot_never_uses_the_pair_or_a_copy_and_is_deterministic() {
    let pairs = corpus();
    for k in 1..=4 {
        let ex = few_shot_examples(&pairs, &pairs[0], k);
        assert_eq!(ex.len(), k.min(4));
        for e in &ex {
            assert!(![0, 1, 2].contains(&e.position), "copy {} used as example", e.position);
        }
        assert_eq!(ex, few_shot_examples(&pairs, &pairs[0], k));
    }
    let pr = Prompter::new("GitHub Actions", &pairs, PromptOptions { few_shot: 2, ..Default::default() });
    let m = pr.messages(&pairs[0]);
    assert_eq!(
        m.iter().map(|m| m.role.as_str()).collect::<Vec<_>>(),
        ["system", "user", "assistant", "user", "assistant", "user"]
    );
    assert_eq!(m.last().unwrap().content, zero_shot("GitHub Actions", &pairs[0])[1].content);
}

#[test]
fn retrieval_quotes_similar_sections_but_no_copy() {
    let pairs = corpus();
    let pr = Prompter::new(
        "GitHub Actions",
        &pairs,
        PromptOptions { retrieval: 2, retrieval_chars: 400, ..Default::default() },
    );
    let hits = pr.retrieve(pr.index().unwrap(), &pairs[0]);
    assert_eq!(hits[0].position, 3, "the pip caching section is the closest non-copy");
    assert!(hits.iter().all(|h| ![0, 1, 2].contains(&h.position)));
    let m = pr.messages(&pairs[0]);
    let user = &m.last().unwrap().content;
    assert!(user.starts_with("Relevant GitHub Actions documentation:\n\n## Cache pip\n"), "{user}");
    assert!(user.ends_with(&zero_shot("GitHub Actions", &pairs[0])[1].content));
}

#[test]
fn repair_prompt_carries_task_output_and_errors_with_paths() {
    let p = pair("gha", "T", "D", "x: 1", 0);
    let orig = zero_shot("GitHub Actions", &p);
    let errs = vec![
        "/jobs/build: \"runs-on\" is a required property".to_string(),
        "/on: 3 is not of type \"string\"".to_string(),
    ];
    let m = repair_messages(&orig, "GitHub Actions", "on: 3\njobs:\n  build: {}\n", &errs);
    assert_eq!(&m[..2], &orig[..]);
    assert_eq!(m[2].role, "assistant");
    assert_eq!(m[2].content, "on: 3\njobs:\n  build: {}\n");
    assert_eq!(m[3].role, "user");
    assert!(
        m[3].content
            .contains("- /jobs/build: \"runs-on\" is a required property\n- /on: 3 is not of type \"string\"\n"),
        "{}",
        m[3].content
    );
}

#[test]
fn folds_are_stratified_and_collapse_shared_descriptions() {
    let mut pairs = Vec::new();
    for s in ["a", "b"] {
        for i in 0..23u64 {
            pairs.push(pair(s, &format!("T{i}"), "same prose", &format!("k: {i}"), i * 2));
        }
        // a second reference for an existing description: same group as T0
        pairs.push(pair(s, "T0", "same  prose", "k: other", 100));
    }
    let groups = finetune::assign_folds(&pairs, 5);
    assert_eq!(groups.len(), 46, "one group per distinct description");
    let mut seen = HashSet::new();
    for g in &groups {
        for p in &g.pairs {
            assert!(seen.insert(p.pair_id.clone()), "pair in two groups");
        }
    }
    assert_eq!(seen.len(), pairs.len());
    for s in ["a", "b"] {
        let mut sizes = [0usize; 5];
        for g in groups.iter().filter(|g| g.service == s) {
            sizes[g.fold] += 1;
        }
        assert!(sizes.iter().max().unwrap() - sizes.iter().min().unwrap() <= 1, "{s}: {sizes:?}");
    }
    let g0 = groups.iter().find(|g| g.pairs.len() == 2 && g.service == "a").unwrap();
    assert_eq!(g0.pairs[0].reference, "k: 0", "first in source order is the target");
    assert_eq!(finetune::test_lines(g0, "A").len(), 2);
    let t = finetune::train_line(g0, "A");
    assert_eq!(t.messages.last().unwrap().content, "k: 0");
    let again = finetune::assign_folds(&pairs, 5);
    assert!(groups.iter().zip(&again).all(|(x, y)| x.fold == y.fold && x.pairs[0].pair_id == y.pairs[0].pair_id));
}

#[test]
fn lint_feedback_quotes_the_findings_after_the_schema_errors() {
    let orig = vec![doc2ci_generate::Msg::new("user", "Write a workflow")];
    let plain = repair_messages(&orig, "GitHub Actions", "on: push\n", &["/jobs: required".into()]);
    let same = doc2ci_generate::repair_messages_with_lint(
        &orig,
        "GitHub Actions",
        "on: push\n",
        &["/jobs: required".into()],
        &[],
    );
    assert_eq!(plain, same, "without findings, the schema-only prompt");
    let lint = ["actionlint line 3, column 5: job \"a\" needs job \"x\" [job-needs]".to_string()];
    let m = doc2ci_generate::repair_messages_with_lint(&orig, "GitHub Actions", "on: push\n", &[], &lint);
    let last = &m.last().unwrap().content;
    assert!(last.contains("linter reported") && last.contains("[job-needs]"), "{last}");
    assert!(!last.contains("schema validator"), "no schema errors, none quoted: {last}");
}
