//! Element-wise kernels of the encoder, fused so each activation is read and written once.
//!
//! Every kernel is written as plain loops over fixed 16-lane chunks that LLVM vectorises, with branch-free
//! `exp`/`erf` approximations (libm's scalar `expf`/`erff` would dominate the run time). The same body is
//! compiled three times, for AVX-512, AVX2+FMA and the baseline, and picked at run time, so the speed does
//! not depend on building with `target-cpu=native`.

const LANES: usize = 16;

macro_rules! dispatch {
    ($(#[$m:meta])* fn $name:ident($($a:ident : $t:ty),*) $body:block) => {
        $(#[$m])*
        pub fn $name($($a: $t),*) {
            #[inline(always)]
            fn body($($a: $t),*) $body
            #[cfg(target_arch = "x86_64")]
            {
                #[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,avx2,fma,f16c")]
                unsafe fn v4($($a: $t),*) { body($($a),*) }
                #[target_feature(enable = "avx2,fma,f16c")]
                unsafe fn v3($($a: $t),*) { body($($a),*) }
                if std::arch::is_x86_feature_detected!("avx512f")
                    && std::arch::is_x86_feature_detected!("avx512bw")
                    && std::arch::is_x86_feature_detected!("avx512dq")
                    && std::arch::is_x86_feature_detected!("avx512vl")
                {
                    // SAFETY: the features the function was compiled for were detected on this CPU.
                    return unsafe { v4($($a),*) };
                }
                if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma") {
                    // SAFETY: as above.
                    return unsafe { v3($($a),*) };
                }
            }
            body($($a),*)
        }
    };
}

/// e^x for x in the softmax/erf range, Cephes' single-precision polynomial (≈1 ulp), branch-free.
#[inline(always)]
fn exp(x: f32) -> f32 {
    let x = x.clamp(-87.0, 88.0);
    let n = (x * std::f32::consts::LOG2_E + 0.5).floor();
    let r = x - n * 0.693_359_4 + n * 2.121_944_4e-4;
    let z = r * r;
    let p = ((((1.987_569_1e-4 * r + 1.398_199_9e-3) * r + 8.333_452e-3) * r + 4.166_579_6e-2) * r + 1.666_666_5e-1)
        * r
        + 0.5;
    let y = p * z + r + 1.0;
    // `as i32` saturates (NaN → 0), which LLVM will not vectorise; n is an integer in [-126, 128] here.
    // SAFETY: x is clamped above, so n is finite and within i32.
    let e = unsafe { n.to_int_unchecked::<i32>() };
    y * f32::from_bits((e.wrapping_add(127) as u32) << 23)
}

/// Exact-erf GELU (BERT's "gelu"), erf by Abramowitz–Stegun 7.1.26 (|error| < 1.5e-7), as PyTorch's
/// vectorised CPU kernel does.
#[inline(always)]
fn gelu(x: f32) -> f32 {
    let z = x * std::f32::consts::FRAC_1_SQRT_2;
    let a = z.abs();
    let t = 1.0 / (1.0 + 0.327_591_1 * a);
    let poly = ((((1.061_405_4 * t - 1.453_152_1) * t + 1.421_413_7) * t - 0.284_496_72) * t + 0.254_829_6) * t;
    let erf_abs = 1.0 - poly * exp(-a * a);
    let erf = erf_abs.copysign(z);
    0.5 * x * (1.0 + erf)
}

#[inline(always)]
fn sum(x: &[f32]) -> f32 {
    let mut acc = [0f32; LANES];
    let chunks = x.chunks_exact(LANES);
    let rest = chunks.remainder();
    for c in chunks {
        for i in 0..LANES {
            acc[i] += c[i];
        }
    }
    acc.iter().sum::<f32>() + rest.iter().sum::<f32>()
}

#[inline(always)]
fn max(x: &[f32]) -> f32 {
    let mut acc = [f32::NEG_INFINITY; LANES];
    let chunks = x.chunks_exact(LANES);
    let rest = chunks.remainder();
    for c in chunks {
        for i in 0..LANES {
            acc[i] = if c[i] > acc[i] { c[i] } else { acc[i] };
        }
    }
    acc.iter().chain(rest).fold(f32::NEG_INFINITY, |m, &v| if v > m { v } else { m })
}

dispatch! {
    /// Rows of `x` (width = `bias.len()`) become `x + bias`.
    fn add_bias(x: &mut [f32], bias: &[f32]) {
        for row in x.chunks_exact_mut(bias.len()) {
            for (v, b) in row.iter_mut().zip(bias) {
                *v += b;
            }
        }
    }
}

dispatch! {
    /// Rows of `x` (width = `bias.len()`) become `gelu(x + bias)`.
    fn bias_gelu(x: &mut [f32], bias: &[f32]) {
        for row in x.chunks_exact_mut(bias.len()) {
            for (v, b) in row.iter_mut().zip(bias) {
                *v = gelu(*v + b);
            }
        }
    }
}

dispatch! {
    /// Each row of `scores` (width `n`) becomes softmax(row).
    fn softmax_rows(scores: &mut [f32], n: usize) {
        for row in scores.chunks_exact_mut(n) {
            let m = max(row);
            for v in row.iter_mut() {
                *v = exp(*v - m);
            }
            let inv = 1.0 / sum(row);
            for v in row.iter_mut() {
                *v *= inv;
            }
        }
    }
}

dispatch! {
    /// `x = LayerNorm(x + y + bias)` row-wise, the residual, output-projection bias and norm in one pass.
    fn residual_layernorm(x: &mut [f32], y: &[f32], bias: &[f32], gamma: &[f32], beta: &[f32], eps: f32) {
        let n = gamma.len();
        for (xr, yr) in x.chunks_exact_mut(n).zip(y.chunks_exact(n)) {
            for ((a, b), c) in xr.iter_mut().zip(yr).zip(bias) {
                *a += b + c;
            }
            normalize(xr, gamma, beta, eps);
        }
    }
}

dispatch! {
    /// Plain row-wise LayerNorm (embeddings).
    fn layernorm(x: &mut [f32], gamma: &[f32], beta: &[f32], eps: f32) {
        for xr in x.chunks_exact_mut(gamma.len()) {
            normalize(xr, gamma, beta, eps);
        }
    }
}

#[inline(always)]
fn normalize(xr: &mut [f32], gamma: &[f32], beta: &[f32], eps: f32) {
    let n = xr.len() as f32;
    let mean = sum(xr) / n;
    let mut acc = [0f32; LANES];
    let chunks = xr.chunks_exact(LANES);
    let rest = chunks.remainder();
    for c in chunks {
        for i in 0..LANES {
            let d = c[i] - mean;
            acc[i] += d * d;
        }
    }
    let var = (acc.iter().sum::<f32>() + rest.iter().map(|v| (v - mean) * (v - mean)).sum::<f32>()) / n;
    let inv = 1.0 / (var + eps).sqrt();
    for ((v, g), b) in xr.iter_mut().zip(gamma).zip(beta) {
        *v = (*v - mean) * inv * g + b;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn erf64(x: f64) -> f64 {
        // Reference in f64: Taylor series (cancellation stays below 1e-9 for |x| < 4), asymptotic erfc beyond.
        if x.abs() < 4.0 {
            let mut sum = x;
            let mut term = x;
            let mut k = 0.0;
            loop {
                k += 1.0;
                term *= -x * x / k;
                let add = term / (2.0 * k + 1.0);
                sum += add;
                if add.abs() < 1e-17 {
                    break;
                }
            }
            sum * 2.0 / std::f64::consts::PI.sqrt()
        } else {
            let a = x.abs();
            let a2 = a * a;
            let series = 1.0 - 1.0 / (2.0 * a2) + 3.0 / (4.0 * a2 * a2) - 15.0 / (8.0 * a2 * a2 * a2);
            let erfc = (-a2).exp() / (a * std::f64::consts::PI.sqrt()) * series;
            x.signum() * (1.0 - erfc)
        }
    }

    #[test]
    fn exp_matches_std_closely() {
        let mut worst = 0f64;
        let mut x = -80.0f32;
        while x < 80.0 {
            let rel = ((exp(x) as f64) / (x as f64).exp() - 1.0).abs();
            worst = worst.max(rel);
            x += 0.0137;
        }
        assert!(worst < 3e-7, "worst relative error {worst}");
        assert!(exp(-1000.0) < 1e-37 && exp(-1000.0) >= 0.0);
    }

    #[test]
    fn gelu_matches_erf_definition() {
        let mut x = -12.0f32;
        while x < 12.0 {
            let want = 0.5 * x as f64 * (1.0 + erf64(x as f64 / 2f64.sqrt()));
            let got = gelu(x) as f64;
            assert!((got - want).abs() < 2e-6 * (1.0 + want.abs()), "gelu({x}) = {got}, want {want}");
            x += 0.031;
        }
    }

    #[test]
    fn softmax_and_layernorm_dispatch_agree_with_scalar() {
        let n = 37; // not a multiple of the lane count, so remainders are exercised
        let row: Vec<f32> = (0..2 * n).map(|i| ((i * 7919) % 23) as f32 * 0.37 - 4.0).collect();
        let mut s = row.clone();
        softmax_rows(&mut s, n);
        for r in 0..2 {
            let src = &row[r * n..(r + 1) * n];
            let m = src.iter().cloned().fold(f32::MIN, f32::max) as f64;
            let z: f64 = src.iter().map(|&v| (v as f64 - m).exp()).sum();
            for c in 0..n {
                let want = (src[c] as f64 - m).exp() / z;
                assert!((s[r * n + c] as f64 - want).abs() < 1e-6);
            }
        }
        let gamma: Vec<f32> = (0..n).map(|i| 1.0 + i as f32 * 0.01).collect();
        let beta: Vec<f32> = (0..n).map(|i| i as f32 * -0.02).collect();
        let bias: Vec<f32> = (0..n).map(|i| (i % 5) as f32 * 0.1).collect();
        let y: Vec<f32> = row.iter().map(|v| v * 0.5).collect();
        let mut x = row.clone();
        residual_layernorm(&mut x, &y, &bias, &gamma, &beta, 1e-12);
        for r in 0..2 {
            let v: Vec<f64> = (0..n).map(|c| (row[r * n + c] + y[r * n + c] + bias[c]) as f64).collect();
            let mean = v.iter().sum::<f64>() / n as f64;
            let var = v.iter().map(|a| (a - mean).powi(2)).sum::<f64>() / n as f64;
            for c in 0..n {
                let want = (v[c] - mean) / (var + 1e-12).sqrt() * gamma[c] as f64 + beta[c] as f64;
                assert!((x[r * n + c] as f64 - want).abs() < 1e-5, "{} vs {want}", x[r * n + c]);
            }
        }
        let mut g = row.clone();
        bias_gelu(&mut g, &bias);
        for (i, v) in g.iter().enumerate() {
            assert!((v - gelu(row[i] + bias[i % n])).abs() < 1e-7);
        }
    }
}
