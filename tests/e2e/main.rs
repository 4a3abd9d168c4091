//! End-to-end tests: the real `doc2ci` binary on real data, read back with real DuckDB.
//! One test binary for all of them, so the engine is linked once per build, not once per file.

mod common;

mod batch;
mod compare;
mod contamination;
mod crash;
mod crawl;
mod dates;
mod engine;
mod errors;
mod generate;
mod hostile;
mod llama_cpp;
mod quality;
mod realdocs;
mod remote;
mod study;
mod trust;
