//! doc2ci's engine: configuration, the partition DAG and its cache, the Parquet warehouse,
//! and SQL over it. Stage logic lives in the `stages/` crates.

pub mod assets;
pub mod cli;
pub mod code;
pub mod coding;
pub mod config;
pub mod crawl;
pub mod engine;
pub mod generation;
pub mod release;
pub mod resources;
pub mod sql;
pub mod tasks;
pub mod ui;
pub mod warehouse;
