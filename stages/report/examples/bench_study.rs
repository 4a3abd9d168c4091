//! Synthetic Doc2CI-scale study for bench/stats.sh: 3,363 pairs over four services × 16 models =
//! 53,808 zero-shot configurations with scores and validity (deterministic pseudo-random values with
//! per-model and per-service offsets), plus one repair round for a quarter of the invalid outputs.
//! Times `study::run` (the stats stage) and `report::build`, prints JSON.

use std::collections::BTreeMap;
use std::time::Instant;

use std::borrow::Cow;

use doc2ci_rows::{Generation, MetricKind, MetricValue, ModelRow, Pair, Score, Validation};
use doc2ci_stats::study::{self, Unit};
use doc2ci_stats::Rng;

fn main() {
    let services = [
        ("github-actions", 725usize, 0.03),
        ("circleci", 786, -0.06),
        ("gitlab-ci", 841, -0.02),
        ("travis-ci", 1011, 0.03),
    ];
    let sizes = [
        (Some(1000.0), false, true),
        (Some(1000.0), false, true),
        (Some(7.0), false, false),
        (Some(8.0), false, false),
        (Some(7.0), true, false),
        (Some(7.0), true, false),
        (Some(7.0), true, false),
        (Some(14.0), true, false),
        (Some(14.0), false, false),
        (Some(9.0), false, false),
        (Some(12.0), false, false),
        (Some(13.0), true, false),
        (Some(32.0), true, false),
        (Some(32.0), false, false),
        (Some(27.0), false, false),
        (Some(34.0), true, false),
    ];
    let models: Vec<ModelRow> = sizes
        .iter()
        .enumerate()
        .map(|(i, (s, code, prop))| ModelRow {
            model: format!("m{:02}", i + 1),
            backend: "import".into(),
            family: None,
            size_b: if *prop { None } else { *s },
            code: Some(*code),
            proprietary: Some(*prop),
            base_model: None,
            knowledge_cutoff: None,
        })
        .collect();
    let metrics = doc2ci_score::metric_infos();
    let similarity = study::similarity_metrics(metrics);
    let rates: Vec<&str> =
        metrics.iter().filter(|m| m.in_study && m.kind == MetricKind::Bool).map(|m| m.name).collect();
    let mut rng = Rng::new(1);
    let mut u01 = move || (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
    let mut units = Vec::new();
    for (svc, n, off) in services {
        for p in 0..n {
            let difficulty = u01() * 0.3;
            for (mi, m) in models.iter().enumerate() {
                let q = 0.5 + off + mi as f64 * 0.004 - difficulty;
                let mut values = BTreeMap::new();
                for (k, metric) in similarity.iter().enumerate() {
                    let v: f64 = (q + (u01() - 0.5) * 0.4 - k as f64 * 0.03).clamp(0.0, 1.0);
                    values.insert(*metric, (v * 1000.0).round() / 1000.0);
                }
                let parse = u01() < 0.97;
                let schema = parse && u01() < 0.55 + q * 0.3;
                for metric in &rates {
                    values.insert(*metric, (u01() < 0.02) as u8 as f64);
                }
                values.insert("parse_ok", parse as u8 as f64);
                values.insert("schema_ok", schema as u8 as f64);
                values.insert("fragment", (u01() < 0.1) as u8 as f64);
                let pair_id = format!("{svc}-{p:05}");
                if !schema && u01() < 0.25 {
                    let mut rep = values.clone();
                    rep.insert("schema_ok", (u01() < 0.6) as u8 as f64);
                    units.push(Unit {
                        service: svc.into(),
                        pair_id: pair_id.clone(),
                        model: m.model.clone(),
                        sample: 0,
                        round: 1,
                        values: rep,
                    });
                }
                units.push(Unit { service: svc.into(), pair_id, model: m.model.clone(), sample: 0, round: 0, values });
            }
        }
    }
    let zero_shot = units.iter().filter(|u| u.round == 0).count();
    let t = Instant::now();
    let params = study::Params { metrics: metrics.to_vec(), ..Default::default() };
    let rows = study::run(&units, &models, &[], &params);
    let stats_s = t.elapsed().as_secs_f64();
    let svc_names: BTreeMap<String, String> = services.iter().map(|(s, ..)| (s.to_string(), s.to_string())).collect();
    let rows_of = browser_rows(&units);
    let samples = doc2ci_report::Samples {
        pairs: &rows_of.0,
        generations: &rows_of.1,
        validations: &rows_of.2,
        scores: &rows_of.3,
        lints: &[],
        contamination: &[],
        missed: Some(&doc2ci_score::missed_leaves),
    };
    let t = Instant::now();
    let files = doc2ci_report::build(&doc2ci_report::Input {
        title: "synthetic",
        models: &models,
        units: &units,
        stats: &rows,
        services: &svc_names,
        metrics,
        lints: &[],
        degenerate: &BTreeMap::new(),
        errors: &BTreeMap::new(),
        samples: &samples,
    });
    let report_s = t.elapsed().as_secs_f64();
    // BROWSER_OUT=DIR: the report written there, for bench/browser.sh to open in Chromium.
    if let Some(dir) = std::env::var_os("BROWSER_OUT") {
        for (path, text) in &files {
            let p = std::path::Path::new(&dir).join(path);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
        }
    }
    let bytes: usize = files.iter().map(|f| f.1.len()).sum();
    println!(
        "{{\"configurations\": {zero_shot}, \"units\": {}, \"stats_rows\": {}, \"stats_s\": {stats_s:.3}, \"report_files\": {}, \"report_bytes\": {bytes}, \"report_s\": {report_s:.3}}}",
        units.len(),
        rows.len(),
        files.len()
    );
}

/// Rows for the sample browser behind the units: texts of realistic length (a 400-character
/// description, 30-line reference and output), validity and scores as the units say.
fn browser_rows(units: &[Unit]) -> (Vec<Pair>, Vec<Generation>, Vec<Validation>, Vec<Score>) {
    let yaml = |seed: usize, n: usize| -> String {
        let mut s = String::from("on: [push, pull_request]\njobs:\n  build:\n    runs-on: ubuntu-latest\n    steps:\n");
        for i in 0..n {
            s.push_str(&format!("      - name: step {i} of {seed}\n        run: make target-{}\n", (seed + i) % 97));
        }
        s
    };
    let mut pairs: BTreeMap<(String, String), Pair> = BTreeMap::new();
    let (mut gens, mut vals, mut scores) = (vec![], vec![], vec![]);
    for (i, u) in units.iter().enumerate() {
        let n = pairs.len();
        pairs.entry((u.service.clone(), u.pair_id.clone())).or_insert_with(|| Pair {
            pair_id: u.pair_id.clone(),
            service: u.service.clone(),
            url: format!("http://docs.example.com/{}/{}", u.service, u.pair_id),
            title: format!("Building and testing project {n}"),
            description: "You can configure the workflow to build and test the project on every push. ".repeat(5),
            reference: yaml(n, 12),
            n_copies: 1,
            urls: vec![],
            source: "docs".into(),
            source_id: n.to_string(),
            source_ids: vec![],
            position: n as u64,
            leak: None,
            published: None,
            published_source: None,
            not_before: None,
        });
        let flag = |k: &str| u.values.get(k).is_some_and(|v| *v > 0.5);
        gens.push(Generation {
            pair_id: u.pair_id.clone(),
            service: u.service.clone(),
            model: u.model.clone(),
            sample: u.sample,
            round: u.round,
            output: Some(yaml(i, 10 + i % 5)),
            finish_reason: Some("stop".into()),
            ..Generation::default()
        });
        let schema_ok = flag("schema_ok");
        vals.push(Validation {
            pair_id: u.pair_id.clone(),
            service: u.service.clone(),
            model: u.model.clone(),
            sample: u.sample,
            round: u.round,
            parse_ok: flag("parse_ok"),
            schema_ok,
            errors: if schema_ok { vec![] } else { vec!["/jobs/build: 'steps' is a required property".into()] },
            fragment: flag("fragment"),
        });
        scores.push(Score {
            pair_id: u.pair_id.clone(),
            service: u.service.clone(),
            model: u.model.clone(),
            sample: u.sample,
            round: u.round,
            metrics: doc2ci_score::metric_infos()
                .iter()
                .filter_map(|m| {
                    let v = *u.values.get(m.name)?;
                    let v = match m.kind {
                        MetricKind::Float => MetricValue::Float(v),
                        MetricKind::Bool => MetricValue::Bool(v > 0.5),
                    };
                    Some((Cow::Borrowed(m.name), v))
                })
                .collect(),
            truncated: false,
        });
    }
    (pairs.into_values().collect(), gens, vals, scores)
}
