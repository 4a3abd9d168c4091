//! doc2ci's similarity metrics (SPEC §5), each matching the Python peer the SPEC names.

mod bleu;
mod chrf;
mod crystal;
mod levenshtein;
mod ngrams;
mod rouge;
mod text;
mod zss;

pub use crystal::CrystalContext;
pub use text::{clean, lj};
