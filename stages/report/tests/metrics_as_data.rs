//! Stats and report take the metrics as data: a metric added to the list (here a made-up bool
//! `shiny_rate` and a float `shiny`) gets its means, tests and box plot with no change to either
//! crate, and a metric the study does not cover (`in_study: false`) stays out of both.

use std::borrow::Cow;
use std::collections::BTreeMap;

use doc2ci_rows::{MetricInfo, MetricKind, MetricValue, ModelRow, Score, Validation};
use doc2ci_stats::study;

fn study_with(metrics: &[MetricInfo]) -> (Vec<study::StatRow>, Vec<(String, String)>) {
    let models: Vec<ModelRow> = ["a", "b", "c"]
        .iter()
        .enumerate()
        .map(|(i, m)| ModelRow {
            model: m.to_string(),
            backend: "import".into(),
            family: None,
            size_b: Some(7.0 + 10.0 * i as f64),
            code: Some(i % 2 == 0),
            proprietary: None,
            base_model: None,
            knowledge_cutoff: None,
        })
        .collect();
    let (mut scores, mut vals) = (Vec::new(), Vec::new());
    for p in 0..12u32 {
        for (mi, m) in models.iter().enumerate() {
            let x = ((p * 7 + mi as u32 * 3) % 10) as f64 / 10.0;
            let metrics = metrics
                .iter()
                .enumerate()
                .map(|(k, info)| {
                    let v = match info.kind {
                        MetricKind::Float => MetricValue::Float((x + k as f64 * 0.01).min(1.0)),
                        MetricKind::Bool => MetricValue::Bool(x > 0.6),
                    };
                    (Cow::Borrowed(info.name), v)
                })
                .collect();
            let id = (format!("p{p}"), "github-actions".to_string(), m.model.clone());
            scores.push(Score {
                pair_id: id.0.clone(),
                service: id.1.clone(),
                model: id.2.clone(),
                sample: 0,
                round: 0,
                metrics,
                truncated: false,
            });
            vals.push(Validation {
                pair_id: id.0,
                service: id.1,
                model: id.2,
                sample: 0,
                round: 0,
                parse_ok: true,
                schema_ok: x > 0.3,
                errors: vec![],
                fragment: false,
            });
        }
    }
    let units = study::units(&scores, &vals, &[], metrics);
    let params = study::Params { resamples: 50, metrics: metrics.to_vec(), ..Default::default() };
    let stats = study::run(&units, &models, &[], &params);
    let services: BTreeMap<String, String> = [("github-actions".to_string(), "GitHub Actions".to_string())].into();
    let files = doc2ci_report::build(&doc2ci_report::Input {
        title: "t",
        models: &models,
        units: &units,
        stats: &stats,
        services: &services,
        metrics,
        lints: &[],
        degenerate: &BTreeMap::new(),
        errors: &BTreeMap::new(),
        samples: &Default::default(),
    });
    (stats, files)
}

fn boxes(files: &[(String, String)]) -> Vec<&str> {
    files.iter().filter_map(|(p, _)| p.strip_prefix("figures/box_")?.strip_suffix(".svg")).collect()
}

fn tested(stats: &[study::StatRow], test: &str, metric: &str) -> bool {
    stats.iter().any(|r| r.test == test && r.metric == metric)
}

#[test]
fn the_registry_drives_the_tests_and_the_box_plots() {
    let registry = doc2ci_score::metric_infos();
    let (stats, files) = study_with(registry);
    assert_eq!(boxes(&files), study::similarity_metrics(registry));
    let eight = ["cosine", "euclidean", "bleu", "crystal_bleu", "rouge_l", "chrf", "tree_edit", "levenshtein"];
    assert!(study::similarity_metrics(registry).starts_with(&eight), "the study's eight similarity metrics");
    assert!(tested(&stats, "mean", "exact") && !tested(&stats, "wilcoxon", "exact"), "exact is a rate");
    for m in ["kv_exact", "kv_wildcard"] {
        assert!(stats.iter().all(|r| r.metric != m), "{m} is recorded in scores, not tested");
    }
}

#[test]
fn a_new_metric_needs_no_change_in_stats_or_report() {
    let mut metrics = doc2ci_score::metric_infos().to_vec();
    metrics.push(MetricInfo { name: "shiny_rate", higher_is_better: true, kind: MetricKind::Bool, in_study: true });
    metrics.push(MetricInfo { name: "shiny", higher_is_better: true, kind: MetricKind::Float, in_study: true });
    let (stats, files) = study_with(&metrics);
    assert!(tested(&stats, "mean", "shiny_rate") && !tested(&stats, "friedman", "shiny_rate"));
    assert!(
        tested(&stats, "mean", "shiny") && tested(&stats, "friedman", "shiny") && tested(&stats, "wilcoxon", "shiny")
    );
    assert!(boxes(&files).contains(&"shiny") && !boxes(&files).contains(&"shiny_rate"));
    assert!(study::tested_metrics(&metrics).contains(&"shiny_rate"), "ci_metrics may name it");
}
