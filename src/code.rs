//! Stage code versions, derived at build time from the sources (`build.rs`): a stage's version is
//! the hash of the crates (and engine modules) that compute its rows, so a partition's cache key
//! changes exactly when that code does, and `plan` can say "stage code changed".

include!(concat!(env!("OUT_DIR"), "/code_versions.rs"));

/// The version of the code made of `parts`: workspace crate names (`doc2ci-score`) or engine
/// modules (`glue:crawl`). A name that is neither is a bug in the node declaration.
pub fn version(parts: &[&str]) -> String {
    let mut h = blake3::Hasher::new();
    for p in parts {
        let v = match p.strip_prefix("glue:") {
            Some(g) => GLUE.iter().find(|(n, _)| *n == g),
            None => CRATES.iter().find(|(n, _)| n == p),
        }
        .unwrap_or_else(|| panic!("internal: no code version for `{p}`"));
        h.update(p.as_bytes());
        h.update(v.1.as_bytes());
    }
    h.finalize().to_hex()[..16].to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_stage_crate_has_a_version_and_they_differ() {
        assert!(CRATES.len() >= 10, "{CRATES:?}");
        let a = version(&["doc2ci-score"]);
        assert_eq!(a, version(&["doc2ci-score"]));
        assert_ne!(a, version(&["doc2ci-validate"]));
        assert_ne!(version(&["glue:crawl"]), version(&["glue:generation"]));
    }
}
