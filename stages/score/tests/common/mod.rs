//! The llm4ci data as the score crate's tests read it (the workspace's one reader, in testkit).

// Each test binary that includes this module uses a part of it.
#![allow(dead_code, unused_imports)]

pub use doc2ci_testkit::{llm4ci_column as column, llm4ci_dir as data_dir, LLM4CI_MODELS as MODELS};
