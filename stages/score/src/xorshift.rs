//! The unit tests' deterministic random numbers (xorshift64): reproducible random cases without
//! a dependency.

/// The next number below `m`, advancing `seed`.
pub(crate) fn below(seed: &mut u64, m: u64) -> u64 {
    *seed ^= *seed << 13;
    *seed ^= *seed >> 7;
    *seed ^= *seed << 17;
    *seed % m
}
