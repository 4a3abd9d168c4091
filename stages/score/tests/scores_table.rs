//! The `scores` table keeps its layout now that metrics are registry data rather than fields of
//! `doc2ci_rows::Score`: the Arrow schema traced from `Score::template(metric_infos())` (what the
//! warehouse's `write_like` writes with) equals the one serde_arrow traced from the struct that had
//! a field per metric (`doc2ci_testkit::OldScore`), the rows become the same arrays, and files of
//! either kind read back into the same rows. Equal schema and equal arrays make the Parquet bytes
//! equal: the writer is a function of them (the warehouse's own test compares the bytes too).

use std::sync::Arc;

use doc2ci_rows::{MetricValue, Score};
use doc2ci_score::{metric_infos, score_all, ScoreError};
use doc2ci_testkit::{pair, OldScore, OLD_METRICS};
use serde::{Deserialize, Serialize};
use serde_arrow::marrow::{array::Array, datatypes::Field, view::View};
use serde_arrow::schema::{SchemaLike, TracingOptions};

/// The warehouse's options (`src/warehouse/parquet.rs`, `tracing_options`).
fn tracing_options() -> TracingOptions {
    TracingOptions::default().allow_null_fields(true).strings_as_large_utf8(false)
}

fn old_fields() -> Vec<Field> {
    Vec::<Field>::from_type::<OldScore>(tracing_options()).unwrap()
}

fn new_fields() -> Vec<Field> {
    Vec::<Field>::from_samples(&[Score::template(metric_infos())], tracing_options()).unwrap()
}

/// Real rows: `score_all` over a few pairs, with a stand-in embedder.
fn rows() -> Vec<Score> {
    let generation = |pair_id: &str, sample: u32, round: u32, output: Option<&str>| {
        doc2ci_testkit::generation(pair_id, "m-1", (sample, round), output)
    };
    let pairs = [
        pair("p1", "on: push\njobs:\n  t:\n    runs-on: ubuntu-latest  # any *\n    steps: [{run: make}]\n"),
        pair("p2", "version: 2.1\njobs: {}\n"),
    ];
    let huge = "k: v\n".repeat(20_000);
    let gens = [
        generation("p1", 0, 0, Some("on: [push]\njobs:\n  t:\n    runs-on: macos\n    steps: [{run: make}]\n")),
        generation("p2", 0, 0, Some("version: 2.1\njobs: {}\n")),
        generation("p2", 1, 0, None),
        generation("p1", 0, 1, Some(&huge)),
    ];
    let embed = |texts: &[&str]| {
        let v = texts.iter().map(|t| Arc::new(vec![t.len() as f32, (t.len() % 7) as f32, 1.0])).collect();
        Ok::<_, ScoreError>((v, texts.len()))
    };
    let (rows, _) = score_all(&pairs, &gens, embed).unwrap();
    assert!(rows.iter().any(|r| r.truncated) && rows.iter().any(|r| r.get("exact") == Some(MetricValue::Bool(true))));
    rows
}

fn views(arrays: &[Array]) -> Vec<View<'_>> {
    arrays.iter().map(|a| a.as_view()).collect()
}

#[test]
fn the_schema_is_the_one_traced_from_the_struct_with_a_field_per_metric() {
    let (old, new) = (old_fields(), new_fields());
    // A metric registered later (after kv_wildcard) adds its column before `truncated`; every
    // column of the old struct keeps its name, type, nullability and place.
    let added: Vec<&str> = metric_infos().iter().map(|m| m.name).filter(|m| !OLD_METRICS.contains(m)).collect();
    let registered: Vec<&str> = metric_infos().iter().map(|m| m.name).collect();
    assert_eq!(registered[..OLD_METRICS.len()], OLD_METRICS, "the old metrics come first, in their order");
    let kept: Vec<Field> = new.iter().filter(|f| !added.contains(&f.name.as_str())).cloned().collect();
    assert_eq!(kept, old);
    assert_eq!(new.len(), old.len() + added.len());
    assert_eq!(new.last().map(|f| f.name.as_str()), Some("truncated"));
    let names: Vec<&str> = old.iter().map(|f| f.name.as_str()).collect();
    let key = ["pair_id", "service", "model", "sample", "round"];
    assert_eq!(names, [&key[..], &OLD_METRICS, &["truncated"]].concat());
}

#[test]
fn rows_become_the_old_arrays_and_either_file_reads_back_into_the_same_rows() {
    let fields = new_fields();
    let new_rows = rows();
    let old_rows: Vec<OldScore> = new_rows.iter().map(OldScore::of).collect();
    let arrays = serde_arrow::to_marrow(&fields, &new_rows).unwrap();
    let old_columns: Vec<Array> = fields
        .iter()
        .zip(&arrays)
        .filter(|(f, _)| old_fields().iter().any(|o| o.name == f.name))
        .map(|(_, a)| a.clone())
        .collect();
    let old_arrays = serde_arrow::to_marrow(&old_fields(), &old_rows).unwrap();
    assert_eq!(old_columns, old_arrays, "same columns, same values");
    let from_old: Vec<Score> = serde_arrow::from_marrow(&old_fields(), &views(&old_arrays)).unwrap();
    let only_old = |r: &Score| Score {
        metrics: r.metrics.iter().filter(|(n, _)| OLD_METRICS.contains(&n.as_ref())).cloned().collect(),
        ..r.clone()
    };
    assert_eq!(from_old, new_rows.iter().map(only_old).collect::<Vec<_>>(), "old files read into rows");

    let back: Vec<Score> = serde_arrow::from_marrow(&fields, &views(&arrays)).unwrap();
    assert_eq!(back, new_rows);
    assert!(back.iter().all(|r| r.metrics.iter().all(|(n, _)| matches!(n, std::borrow::Cow::Owned(_)))));
    assert_eq!(serde_arrow::to_marrow(&fields, &back).unwrap(), arrays, "rows read back write the same arrays");
    let back_old: Vec<OldScore> = serde_arrow::from_marrow(&fields, &views(&arrays)).unwrap();
    assert_eq!(back_old, old_rows, "the old struct reads the new files");

    // As the warehouse stores and reads a partition: `service` and `model` dropped from the file,
    // then appended from the folder names.
    #[derive(Clone, Serialize, Deserialize)]
    struct Partition {
        service: String,
        model: String,
    }
    let keep: Vec<usize> =
        (0..fields.len()).filter(|&i| fields[i].name != "service" && fields[i].name != "model").collect();
    let mut stored_fields: Vec<Field> = keep.iter().map(|&i| fields[i].clone()).collect();
    let mut stored: Vec<Array> = keep.iter().map(|&i| arrays[i].clone()).collect();
    let part = vec![Partition { service: "github-actions".into(), model: "m-1".into() }; new_rows.len()];
    let part_fields = Vec::<Field>::from_type::<Partition>(tracing_options()).unwrap();
    stored.extend(serde_arrow::to_marrow(&part_fields, &part).unwrap());
    stored_fields.extend(part_fields);
    let read: Vec<Score> = serde_arrow::from_marrow(&stored_fields, &views(&stored)).unwrap();
    assert_eq!(read, new_rows);
}

#[test]
fn files_from_before_the_truncated_column_read_as_not_truncated() {
    let fields = new_fields();
    let new_rows: Vec<Score> = rows().into_iter().map(|r| Score { truncated: false, ..r }).collect();
    let arrays = serde_arrow::to_marrow(&fields, &new_rows).unwrap();
    let n = fields.len() - 1;
    assert_eq!(fields[n].name, "truncated");
    let read: Vec<Score> = serde_arrow::from_marrow(&fields[..n], &views(&arrays[..n])).unwrap();
    assert_eq!(read, new_rows);
}
