//! Q8_0 weights times a few activation rows: the decoding step's matrix products, one row per
//! sequence of the batch. AVX-512 VNNI where the CPU has it, else AVX2 (most AMD EPYC before Zen 4,
//! many laptops), else scalar: detected at run time (nothing is compiled for the build machine's
//! CPU, SPEC §9), and `DOC2CI_KERNEL=avx512|avx2|scalar` forces one, so every path the CPU has
//! is tested and measured on any machine.
//!
//! Why our own kernel: candle's Q8_0 product costs as much per row for four rows as for one
//! (measured: 3.6× the time for 4 rows), so decoding sequences together gained nothing; here each
//! 64-byte weight vector is loaded once for every row of the batch. Each output is computed by the
//! same instructions in the same order whatever shares its batch, so a sequence's tokens never
//! depend on its neighbours (`tests/agreement.rs` checks it on the real model).

use doc2ci_errors::{fail, Result};
use rayon::prelude::*;

const QK: usize = 32;
/// Output columns per task: enough work to amortise a task, small enough to spread over cores.
const COLS_PER_TASK: usize = 64;

/// A `(n, k)` matrix of 32-value blocks with one scale each: Q8_0 (signed bytes, value = d·q), or
/// the file's own Q4_0/Q4_1 blocks unpacked to one byte per value (value = d·q + m, q in 0..16), so
/// decoding computes with exactly the weights llama.cpp does, as llama.cpp does (its Q8_1
/// activations carry the block sums the offset needs).
pub struct Q8Matrix {
    n: usize,
    k: usize,
    /// Signed bytes for Q8_0 (32 per block); for Q4 blocks the file's own nibbles (16 bytes per
    /// block: low nibbles are values 0..16, high ones 16..32), unpacked in registers, so a decoding
    /// step reads half the bytes (single-stream decoding is bound by memory, not arithmetic).
    qs: Vec<i8>,
    d: Vec<f32>,
    /// Q4_0/Q4_1: each block's offset `m` (Q4_0: −8·d).
    m: Option<Vec<f32>>,
}

/// The GGUF block types read as they are.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Blocks {
    Q8_0,
    Q4_0,
    Q4_1,
}

impl Blocks {
    fn bytes(self) -> usize {
        match self {
            Blocks::Q8_0 => 34,
            Blocks::Q4_0 => 18,
            Blocks::Q4_1 => 20,
        }
    }
}

/// One weight row's blocks.
struct Row<'a> {
    qs: &'a [i8],
    d: &'a [f32],
    m: Option<&'a [f32]>,
}

/// Activation rows quantized as ggml's Q8_1 (per 32 values: scale = max |x| / 127, and the scale
/// times the sum of the quantized values, which an offset `m` multiplies).
struct Acts {
    qs: Vec<i8>,
    d: Vec<f32>,
    s: Vec<f32>,
}

fn f16_to_f32(bits: u16) -> f32 {
    let sign = ((bits >> 15) as u32) << 31;
    let exp = ((bits >> 10) & 0x1f) as u32;
    let man = (bits & 0x3ff) as u32;
    let v = match (exp, man) {
        (0, 0) => sign,
        (0, m) => {
            // Subnormal: normalise the mantissa.
            let shift = m.leading_zeros() - 21;
            sign | ((113 - shift) << 23) | (((m << shift) & 0x3ff) << 13)
        }
        (31, m) => sign | 0x7f80_0000 | (m << 13),
        (e, m) => sign | ((e + 112) << 23) | (m << 13),
    };
    f32::from_bits(v)
}

impl Q8Matrix {
    /// From GGUF block bytes (candle's `QTensor::data`), ggml's layouts: Q8_0 = f16 scale, 32 signed
    /// bytes; Q4_0 = f16 scale, 16 bytes of nibbles (low nibbles values 0..16, high ones 16..32);
    /// Q4_1 = f16 scale, f16 offset, the same nibbles. `k` must be a multiple of 64.
    pub fn from_blocks(kind: Blocks, bytes: &[u8], n: usize, k: usize) -> Result<Q8Matrix> {
        if !k.is_multiple_of(64) || bytes.len() != n * (k / QK) * kind.bytes() {
            fail!(Unsupported, "{kind:?} matrix ({n}, {k}): {} bytes, or k not a multiple of 64", bytes.len());
        }
        let blocks = n * k / QK;
        let per_block = if kind == Blocks::Q8_0 { QK } else { QK / 2 };
        let (mut qs, mut d) = (Vec::with_capacity(blocks * per_block), Vec::with_capacity(blocks));
        let mut m = (kind != Blocks::Q8_0).then(|| Vec::with_capacity(blocks));
        let half = |b: &[u8], i: usize| f16_to_f32(u16::from_le_bytes([b[i], b[i + 1]]));
        for b in bytes.chunks_exact(kind.bytes()) {
            let scale = half(b, 0);
            d.push(scale);
            let nibbles = match kind {
                Blocks::Q8_0 => {
                    qs.extend(b[2..].iter().map(|&q| q as i8));
                    continue;
                }
                Blocks::Q4_0 => {
                    m.as_mut().expect("offsets").push(-8.0 * scale);
                    &b[2..]
                }
                Blocks::Q4_1 => {
                    m.as_mut().expect("offsets").push(half(b, 2));
                    &b[4..]
                }
            };
            qs.extend(nibbles.iter().map(|&q| q as i8));
        }
        Ok(Q8Matrix { n, k, qs, d, m })
    }

    pub fn rows(&self) -> usize {
        self.n
    }

    /// Weight row `j`: `k` bytes for Q8_0, `k / 2` for Q4 blocks.
    fn row(&self, j: usize) -> Row<'_> {
        let (nb, bytes) = (self.k / QK, if self.m.is_some() { self.k / 2 } else { self.k });
        Row {
            qs: &self.qs[j * bytes..(j + 1) * bytes],
            d: &self.d[j * nb..(j + 1) * nb],
            m: self.m.as_ref().map(|m| &m[j * nb..(j + 1) * nb]),
        }
    }

    /// Matrices over the same input, one above the other: one product gives all their outputs,
    /// each column computed exactly as in its own matrix.
    pub fn stack(parts: Vec<Q8Matrix>) -> Result<Q8Matrix> {
        let Some(first) = parts.first() else { fail!(Unsupported, "no matrix to stack") };
        let (k, offsets) = (first.k, first.m.is_some());
        if parts.iter().any(|p| p.k != k || p.m.is_some() != offsets) {
            fail!(Unsupported, "stacked matrices must share their input size and block type");
        }
        let mut out = Q8Matrix { n: 0, k, qs: Vec::new(), d: Vec::new(), m: offsets.then(Vec::new) };
        for p in parts {
            out.n += p.n;
            out.qs.extend(p.qs);
            out.d.extend(p.d);
            if let (Some(m), Some(pm)) = (out.m.as_mut(), p.m) {
                m.extend(pm);
            }
        }
        Ok(out)
    }

    /// `x`: `b` rows of `k` values. Returns `b` rows of `n`.
    pub fn matmul(&self, x: &[f32], b: usize) -> Vec<f32> {
        // A kernel that cannot be chosen stopped the model's load (`Embedded::load`).
        self.matmul_on(Kernel::chosen().unwrap_or(Kernel::Scalar), x, b)
    }

    /// [`Self::matmul`] on one kernel. Panics if the CPU lacks it ([`Kernel::available`]).
    pub(crate) fn matmul_on(&self, kernel: Kernel, x: &[f32], b: usize) -> Vec<f32> {
        assert_eq!(x.len(), b * self.k, "activation rows of length k");
        assert!(Kernel::available().contains(&kernel), "this CPU cannot run the {kernel:?} kernel");
        let acts = quantize(x, self.k);
        // Column-major while computing (each task owns whole columns), row-major when returned.
        let mut cols = vec![0f32; self.n * b];
        cols.par_chunks_mut(COLS_PER_TASK * b).enumerate().for_each(|(t, out)| {
            let j0 = t * COLS_PER_TASK;
            for (dj, o) in out.chunks_exact_mut(b).enumerate() {
                let j = j0 + dj;
                let w = self.row(j);
                match kernel {
                    // SAFETY: the CPU has the kernel's features (asserted above, detected at run time).
                    #[cfg(target_arch = "x86_64")]
                    Kernel::Avx512 => unsafe {
                        match w.m {
                            None => x86::dot_rows::<false>(&w, &acts, self.k, o),
                            Some(_) => x86::dot_rows::<true>(&w, &acts, self.k, o),
                        }
                    },
                    #[cfg(target_arch = "x86_64")]
                    Kernel::Avx2 => unsafe {
                        match w.m {
                            None => avx2::dot_rows::<false>(&w, &acts, self.k, o),
                            Some(_) => avx2::dot_rows::<true>(&w, &acts, self.k, o),
                        }
                    },
                    _ => dot_rows_scalar(&w, &acts, self.k, o),
                }
            }
        });
        let mut out = vec![0f32; self.n * b];
        for (j, col) in cols.chunks_exact(b).enumerate() {
            for (r, v) in col.iter().enumerate() {
                out[r * self.n + j] = *v;
            }
        }
        out
    }
}

/// The decoding kernels, fastest first.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kernel {
    /// AVX-512 F/BW with VNNI: 64 bytes per instruction, four byte products per lane summed at once.
    Avx512,
    /// AVX2 with FMA: 32 bytes (one block) per instruction, llama.cpp's sign trick and 16-bit pairs.
    Avx2,
    Scalar,
}

impl Kernel {
    /// What this CPU can run, fastest first (scalar always).
    pub fn available() -> &'static [Kernel] {
        static K: std::sync::OnceLock<Vec<Kernel>> = std::sync::OnceLock::new();
        K.get_or_init(|| {
            let mut k = Vec::new();
            #[cfg(target_arch = "x86_64")]
            {
                let has = |f: &[bool]| f.iter().all(|&b| b);
                if has(&[
                    std::is_x86_feature_detected!("avx512f"),
                    std::is_x86_feature_detected!("avx512bw"),
                    std::is_x86_feature_detected!("avx512vnni"),
                ]) {
                    k.push(Kernel::Avx512);
                }
                if has(&[std::is_x86_feature_detected!("avx2"), std::is_x86_feature_detected!("fma")]) {
                    k.push(Kernel::Avx2);
                }
            }
            k.push(Kernel::Scalar);
            k
        })
    }

    /// The kernel decoding uses: `DOC2CI_KERNEL` (avx512, avx2 or scalar) when set, else the
    /// fastest this CPU has. Read once per process; a kernel this CPU lacks, or another name, is
    /// an error (the model refuses to load with it).
    pub fn chosen() -> Result<Kernel> {
        static K: std::sync::OnceLock<std::result::Result<Kernel, String>> = std::sync::OnceLock::new();
        let k = K.get_or_init(|| match std::env::var("DOC2CI_KERNEL") {
            Ok(name) => match Kernel::parse(&name) {
                Some(k) if Kernel::available().contains(&k) => Ok(k),
                Some(k) => Err(format!("DOC2CI_KERNEL={name}: this CPU cannot run the {k:?} kernel")),
                None => Err(format!("DOC2CI_KERNEL={name}: one of avx512, avx2, scalar")),
            },
            Err(_) => Ok(Kernel::available()[0]),
        });
        match k {
            Ok(k) => Ok(*k),
            Err(e) => fail!(Unsupported, "{e}"),
        }
    }

    pub fn parse(name: &str) -> Option<Kernel> {
        match name {
            "avx512" => Some(Kernel::Avx512),
            "avx2" => Some(Kernel::Avx2),
            "scalar" => Some(Kernel::Scalar),
            _ => None,
        }
    }
}

/// Per 32 values: scale = max |x| / 127, value = round(x / scale) (candle's and ggml's Q8_0 rule).
fn quantize(x: &[f32], k: usize) -> Acts {
    let mut qs = Vec::with_capacity(x.len());
    let (mut d, mut sums) = (Vec::with_capacity(x.len() / QK), Vec::with_capacity(x.len() / QK));
    for blk in x.chunks_exact(QK) {
        let amax = blk.iter().fold(0f32, |m, v| m.max(v.abs()));
        let scale = amax / 127.0;
        let id = if scale != 0.0 { 1.0 / scale } else { 0.0 };
        d.push(scale);
        let q: Vec<i8> = blk.iter().map(|v| (v * id).round() as i8).collect();
        sums.push(scale * q.iter().map(|&v| v as i32).sum::<i32>() as f32);
        qs.extend(q);
    }
    debug_assert_eq!(qs.len() % k, 0);
    Acts { qs, d, s: sums }
}

/// A Q4 row's offsets' term, `Σ m[i]·s[i]` over its blocks in block order (0 for Q8_0 rows): the
/// vector kernels add it once per row, as llama.cpp's AVX2 dot product adds its `summs`.
#[inline]
fn offsets<const OFFSET: bool>(w: &Row, s: &[f32]) -> f32 {
    match w.m {
        Some(m) if OFFSET => m.iter().zip(s).fold(0.0, |acc, (m, s)| acc + m * s),
        _ => 0.0,
    }
}

/// The scalar kernel: per block an exact integer dot product, scaled (plus the offset term) and
/// summed in block order.
fn dot_rows_scalar(w: &Row, a: &Acts, k: usize, out: &mut [f32]) {
    let nb = k / QK;
    for (r, o) in out.iter_mut().enumerate() {
        let (x, xd, xs) = (&a.qs[r * k..(r + 1) * k], &a.d[r * nb..(r + 1) * nb], &a.s[r * nb..(r + 1) * nb]);
        let mut acc = 0f32;
        for i in 0..nb {
            let xq = &x[i * QK..(i + 1) * QK];
            let isum: i32 = match w.m {
                None => w.qs[i * QK..(i + 1) * QK].iter().zip(xq).map(|(&p, &q)| p as i32 * q as i32).sum(),
                Some(_) => {
                    let nib = &w.qs[i * QK / 2..(i + 1) * QK / 2];
                    let (lo, hi) = xq.split_at(QK / 2);
                    nib.iter()
                        .zip(lo.iter().zip(hi))
                        .map(|(&b, (&l, &h))| (b as u8 & 0x0f) as i32 * l as i32 + (b as u8 >> 4) as i32 * h as i32)
                        .sum()
                }
            };
            acc += isum as f32 * (w.d[i] * xd[i]);
            if let Some(m) = w.m {
                acc += m[i] * xs[i];
            }
        }
        *o = acc;
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::{Acts, Row, QK};
    use std::arch::x86_64::*;

    /// One weight row against every activation row. Per 64 bytes (two blocks): |w| as unsigned
    /// bytes times x with w's sign (VNNI multiplies unsigned by signed), four products per lane
    /// summed exactly in 32 bits; then each block's 8 lanes scaled by w's and x's block scales
    /// into an 8-lane float accumulator, block after block, and one horizontal sum at the end.
    /// The float steps are the AVX2 kernel's, in its order, so both give the same bits (and the
    /// order of llama.cpp's AVX2 dot product); only the integer part is wider.
    ///
    /// With `OFFSET` (Q4 blocks: packed nibbles, unsigned values, no sign trick) the blocks' `m · s`
    /// is added once per row at the end, summed in block order.
    #[target_feature(enable = "avx2,fma,avx512f,avx512bw,avx512vnni")]
    pub(super) unsafe fn dot_rows<const OFFSET: bool>(w: &Row, a: &Acts, k: usize, out: &mut [f32]) {
        let (wq, wd) = (w.qs, w.d);
        let nb = k / QK;
        let b = out.len();
        let zero = _mm512_setzero_si512();
        // Rows eight at a time (a whole batch of the embedded backend): their accumulators stay in
        // registers, and each weight vector is loaded and unpacked once for all of them.
        let mut r0 = 0;
        while r0 < b {
            let rows = (b - r0).min(8);
            let mut acc = [_mm256_setzero_ps(); 8];
            for p in 0..k / 64 {
                let wv = if OFFSET {
                    // 32 bytes of nibbles (two blocks) → 64 values in block order: 128-bit lanes
                    // (block 0 low, block 0 high, block 1 low, block 1 high).
                    let packed = _mm256_loadu_si256(wq.as_ptr().add(p * 32) as *const __m256i);
                    let low = _mm256_and_si256(packed, _mm256_set1_epi8(0x0f));
                    let high = _mm256_and_si256(_mm256_srli_epi16::<4>(packed), _mm256_set1_epi8(0x0f));
                    let v = _mm512_inserti64x4::<1>(_mm512_castsi256_si512(low), high);
                    _mm512_shuffle_i64x2::<0b11_01_10_00>(v, v)
                } else {
                    _mm512_loadu_si512(wq.as_ptr().add(p * 64) as *const __m512i)
                };
                let (neg, aw) = if OFFSET { (0, wv) } else { (_mm512_movepi8_mask(wv), _mm512_abs_epi8(wv)) };
                for (i, acc) in acc.iter_mut().enumerate().take(rows) {
                    let r = r0 + i;
                    let xv = _mm512_loadu_si512(a.qs.as_ptr().add(r * k + p * 64) as *const __m512i);
                    let sx = if OFFSET { xv } else { _mm512_mask_sub_epi8(xv, neg, zero, xv) };
                    let f = _mm512_cvtepi32_ps(_mm512_dpbusd_epi32(zero, aw, sx));
                    let (even, odd) = (2 * p, 2 * p + 1);
                    let lo = _mm512_castps512_ps256(f);
                    let hi = _mm256_castpd_ps(_mm512_extractf64x4_pd::<1>(_mm512_castps_pd(f)));
                    *acc = _mm256_fmadd_ps(lo, _mm256_set1_ps(wd[even] * a.d[r * nb + even]), *acc);
                    *acc = _mm256_fmadd_ps(hi, _mm256_set1_ps(wd[odd] * a.d[r * nb + odd]), *acc);
                }
            }
            for (i, acc) in acc.iter().enumerate().take(rows) {
                let r = r0 + i;
                // The AVX2 kernel's horizontal sum, in its fixed order. (Rust's
                // `_mm512_reduce_add_ps` is an unordered reduction: the compiler may pick another
                // order in another build, and a greedy token then flips: seen, 29 of 64 tokens
                // agreeing with llama.cpp after an unrelated change, 64 of 64 before.)
                out[r] = super::avx2::hsum(*acc) + super::offsets::<OFFSET>(w, &a.s[r * nb..(r + 1) * nb]);
            }
            r0 += rows;
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use super::{Acts, Row, QK};
    use std::arch::x86_64::*;

    /// The 8 lanes' sum in one fixed order (halves, then pairs).
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn hsum(v: __m256) -> f32 {
        let s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps::<1>(v));
        let s = _mm_add_ps(s, _mm_movehl_ps(s, s));
        _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)))
    }

    /// One weight row against every activation row, a block (32 bytes) at a time, as llama.cpp's
    /// AVX2 Q8_0 dot product: |w| as unsigned bytes times x with w's sign, byte pairs summed into
    /// 16 bits (`maddubs`: at most 2·128·127, no saturation), then into 32 bits, scaled by both
    /// block scales into a float accumulator. Q4 blocks are unsigned nibbles (no sign trick) and
    /// add their offsets' term once per row.
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn dot_rows<const OFFSET: bool>(w: &Row, a: &Acts, k: usize, out: &mut [f32]) {
        let (wq, wd) = (w.qs, w.d);
        let nb = k / QK;
        let ones = _mm256_set1_epi16(1);
        let low4 = _mm256_set1_epi8(0x0f);
        let mut r0 = 0;
        while r0 < out.len() {
            let rows = (out.len() - r0).min(4);
            let mut acc = [_mm256_setzero_ps(); 4];
            for (blk, &dw) in wd.iter().enumerate().take(nb) {
                let wv = if OFFSET {
                    // 16 bytes of nibbles → 32 values: low nibbles are values 0..16, high ones 16..32.
                    let packed = _mm_loadu_si128(wq.as_ptr().add(blk * QK / 2) as *const __m128i);
                    let v = _mm256_set_m128i(_mm_srli_epi16::<4>(packed), packed);
                    _mm256_and_si256(v, low4)
                } else {
                    _mm256_loadu_si256(wq.as_ptr().add(blk * QK) as *const __m256i)
                };
                let aw = if OFFSET { wv } else { _mm256_sign_epi8(wv, wv) };
                for (i, acc) in acc.iter_mut().enumerate().take(rows) {
                    let r = r0 + i;
                    let xv = _mm256_loadu_si256(a.qs.as_ptr().add(r * k + blk * QK) as *const __m256i);
                    let sx = if OFFSET { xv } else { _mm256_sign_epi8(xv, wv) };
                    let pairs = _mm256_maddubs_epi16(aw, sx);
                    let isum = _mm256_madd_epi16(pairs, ones);
                    let d = _mm256_set1_ps(dw * a.d[r * nb + blk]);
                    *acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), d, *acc);
                }
            }
            for (i, acc) in acc.iter().enumerate().take(rows) {
                let r = r0 + i;
                out[r] = hsum(*acc) + super::offsets::<OFFSET>(w, &a.s[r * nb..(r + 1) * nb]);
            }
            r0 += rows;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lcg(seed: &mut u64) -> f32 {
        *seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        ((*seed >> 40) as f32 / (1u64 << 24) as f32) - 0.5
    }

    fn matrix(n: usize, k: usize, seed: &mut u64) -> (Q8Matrix, Vec<f32>) {
        let mut bytes = Vec::new();
        let mut dense = Vec::new();
        for _ in 0..n * k / QK {
            let d = 0.01 + lcg(seed).abs() * 0.02;
            let bits = half_bits(d);
            bytes.extend(bits.to_le_bytes());
            for _ in 0..QK {
                let q = (lcg(seed) * 254.0).round().clamp(-127.0, 127.0) as i8;
                bytes.push(q as u8);
                dense.push(q as f32 * f16_to_f32(bits));
            }
        }
        (Q8Matrix::from_blocks(Blocks::Q8_0, &bytes, n, k).unwrap(), dense)
    }

    /// f32 → f16 bits for normal values (what the test's scales are).
    fn half_bits(v: f32) -> u16 {
        let b = v.to_bits();
        let exp = ((b >> 23) & 0xff) as i32 - 127 + 15;
        (((b >> 16) & 0x8000) | ((exp as u32) << 10) | ((b >> 13) & 0x3ff)) as u16
    }

    #[test]
    fn f16_scales_decode_exactly() {
        for v in [1.0f32, 0.5, -2.0, 0.0078125, 65504.0] {
            assert_eq!(f16_to_f32(half_bits(v)), v);
        }
        assert_eq!(f16_to_f32(0x0001), 2f32.powi(-24), "smallest subnormal");
        assert_eq!(f16_to_f32(0x8000), -0.0);
    }

    #[test]
    fn products_match_the_dense_matrix_and_never_depend_on_the_batch() {
        let mut seed = 7;
        let (n, k) = (200, 576);
        let (m, dense) = matrix(n, k, &mut seed);
        let rows: Vec<Vec<f32>> = (0..7).map(|_| (0..k).map(|_| lcg(&mut seed) * 3.0).collect()).collect();
        let alone: Vec<Vec<f32>> = rows.iter().map(|x| m.matmul(x, 1)).collect();
        for (x, got) in rows.iter().zip(&alone) {
            for j in 0..n {
                let want: f32 = (0..k).map(|i| x[i] * dense[j * k + i]).sum();
                // Activations are quantized to 8 bits: agreement to about 1% of the row's scale.
                let scale: f32 = (0..k).map(|i| (x[i] * dense[j * k + i]).abs()).sum();
                assert!((got[j] - want).abs() <= 0.01 * scale + 1e-4, "column {j}: {} vs {want}", got[j]);
            }
        }
        // Any batch, any position in it: bit-identical to the row alone.
        for b in [2, 3, 4, 5, 7] {
            let x: Vec<f32> = rows[..b].concat();
            let got = m.matmul(&x, b);
            for r in 0..b {
                assert_eq!(&got[r * n..(r + 1) * n], &alone[r][..], "row {r} of a batch of {b}");
            }
            let rev: Vec<f32> = rows[..b].iter().rev().flatten().copied().collect();
            let got = m.matmul(&rev, b);
            assert_eq!(&got[..n], &alone[b - 1][..], "row {} first in a batch of {b}", b - 1);
        }
    }

    #[test]
    fn every_kernel_this_cpu_has_equals_the_scalar_reference() {
        // Every kernel computes exact integer block sums; only float rounding order differs. Each
        // kernel's rows never depend on the batch around them.
        let mut seed = 3;
        let (n, k) = (64, 1536);
        let (m, _) = matrix(n, k, &mut seed);
        let xs: Vec<f32> = (0..5 * k).map(|_| lcg(&mut seed) * 2.0).collect();
        let acts = quantize(&xs[..k], k);
        #[cfg(target_arch = "x86_64")]
        if std::is_x86_feature_detected!("avx2") {
            assert!(Kernel::available().contains(&Kernel::Avx2), "an AVX2 CPU runs the AVX2 kernel");
        }
        for &kernel in Kernel::available() {
            let got = m.matmul_on(kernel, &xs[..k], 1);
            for (j, g) in got.iter().enumerate() {
                let mut o = [0f32];
                dot_rows_scalar(&m.row(j), &acts, k, &mut o);
                assert!((g - o[0]).abs() <= 1e-4 * (1.0 + o[0].abs()), "{kernel:?} column {j}: {g} vs {}", o[0]);
            }
            let batch = m.matmul_on(kernel, &xs, 5);
            assert_eq!(&batch[..n], &got[..], "{kernel:?}: row 0 of a batch of 5");
        }
        // The vector kernels share their float steps and order: the same bits.
        if Kernel::available().contains(&Kernel::Avx512) {
            assert_eq!(m.matmul_on(Kernel::Avx512, &xs, 5), m.matmul_on(Kernel::Avx2, &xs, 5));
        }
    }

    /// Q4_1 blocks as ggml lays them out, against the values they stand for.
    #[test]
    fn q4_1_blocks_are_read_exactly_and_offset_right() {
        let mut seed = 11;
        let (n, k) = (96, 576);
        let (mut bytes, mut dense) = (Vec::new(), Vec::new());
        for _ in 0..n * k / QK {
            let (d, m) = (half_bits(0.01 + lcg(&mut seed).abs() * 0.02), half_bits(-0.05 - lcg(&mut seed).abs() * 0.1));
            bytes.extend(d.to_le_bytes());
            bytes.extend(m.to_le_bytes());
            let q: Vec<u8> = (0..QK).map(|_| ((lcg(&mut seed) + 0.5) * 15.99) as u8).collect();
            bytes.extend((0..16).map(|j| q[j] | (q[j + 16] << 4)));
            dense.extend(q.iter().map(|&v| v as f32 * f16_to_f32(d) + f16_to_f32(m)));
        }
        let mat = Q8Matrix::from_blocks(Blocks::Q4_1, &bytes, n, k).unwrap();
        let rows: Vec<Vec<f32>> = (0..3).map(|_| (0..k).map(|_| lcg(&mut seed) * 2.0).collect()).collect();
        let x: Vec<f32> = rows.concat();
        if Kernel::available().contains(&Kernel::Avx512) {
            assert_eq!(mat.matmul_on(Kernel::Avx512, &x, 3), mat.matmul_on(Kernel::Avx2, &x, 3), "Q4_1: same bits");
        }
        for &kernel in Kernel::available() {
            let got = mat.matmul_on(kernel, &x, 3);
            for (r, row) in rows.iter().enumerate() {
                let alone = mat.matmul_on(kernel, row, 1);
                assert_eq!(&got[r * n..(r + 1) * n], &alone[..], "{kernel:?} row {r}: batch-independent");
                for j in 0..n {
                    let want: f32 = (0..k).map(|i| row[i] * dense[j * k + i]).sum();
                    let scale: f32 = (0..k).map(|i| (row[i] * dense[j * k + i]).abs()).sum();
                    assert!(
                        (alone[j] - want).abs() <= 0.01 * scale + 1e-4,
                        "{kernel:?} column {j}: {} vs {want}",
                        alone[j]
                    );
                    let acts = quantize(row, k);
                    let mut o = [0f32];
                    dot_rows_scalar(&mat.row(j), &acts, k, &mut o);
                    assert!(
                        (alone[j] - o[0]).abs() <= 1e-4 * (1.0 + o[0].abs()),
                        "{kernel:?} column {j}: {} vs scalar {}",
                        alone[j],
                        o[0]
                    );
                }
            }
        }
    }
}
