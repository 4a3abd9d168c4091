//! The hand-coded sample of `sem_contains` verdicts (`data/sem_contains_coding.csv`): 30 answers of
//! the six llm4ci models that doc2ci judged to contain their reference, five per model drawn at
//! random, each read by hand and coded "does the answer hold the reference's configuration?". The
//! sheet records doc2ci's verdict when it was coded; here every verdict must now equal the hand code.

mod common;

use std::collections::HashMap;

use doc2ci_score::{score_prepared, CrystalContext, Prepared};

#[test]
fn sem_contains_agrees_with_the_hand_coded_sample() {
    let path =
        std::path::Path::new(&std::env::var("CARGO_MANIFEST_DIR").unwrap()).join("tests/data/sem_contains_coding.csv");
    let mut rdr = csv::Reader::from_path(&path).unwrap();
    let rows: Vec<csv::StringRecord> = rdr.records().map(Result::unwrap).collect();
    assert_eq!(rows.len(), 30);
    let refs: HashMap<u64, String> = common::column("GitHubActions_Docs.csv.gz", "Code").into_iter().collect();
    let mut outputs: HashMap<&str, HashMap<u64, String>> = HashMap::new();
    let (mut agreed_then, mut agree_now) = (0, 0);
    for r in &rows {
        let (model, id, hand) = (&r[0], r[1].parse::<u64>().unwrap(), &r[5]);
        let model: &str = common::MODELS.iter().find(|m| **m == model).unwrap();
        let outs = outputs.entry(model).or_insert_with(|| {
            common::column(&format!("GitHubActions_{model}_output.csv.gz"), "LLM_YML_Output").into_iter().collect()
        });
        let (reference, output) = (&refs[&id], &outs[&id]);
        let ctx = CrystalContext::from_references([reference.as_str()]);
        let s = score_prepared(
            &Prepared::for_service(reference, &ctx, "github-actions"),
            &Prepared::for_service(output, &ctx, "github-actions"),
        );
        let now = if s.value("sem_contains") == 1.0 { "yes" } else { "no" };
        agreed_then += (&r[4] == hand) as usize;
        agree_now += (now == hand) as usize;
        assert_eq!(now, hand, "{model} ID {id}: doc2ci says {now}, the hand code {hand} ({})", &r[6]);
    }
    eprintln!("sem_contains vs hand coding: {agreed_then}/30 when coded, {agree_now}/30 now");
}
