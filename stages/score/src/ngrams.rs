//! Word n-gram bookkeeping shared by BLEU and CrystalBLEU: a text's tokens get dense ids in its
//! own vocabulary so a reference's counts are built once and a candidate is matched against them by
//! id, never by re-hashing token strings per n-gram.

use rustc_hash::FxHashMap;

pub const MAX_ORDER: usize = 4;

/// Tokens of one text with ids in its own vocabulary.
#[derive(Debug, Clone, Default)]
pub struct Vocab {
    pub index: FxHashMap<Box<str>, u32>,
    pub ids: Vec<u32>,
}

impl Vocab {
    pub fn new<'a>(tokens: impl IntoIterator<Item = &'a str>) -> Self {
        let mut index: FxHashMap<Box<str>, u32> = FxHashMap::default();
        let mut ids = Vec::new();
        for t in tokens {
            let next = index.len() as u32;
            let id = *index.entry(Box::from(t)).or_insert(next);
            ids.push(id);
        }
        Vocab { index, ids }
    }

    pub fn len(&self) -> usize {
        self.ids.len()
    }

    /// The tokens of `other` as ids of this vocabulary; `u32::MAX` for tokens absent here.
    pub fn translate(&self, other: &Vocab) -> Vec<u32> {
        let mut map = vec![u32::MAX; other.index.len()];
        for (tok, &oid) in &other.index {
            if let Some(&id) = self.index.get(tok) {
                map[oid as usize] = id;
            }
        }
        other.ids.iter().map(|&i| map[i as usize]).collect()
    }
}

/// Packs an n-gram of ids (n ≤ 4) into one key; orders are kept in separate maps.
#[inline]
pub fn key(ids: &[u32]) -> u128 {
    ids.iter().fold(0u128, |k, &i| (k << 32) | i as u128)
}

/// Counts of each order's n-grams over `ids`, skipping positions `skip(n, start)` says to skip.
pub fn count(ids: &[u32], skip: impl Fn(usize, usize) -> bool) -> [FxHashMap<u128, u32>; MAX_ORDER] {
    let mut out: [FxHashMap<u128, u32>; MAX_ORDER] = Default::default();
    for n in 1..=MAX_ORDER {
        if ids.len() < n {
            break;
        }
        let m = &mut out[n - 1];
        for s in 0..=ids.len() - n {
            if skip(n, s) {
                continue;
            }
            *m.entry(key(&ids[s..s + n])).or_insert(0) += 1;
        }
    }
    out
}

/// Clipped matches per order of the candidate (ids already in the reference's vocabulary, `u32::MAX`
/// = unknown there) against the reference's counts, skipping positions `skip(n, start)` says to skip.
pub fn clipped_matches(
    cand: &[u32],
    refc: &[FxHashMap<u128, u32>; MAX_ORDER],
    skip: impl Fn(usize, usize) -> bool,
) -> [u64; MAX_ORDER] {
    let mut matches = [0u64; MAX_ORDER];
    let mut local: FxHashMap<u128, u32> = FxHashMap::default();
    for n in 1..=MAX_ORDER {
        if cand.len() < n {
            break;
        }
        local.clear();
        for s in 0..=cand.len() - n {
            let g = &cand[s..s + n];
            if g.contains(&u32::MAX) || skip(n, s) {
                continue;
            }
            *local.entry(key(g)).or_insert(0) += 1;
        }
        let r = &refc[n - 1];
        matches[n - 1] = local.iter().map(|(k, &c)| r.get(k).map_or(0, |&rc| c.min(rc)) as u64).sum();
    }
    matches
}
