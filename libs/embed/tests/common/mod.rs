//! Helpers shared by the agreement test and the benchmark example: where the model files and the real data
//! live, and SPEC §5's clean(x) exactly as the Python peer scripts compute it.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

/// `$DOC2CI_ASSETS`, else `$HOME/.cache/doc2ci/assets` (the folder `doc2ci setup` fills).
pub fn assets_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("DOC2CI_ASSETS").filter(|d| !d.is_empty()) {
        return PathBuf::from(d);
    }
    let home = std::env::var_os("HOME").unwrap_or_else(|| ".".into());
    PathBuf::from(home).join(".cache/doc2ci/assets")
}

/// (model.safetensors, tokenizer.json, config.json), or a panic that says how to get them.
pub fn model_files() -> (PathBuf, PathBuf, PathBuf) {
    let dir = assets_dir().join("models/all-minilm-l6-v2");
    let files = ["model.safetensors", "tokenizer.json", "config.json"].map(|f| dir.join(f));
    for f in &files {
        if !f.is_file() {
            panic!("model asset {} is missing: run `doc2ci setup` (or set DOC2CI_ASSETS)", f.display());
        }
    }
    let [m, t, c] = files;
    (m, t, c)
}

/// The predecessor study's real data, kept outside the repository.
pub fn data_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("DOC2CI_LLM4CI").filter(|d| !d.is_empty()) {
        return PathBuf::from(d);
    }
    Path::new(&std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"))
        .join("../../../shared/data/llm4ci")
}

/// Rows of a gzip CSV as (header → value) maps.
pub fn read_csv_gz(path: &Path) -> Vec<std::collections::HashMap<String, String>> {
    let f = std::fs::File::open(path).unwrap_or_else(|e| panic!("{}: {e} (set DOC2CI_LLM4CI)", path.display()));
    let mut r = csv::Reader::from_reader(flate2::read::GzDecoder::new(f));
    let headers = r.headers().unwrap().clone();
    r.records()
        .map(|rec| {
            let rec = rec.unwrap();
            headers.iter().zip(rec.iter()).map(|(h, v)| (h.to_string(), v.to_string())).collect()
        })
        .collect()
}

/// Python's `str.isspace`: Unicode White_Space plus the separators U+001C..U+001F.
fn py_space(c: char) -> bool {
    c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c)
}

/// Python's `str.splitlines()` boundaries.
fn py_lines(s: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut it = s.char_indices().peekable();
    while let Some((i, c)) = it.next() {
        let brk = matches!(
            c,
            '\n' | '\r' | '\u{0b}' | '\u{0c}' | '\u{1c}' | '\u{1d}' | '\u{1e}' | '\u{85}' | '\u{2028}' | '\u{2029}'
        );
        if brk {
            out.push(&s[start..i]);
            let mut next = i + c.len_utf8();
            if c == '\r' {
                if let Some(&(j, '\n')) = it.peek() {
                    it.next();
                    next = j + 1;
                }
            }
            start = next;
        }
    }
    if start < s.len() {
        out.push(&s[start..]);
    }
    out
}

/// SPEC §5 clean(x), the same as `clean` in tests/data/make_reference.py.
pub fn clean(x: &str) -> String {
    let mut lines = Vec::new();
    for line in py_lines(x) {
        if line.trim_matches(py_space).starts_with('#') {
            continue;
        }
        // `(?<!["'])#.*`: the first '#' not preceded by a quote starts the comment.
        let mut cut = line.len();
        let mut prev: Option<char> = None;
        for (i, c) in line.char_indices() {
            if c == '#' && !matches!(prev, Some('"') | Some('\'')) {
                cut = i;
                break;
            }
            prev = Some(c);
        }
        let line = &line[..cut];
        if line.trim_matches(py_space).is_empty() {
            continue;
        }
        lines.push(line.trim_end_matches(py_space));
    }
    lines.join("\n")
}
