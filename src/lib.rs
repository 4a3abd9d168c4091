//! doc2ci's binary side: the engine (`engine`: DAG, cache keys, plan, scheduler), the study's
//! jobs (`jobs`: one file per stage, wiring config to the stage crates), the backends
//! (`backends`), the Parquet warehouse and SQL over it, and the CLI that wires them. Stage logic
//! lives in `stages/`, shared row types and models in `libs/`; nothing here computes a metric.

pub mod assets;
pub mod backends;
pub mod cli;
pub mod code;
pub mod coding;
pub mod config;
pub mod crawl;
pub mod engine;
pub mod jobs;
pub mod release;
pub mod resources;
pub mod sql;
pub mod ui;
pub mod warehouse;
