//! The llm4ci data as the score crate's tests read it.

// Each test binary that includes this module uses a part of it.
#![allow(dead_code)]

use std::io::Read;
use std::path::PathBuf;

/// `$DOC2CI_LLM4CI_DATA`, else `../shared/data/llm4ci` beside the workspace.
pub fn data_dir() -> PathBuf {
    std::env::var_os("DOC2CI_LLM4CI_DATA").map(PathBuf::from).unwrap_or_else(|| {
        PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets it")).join("../../../shared/data/llm4ci")
    })
}

/// The (ID, column) values of a gzip'd CSV file of the data, in file order.
pub fn column(file: &str, name: &str) -> Vec<(u64, String)> {
    let path = data_dir().join(file);
    let mut text = String::new();
    flate2::read::GzDecoder::new(std::fs::File::open(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display())))
        .read_to_string(&mut text)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut rdr = csv::Reader::from_reader(text.as_bytes());
    let headers = rdr.headers().expect("a header row").clone();
    let col = |n: &str| headers.iter().position(|h| h == n).unwrap_or_else(|| panic!("{file}: no {n} column"));
    let (id, value) = (col("ID"), col(name));
    rdr.records()
        .map(|r| {
            let r = r.unwrap_or_else(|e| panic!("{file}: {e}"));
            (r[id].parse().expect("a numeric ID"), r[value].to_string())
        })
        .collect()
}

/// The six models of the data.
pub const MODELS: [&str; 6] = ["gpt-4o", "gpt-4.1", "llama3.1-8b", "codellama-7b", "gemma3-12b", "codegemma-7b"];
