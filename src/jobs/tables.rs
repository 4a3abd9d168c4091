//! The jobs' tables: each one's name, the columns its folders carry and the jobs that write it,
//! and every table in one list (for `status`, `sql`, `export benchmark`, and the engine's
//! stale-partition sweep, which is handed the list by `jobs::declare` and names no table).
//!
//! One file beside the jobs rather than a table in its writer's file: jobs read each other's
//! tables both ways (crawl ↔ extract, import → generate → dedupe → import), and a job's code
//! version hashes every file it imports (`build.rs`), so a reader importing its writer's file
//! would re-run whenever the writer's code changed. This file imports nothing but `TableDef`.

use crate::warehouse::TableDef;

/// Pairs as a source gave them (`import` and `extract` write it), before dedupe.
pub const PAIRS_RAW: TableDef = TableDef { name: "pairs_raw", partition_cols: &["service", "source"] };
/// Crawled pages, raw HTML included (compressed by the Parquet writer).
pub const PAGES: TableDef = TableDef { name: "pages", partition_cols: &["service", "source"] };
/// Every code block extraction met on the crawled pages, and what became of it (the crawl summary).
pub const CODE_BLOCKS: TableDef = TableDef { name: "code_blocks", partition_cols: &["service", "source"] };
/// The study's pairs after dedupe and the leak screen (`dedupe`).
pub const PAIRS: TableDef = TableDef { name: "pairs", partition_cols: &["service"] };
/// Answers (`generate`, `repair`, an import of outputs).
pub const GENERATIONS: TableDef = TableDef { name: "generations", partition_cols: &["service", "model"] };
/// One row per model (`models`).
pub const MODELS: TableDef = TableDef { name: "models", partition_cols: &[] };
/// Validity of each pair's own reference (the study reports how many are fragments).
pub const PAIR_VALIDATIONS: TableDef = TableDef { name: "pair_validations", partition_cols: &["service"] };
/// Parse, schema and validator verdicts of each answer (`validate`).
pub const VALIDATIONS: TableDef = TableDef { name: "validations", partition_cols: &["service", "model"] };
/// The similarity metrics of each answer (`score`).
pub const SCORES: TableDef = TableDef { name: "scores", partition_cols: &["service", "model"] };
/// Each lint tool's verdict on each output and reference (`model = "reference"`).
pub const LINTS: TableDef = TableDef { name: "lints", partition_cols: &["service", "model"] };
/// What each repair round revisited and fixed, per service and model.
pub const REPAIRS: TableDef = TableDef { name: "repairs", partition_cols: &["service", "model"] };
/// The contamination screen: each reference and its twin, continued by a model (`contamination`).
pub const CONTAMINATION: TableDef = TableDef { name: "contamination", partition_cols: &["service", "model"] };

/// The study's tests in tidy rows (one partition: they compare across services and models).
pub const STATS: TableDef = TableDef { name: "stats", partition_cols: &[] };
/// The report's files (HTML, Markdown, CSV, SVG) live in this folder beside its index rows.
pub const REPORT: TableDef = TableDef { name: "report", partition_cols: &[] };

/// `doc2ci compare`'s rows (tests, flipped samples, swings, unmatched samples), one partition per
/// comparison, its page beside them.
pub const COMPARISONS: TableDef = TableDef { name: "comparisons", partition_cols: &["comparison"] };

/// Tables that commands write, not stages: queryable as the others, never swept as stale.
pub const COMMAND_TABLES: &[TableDef] = &[COMPARISONS];

/// Every table of the stages, in data-flow order.
pub const TABLES: &[TableDef] = &[
    PAGES,
    CODE_BLOCKS,
    PAIRS_RAW,
    PAIRS,
    GENERATIONS,
    MODELS,
    PAIR_VALIDATIONS,
    VALIDATIONS,
    SCORES,
    LINTS,
    REPAIRS,
    CONTAMINATION,
    STATS,
    REPORT,
];
