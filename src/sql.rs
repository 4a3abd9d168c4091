//! SQL over the warehouse with DataFusion: the same Arrow implementation the engine writes
//! with, so `doc2ci sql` needs no second in-memory format and sees exactly what DuckDB sees.

use std::io::Write;
use std::sync::Arc;

use anyhow::{bail, Context, Result};
use datafusion::arrow::array::{Array, ArrayRef, RecordBatch};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::DataType;
use datafusion::arrow::util::display::{ArrayFormatter, FormatOptions};
use datafusion::datasource::file_format::parquet::ParquetFormat;
use datafusion::datasource::listing::ListingOptions;
use datafusion::prelude::SessionContext;
use serde_json::Value;

use crate::jobs::tables::{COMMAND_TABLES, TABLES};
use crate::warehouse::Warehouse;

/// Table I's columns up to schema validity, which both definitions of `model_summary` share
/// (the one with lint steps adds its columns after these).
macro_rules! table_one_validity {
    () => {
        "SELECT s.service, s.model, COUNT(*) AS n, AVG(s.cosine) AS mean_cosine, \
         100.0 * AVG(CASE WHEN s.exact THEN 1.0 ELSE 0.0 END) AS exact_pct, \
         100.0 * AVG(CASE WHEN s.sem_exact THEN 1.0 ELSE 0.0 END) AS sem_exact_pct, \
         100.0 * AVG(CASE WHEN s.sem_contains THEN 1.0 ELSE 0.0 END) AS sem_contains_pct, \
         AVG(s.sem_recall) AS mean_sem_recall, \
         100.0 * AVG(CASE WHEN v.parse_ok THEN 1.0 ELSE 0.0 END) AS parse_pct, \
         100.0 * AVG(CASE WHEN v.schema_ok THEN 1.0 ELSE 0.0 END) AS schema_pct, "
    };
}

/// Table I's similarity columns and the scores–validations join, shared likewise.
macro_rules! table_one_similarity {
    () => {
        "AVG(s.bleu) AS mean_bleu, AVG(s.rouge_l) AS mean_rouge_l, AVG(s.chrf) AS mean_chrf, \
         AVG(s.tree_edit) AS mean_tree_edit, AVG(s.levenshtein) AS mean_levenshtein \
         FROM scores s JOIN validations v ON s.pair_id = v.pair_id AND s.service = v.service AND s.model = v.model \
         AND s.sample = v.sample AND s.round = v.round "
    };
}

/// Table I per model as the CTE `t`, then every (service, model) that was asked at round 0 with
/// its errored requests beside n: a model whose every request failed still has its row (n = 0).
macro_rules! table_one_with_errors {
    () => {
        "SELECT g.service, g.model, COALESCE(t.n, 0) AS n, g.errors, t.* EXCLUDE (service, model, n) \
         FROM (SELECT service, model, SUM(CASE WHEN error IS NULL THEN 0 ELSE 1 END) AS errors FROM generations \
         WHERE round = 0 GROUP BY service, model) g LEFT JOIN t ON g.service = t.service AND g.model = t.model \
         ORDER BY g.service, t.mean_cosine DESC NULLS LAST, g.model"
    };
}

/// Views every study wants; defined in SQL so users can read and copy them.
pub const VIEWS: &[(&str, &str)] = &[
    (
        "pair_counts",
        "SELECT service, COUNT(*) AS pairs, SUM(n_copies) AS raw_pairs, COUNT(DISTINCT regexp_replace(trim(title), '\\s+', ' ', 'g') || ': ' || regexp_replace(trim(description), '\\s+', ' ', 'g')) AS distinct_descriptions, \
         SUM(CASE WHEN leak IS NULL THEN 0 ELSE 1 END) AS leaks FROM pairs GROUP BY service",
    ),
    // Doc2CI's dataset construction per crawled service: pages, YAML blocks, what was skipped and
    // why, duplicates removed (the study: 974 of 4,337 = 22.5%), unique pairs, leaking descriptions.
    (
        "crawl_summary",
        "WITH pg AS (SELECT service, COUNT(*) AS pages, SUM(CASE WHEN error IS NULL THEN 0 ELSE 1 END) AS pages_failed, \
         SUM(CASE WHEN not_modified THEN 1 ELSE 0 END) AS pages_not_modified, SUM(transferred) AS bytes_transferred FROM pages GROUP BY service), \
         cb AS (SELECT service, SUM(CASE WHEN kind = 'not yaml' THEN 0 ELSE 1 END) AS yaml_blocks, \
         SUM(CASE WHEN kind = 'not yaml' THEN 1 ELSE 0 END) AS skipped_not_yaml, SUM(CASE WHEN kind = 'yaml scalar' THEN 1 ELSE 0 END) AS skipped_yaml_scalar, \
         SUM(CASE WHEN kind = 'yaml parse error' THEN 1 ELSE 0 END) AS skipped_yaml_parse_error, \
         SUM(CASE WHEN kind IN ('removed by profile rule', 'hidden', 'outside the content root') THEN 1 ELSE 0 END) AS skipped_removed \
         FROM code_blocks GROUP BY service), \
         raw AS (SELECT service, COUNT(*) AS raw_pairs FROM pairs_raw GROUP BY service), \
         kept AS (SELECT service, COUNT(*) AS unique_pairs, COUNT(DISTINCT regexp_replace(trim(description), '\\s+', ' ', 'g')) AS unique_descriptions, \
         SUM(CASE WHEN leak IS NULL THEN 0 ELSE 1 END) AS leaks FROM pairs GROUP BY service) \
         SELECT pg.service, pages, pages_failed, pages_not_modified, bytes_transferred, yaml_blocks, skipped_not_yaml, skipped_yaml_scalar, \
         skipped_yaml_parse_error, skipped_removed, raw_pairs, raw_pairs - unique_pairs AS duplicates_removed, \
         100.0 * (raw_pairs - unique_pairs) / raw_pairs AS duplicate_pct, unique_pairs, unique_descriptions, leaks \
         FROM pg JOIN cb ON pg.service = cb.service JOIN raw ON pg.service = raw.service JOIN kept ON pg.service = kept.service ORDER BY pg.service",
    ),
    // Every YAML block that did not become a pair, by reason and (removed ones) by the profile rule
    // that removed it: a rule that swallows examples shows here.
    (
        "crawl_skipped",
        "SELECT service, source, kind AS reason, CASE WHEN kind = 'removed by profile rule' THEN detail END AS rule, \
         COUNT(*) AS blocks FROM code_blocks WHERE kind <> 'pair' AND kind <> 'not yaml' \
         GROUP BY service, source, kind, rule ORDER BY service, source, blocks DESC",
    ),
    // The study's Table I: zero-shot quality and validity per model, with the validity ladder's lint
    // steps beside parse and schema (over the outputs a tool judged). n counts answers; `errors`
    // the requests that failed (in no n and no rate; the next run asks them again). Without a
    // lints table, the next definition (the same without them) stands.
    (
        "model_summary",
        concat!(
            "WITH l AS (SELECT service, model, pair_id, sample, \
             MIN(CASE WHEN kind = 'validator' THEN CASE WHEN ok THEN 1 WHEN NOT ok THEN 0 END END) AS lint_ok, \
             MIN(CASE WHEN kind = 'validator' THEN CASE WHEN as_is_ok THEN 1 WHEN NOT as_is_ok THEN 0 END END) AS lint_as_is_ok, \
             MIN(CASE WHEN kind = 'audit' THEN CASE WHEN ok THEN 1 WHEN NOT ok THEN 0 END END) AS audit_ok \
             FROM lints WHERE round = 0 GROUP BY service, model, pair_id, sample), t AS (",
            table_one_validity!(),
            "100.0 * AVG(l.lint_as_is_ok) AS lint_as_is_pct, 100.0 * AVG(l.lint_ok) AS lint_pct, \
             100.0 * AVG(l.audit_ok) AS audit_pct, ",
            table_one_similarity!(),
            "LEFT JOIN l ON s.pair_id = l.pair_id AND s.service = l.service AND s.model = l.model AND s.sample = l.sample \
             WHERE s.round = 0 GROUP BY s.service, s.model) ",
            table_one_with_errors!()
        ),
    ),
    (
        "model_summary",
        concat!(
            "WITH t AS (",
            table_one_validity!(),
            table_one_similarity!(),
            "WHERE s.round = 0 GROUP BY s.service, s.model) ",
            table_one_with_errors!()
        ),
    ),
    // The contamination screen per model and service: how often a reference's continuation is
    // high-risk (DevOps-Gym's thresholds), beside how often its never-published twin's is (the
    // screen's false-positive rate), and the mean Min-K% Prob of each where the backend scored
    // them. The sign test and the AUC with their CIs are in `stats`.
    (
        "contamination_summary",
        "SELECT service, model, prefix_tokens, suffix_tokens, \
         SUM(CASE WHEN variant = 'real' AND status IN ('high_risk', 'clean') THEN 1 ELSE 0 END) AS references_screened, \
         SUM(CASE WHEN variant = 'real' AND status = 'high_risk' THEN 1 ELSE 0 END) AS references_high_risk, \
         100.0 * SUM(CASE WHEN variant = 'real' AND status = 'high_risk' THEN 1 ELSE 0 END) \
           / NULLIF(SUM(CASE WHEN variant = 'real' AND status IN ('high_risk', 'clean') THEN 1 ELSE 0 END), 0) AS high_risk_pct, \
         SUM(CASE WHEN variant = 'twin' AND status IN ('high_risk', 'clean') THEN 1 ELSE 0 END) AS twins_screened, \
         SUM(CASE WHEN variant = 'twin' AND status = 'high_risk' THEN 1 ELSE 0 END) AS twins_high_risk, \
         100.0 * SUM(CASE WHEN variant = 'twin' AND status = 'high_risk' THEN 1 ELSE 0 END) \
           / NULLIF(SUM(CASE WHEN variant = 'twin' AND status IN ('high_risk', 'clean') THEN 1 ELSE 0 END), 0) AS twin_high_risk_pct, \
         SUM(CASE WHEN variant = 'real' AND status = 'too_short' THEN 1 ELSE 0 END) AS too_short, \
         SUM(CASE WHEN variant = 'twin' AND status = 'no_twin' THEN 1 ELSE 0 END) AS no_twin, \
         SUM(CASE WHEN status = 'error' THEN 1 ELSE 0 END) AS errors, \
         AVG(CASE WHEN variant = 'real' THEN min_k END) AS mean_min_k_real, \
         AVG(CASE WHEN variant = 'twin' THEN min_k END) AS mean_min_k_twin \
         FROM contamination GROUP BY service, model, prefix_tokens, suffix_tokens ORDER BY service, model",
    ),
    // How often each notion of "the same configuration" holds, per service and model: stripped
    // lines (exact), trees (tree_exact), the service's canonical form (sem_exact), and the
    // reference held inside the answer (sem_contains).
    (
        "equivalence_summary",
        "SELECT service, model, COUNT(*) AS n, \
         100.0 * AVG(CASE WHEN exact THEN 1.0 ELSE 0.0 END) AS exact_pct, \
         100.0 * AVG(CASE WHEN tree_exact THEN 1.0 ELSE 0.0 END) AS tree_exact_pct, \
         100.0 * AVG(CASE WHEN sem_exact THEN 1.0 ELSE 0.0 END) AS sem_exact_pct, \
         100.0 * AVG(CASE WHEN sem_contains THEN 1.0 ELSE 0.0 END) AS sem_contains_pct, \
         AVG(sem_recall) AS mean_sem_recall \
         FROM scores WHERE round = 0 GROUP BY service, model ORDER BY service, sem_contains_pct DESC",
    ),
    // Each lint tool per service and model: how many outputs it judged, its pass rates as written and
    // fragment-aware, and how many fragments were completed (and came out clean).
    (
        "lint_summary",
        "SELECT service, model, tool, kind, tool_version, COUNT(*) AS n, COUNT(ok) AS judged, \
         100.0 * AVG(CASE WHEN as_is_ok THEN 1.0 WHEN NOT as_is_ok THEN 0.0 END) AS as_is_pct, \
         100.0 * AVG(CASE WHEN ok THEN 1.0 WHEN NOT ok THEN 0.0 END) AS ok_pct, \
         SUM(CASE WHEN completed IS NULL THEN 0 ELSE 1 END) AS completed, \
         SUM(CASE WHEN completed IS NOT NULL AND completed_ok THEN 1 ELSE 0 END) AS completed_clean \
         FROM lints WHERE round = 0 GROUP BY service, model, tool, kind, tool_version ORDER BY service, model, tool",
    ),
    // How many references are fragments or not even YAML mappings (the study's caveat on references).
    (
        "reference_summary",
        "SELECT service, COUNT(*) AS pairs, SUM(CASE WHEN parse_ok THEN 1 ELSE 0 END) AS parse_ok, \
         SUM(CASE WHEN schema_ok THEN 1 ELSE 0 END) AS schema_ok, SUM(CASE WHEN fragment THEN 1 ELSE 0 END) AS fragments \
         FROM pair_validations GROUP BY service",
    ),
];

pub fn query(wh: &Warehouse, sql: &str) -> Result<Vec<RecordBatch>> {
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    rt.block_on(async {
        let ctx = context(wh).await?;
        let df = ctx.sql(sql).await.map_err(|e| explain(e, wh))?;
        df.collect().await.context("query failed")
    })
}

fn explain(e: datafusion::error::DataFusionError, wh: &Warehouse) -> anyhow::Error {
    let msg = e.to_string();
    if msg.contains("not found") {
        let have: Vec<&str> =
            TABLES.iter().chain(COMMAND_TABLES).filter(|t| has_data(wh, t.name)).map(|t| t.name).collect();
        return anyhow::anyhow!(
            "{msg}\ntables in {}: {} (run `doc2ci run` to build the others)",
            wh.root.display(),
            have.join(", ")
        );
    }
    anyhow::anyhow!(msg)
}

fn has_data(wh: &Warehouse, table: &str) -> bool {
    fn any_parquet(d: &std::path::Path) -> bool {
        std::fs::read_dir(d)
            .map(|rd| {
                rd.flatten().any(|e| {
                    if e.path().is_dir() {
                        any_parquet(&e.path())
                    } else {
                        e.path().extension().is_some_and(|x| x == "parquet")
                    }
                })
            })
            .unwrap_or(false)
    }
    any_parquet(&wh.root.join(table))
}

pub async fn context(wh: &Warehouse) -> Result<SessionContext> {
    let ctx = SessionContext::new();
    for t in TABLES.iter().chain(COMMAND_TABLES) {
        if !has_data(wh, t.name) {
            continue;
        }
        let opts = ListingOptions::new(Arc::new(ParquetFormat::default()))
            .with_file_extension(".parquet")
            .with_table_partition_cols(t.partition_cols.iter().map(|c| (c.to_string(), DataType::Utf8)).collect());
        let path = format!("{}/", wh.root.join(t.name).canonicalize()?.display());
        ctx.register_listing_table(t.name, &path, opts, None, None)
            .await
            .with_context(|| format!("cannot open table {}", t.name))?;
    }
    for (name, body) in VIEWS {
        // A view over a table not built yet is simply absent (or a later definition stands).
        if ctx.table_exist(*name).unwrap_or(false) {
            continue;
        }
        if let Ok(df) = ctx.sql(body).await {
            let _ = ctx.register_table(*name, df.into_view());
        }
    }
    Ok(ctx)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Table,
    Csv,
    Json,
    Jsonl,
}

pub fn write(batches: &[RecordBatch], format: Format, out: &mut dyn Write) -> Result<()> {
    match format {
        Format::Table => write_table(batches, out),
        Format::Csv => {
            let mut w = csv::Writer::from_writer(out);
            if let Some(b) = batches.first() {
                w.write_record(b.schema().fields().iter().map(|f| f.name().as_str()))?;
            }
            for b in batches {
                let cols = text_columns(b)?;
                for r in 0..b.num_rows() {
                    w.write_record(cols.iter().map(|c| c[r].clone().unwrap_or_default()))?;
                }
            }
            w.flush()?;
            Ok(())
        }
        Format::Json | Format::Jsonl => {
            let mut first = true;
            if format == Format::Json {
                write!(out, "[")?;
            }
            for b in batches {
                let names: Vec<String> = b.schema().fields().iter().map(|f| f.name().clone()).collect();
                for r in 0..b.num_rows() {
                    let obj: serde_json::Map<String, Value> = names
                        .iter()
                        .zip(b.columns())
                        .map(|(n, c)| Ok((n.clone(), json_value(c, r)?)))
                        .collect::<Result<_>>()?;
                    let line = serde_json::to_string(&obj)?;
                    match format {
                        Format::Json => write!(out, "{}{line}", if first { "\n" } else { ",\n" })?,
                        _ => writeln!(out, "{line}")?,
                    }
                    first = false;
                }
            }
            if format == Format::Json {
                writeln!(out, "\n]")?;
            }
            Ok(())
        }
    }
}

fn text_columns(b: &RecordBatch) -> Result<Vec<Vec<Option<String>>>> {
    let opts = FormatOptions::default();
    b.columns()
        .iter()
        .map(|c| {
            let f = ArrayFormatter::try_new(c.as_ref(), &opts)?;
            Ok((0..b.num_rows()).map(|r| (!c.is_null(r)).then(|| f.value(r).to_string())).collect())
        })
        .collect()
}

/// Typed JSON for the common column types; anything else as its display text.
fn json_value(col: &ArrayRef, row: usize) -> Result<Value> {
    use datafusion::arrow::array::{AsArray, BooleanArray, Float64Array, Int64Array, UInt64Array};
    if col.is_null(row) {
        return Ok(Value::Null);
    }
    let one = col.slice(row, 1);
    Ok(match col.data_type() {
        DataType::Boolean => Value::Bool(one.as_any().downcast_ref::<BooleanArray>().unwrap().value(0)),
        DataType::Int8 | DataType::Int16 | DataType::Int32 | DataType::Int64 => {
            Value::from(cast(&one, &DataType::Int64)?.as_any().downcast_ref::<Int64Array>().unwrap().value(0))
        }
        DataType::UInt8 | DataType::UInt16 | DataType::UInt32 | DataType::UInt64 => {
            Value::from(cast(&one, &DataType::UInt64)?.as_any().downcast_ref::<UInt64Array>().unwrap().value(0))
        }
        DataType::Float16 | DataType::Float32 | DataType::Float64 => {
            let v = cast(&one, &DataType::Float64)?.as_any().downcast_ref::<Float64Array>().unwrap().value(0);
            serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number)
        }
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => {
            Value::String(cast(&one, &DataType::Utf8)?.as_string::<i32>().value(0).to_string())
        }
        DataType::List(_) | DataType::LargeList(_) => {
            let inner = match col.data_type() {
                DataType::List(_) => col.as_list::<i32>().value(row),
                _ => col.as_list::<i64>().value(row),
            };
            Value::Array((0..inner.len()).map(|i| json_value(&inner, i)).collect::<Result<_>>()?)
        }
        _ => Value::String(ArrayFormatter::try_new(col.as_ref(), &FormatOptions::default())?.value(row).to_string()),
    })
}

/// An aligned text table; long cells are shortened and newlines shown as `⏎` so rows stay rows.
fn write_table(batches: &[RecordBatch], out: &mut dyn Write) -> Result<()> {
    const MAX: usize = 60;
    let Some(first) = batches.first() else {
        writeln!(out, "(no rows)")?;
        return Ok(());
    };
    let header: Vec<String> = first.schema().fields().iter().map(|f| f.name().clone()).collect();
    let mut rows: Vec<Vec<String>> = Vec::new();
    for b in batches {
        let cols = text_columns(b)?;
        for r in 0..b.num_rows() {
            rows.push(
                cols.iter()
                    .map(|c| {
                        let s = c[r].clone().unwrap_or_else(|| "NULL".into()).replace('\n', "⏎");
                        if s.chars().count() > MAX {
                            format!("{}…", s.chars().take(MAX - 1).collect::<String>())
                        } else {
                            s
                        }
                    })
                    .collect(),
            );
        }
    }
    let widths: Vec<usize> = (0..header.len())
        .map(|i| rows.iter().map(|r| r[i].chars().count()).chain([header[i].chars().count()]).max().unwrap_or(0))
        .collect();
    let line =
        |cells: &[String]| cells.iter().zip(&widths).map(|(c, w)| format!("{c:<w$}")).collect::<Vec<_>>().join(" │ ");
    writeln!(out, "{}", line(&header))?;
    writeln!(out, "{}", widths.iter().map(|w| "─".repeat(*w)).collect::<Vec<_>>().join("─┼─"))?;
    for r in &rows {
        writeln!(out, "{}", line(r))?;
    }
    writeln!(out, "({} row{})", rows.len(), if rows.len() == 1 { "" } else { "s" })?;
    Ok(())
}

pub fn export(wh: &Warehouse, table: &str, format: Format, out: &mut dyn Write) -> Result<()> {
    if !TABLES.iter().chain(COMMAND_TABLES).any(|t| t.name == table) {
        let names: Vec<&str> = TABLES.iter().chain(COMMAND_TABLES).map(|t| t.name).collect();
        bail!("unknown table `{table}` (tables: {})", names.join(", "));
    }
    let batches = query(wh, &format!("SELECT * FROM {table}"))?;
    write(&batches, format, out)
}
