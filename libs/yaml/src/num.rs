//! Python-compatible numbers: unbounded ints (YAML ints load as Python `int`) and `float.__repr__`.

use std::cmp::Ordering;

/// Python's `sys.int_info.default_max_str_digits`: `int(str)` and `str(int)` refuse more digits.
pub const PY_MAX_STR_DIGITS: usize = 4300;

/// An arbitrary-precision integer, because ruamel.yaml loads YAML ints as unbounded Python ints.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Int {
    negative: bool,
    /// Magnitude, little-endian base 2^32, without high zero limbs (zero is empty).
    limbs: Vec<u32>,
}

impl Int {
    pub fn zero() -> Int {
        Int { negative: false, limbs: Vec::new() }
    }

    pub fn from_i64(v: i64) -> Int {
        let mag = v.unsigned_abs();
        let mut i = Int { negative: v < 0, limbs: vec![mag as u32, (mag >> 32) as u32] };
        i.normalize();
        i
    }

    fn normalize(&mut self) {
        while self.limbs.last() == Some(&0) {
            self.limbs.pop();
        }
        if self.limbs.is_empty() {
            self.negative = false;
        }
    }

    /// Parses unsigned digits of `radix` (2, 8, 10 or 16); the caller validated them.
    pub(crate) fn from_digits(digits: &str, radix: u32, negative: bool) -> Option<Int> {
        let mut limbs: Vec<u32> = Vec::new();
        if radix == 10 {
            // Multiply-add in chunks of 9 decimal digits.
            let bytes = digits.as_bytes();
            let first = bytes.len() % 9;
            let mut chunks: Vec<&[u8]> = Vec::new();
            if first > 0 {
                chunks.push(&bytes[..first]);
            }
            chunks.extend(bytes[first..].chunks(9));
            for chunk in chunks {
                let mut add: u64 = 0;
                for &b in chunk {
                    add = add * 10 + u64::from(b.checked_sub(b'0').filter(|d| *d < 10)?);
                }
                let mul = 10u64.pow(chunk.len() as u32);
                let mut carry = add;
                for limb in limbs.iter_mut() {
                    let v = u64::from(*limb) * mul + carry;
                    *limb = v as u32;
                    carry = v >> 32;
                }
                while carry > 0 {
                    limbs.push(carry as u32);
                    carry >>= 32;
                }
            }
        } else {
            let bits = match radix {
                2 => 1,
                8 => 3,
                16 => 4,
                _ => return None,
            };
            let mut acc: u64 = 0;
            let mut nacc = 0u32;
            for c in digits.chars().rev() {
                let d = c.to_digit(radix)?;
                acc |= u64::from(d) << nacc;
                nacc += bits;
                if nacc >= 32 {
                    limbs.push(acc as u32);
                    acc >>= 32;
                    nacc -= 32;
                }
            }
            if nacc > 0 {
                limbs.push(acc as u32);
            }
        }
        let mut i = Int { negative, limbs };
        i.normalize();
        Some(i)
    }

    /// The exact integer value of an integral finite float.
    pub(crate) fn from_integral_f64(f: f64) -> Int {
        debug_assert!(f.is_finite() && f.fract() == 0.0);
        let bits = f.to_bits();
        let negative = bits >> 63 == 1;
        let exp = ((bits >> 52) & 0x7ff) as i64;
        let frac = bits & ((1u64 << 52) - 1);
        if exp == 0 {
            // Subnormals are never integral except zero.
            return Int::zero();
        }
        let mantissa = frac | (1u64 << 52);
        let shift = exp - 1075;
        let mut i = if shift >= 0 {
            let limb_shift = (shift / 32) as usize;
            let bit_shift = (shift % 32) as u32;
            let mut limbs = vec![0u32; limb_shift];
            let wide = u128::from(mantissa) << bit_shift;
            limbs.extend([wide as u32, (wide >> 32) as u32, (wide >> 64) as u32]);
            Int { negative, limbs }
        } else {
            let m = mantissa >> (-shift).min(63);
            Int { negative, limbs: vec![m as u32, (m >> 32) as u32] }
        };
        i.normalize();
        i
    }

    pub fn is_negative(&self) -> bool {
        self.negative
    }

    pub fn is_zero(&self) -> bool {
        self.limbs.is_empty()
    }

    pub fn as_i64(&self) -> Option<i64> {
        if self.limbs.len() > 2 {
            return None;
        }
        let mag = self.limbs.iter().rev().fold(0u64, |a, &l| (a << 32) | u64::from(l));
        if self.negative {
            if mag <= 1u64 << 63 {
                Some((mag as i64).wrapping_neg())
            } else {
                None
            }
        } else {
            i64::try_from(mag).ok()
        }
    }

    pub fn as_u64(&self) -> Option<u64> {
        if self.negative || self.limbs.len() > 2 {
            return None;
        }
        Some(self.limbs.iter().rev().fold(0u64, |a, &l| (a << 32) | u64::from(l)))
    }

    fn bit_len(&self) -> u64 {
        match self.limbs.last() {
            None => 0,
            Some(top) => (self.limbs.len() as u64 - 1) * 32 + u64::from(32 - top.leading_zeros()),
        }
    }

    /// Decimal digits as Python's `str(int)` prints them, or None where Python raises
    /// because the result would exceed its 4300-digit conversion limit (sign included).
    pub fn to_decimal(&self) -> Option<String> {
        // 2^14300 already has more than 4300 decimal digits: refuse before the quadratic work.
        if self.bit_len() > 14_300 {
            return None;
        }
        let mut mag = self.limbs.clone();
        let mut chunks: Vec<u32> = Vec::new();
        while !mag.is_empty() {
            let mut rem: u64 = 0;
            for limb in mag.iter_mut().rev() {
                let cur = (rem << 32) | u64::from(*limb);
                *limb = (cur / 1_000_000_000) as u32;
                rem = cur % 1_000_000_000;
            }
            chunks.push(rem as u32);
            while mag.last() == Some(&0) {
                mag.pop();
            }
        }
        let mut s = String::new();
        if self.negative {
            s.push('-');
        }
        match chunks.pop() {
            None => s.push('0'),
            Some(top) => {
                s.push_str(&top.to_string());
                for c in chunks.iter().rev() {
                    s.push_str(&format!("{c:09}"));
                }
            }
        }
        if s.len() > PY_MAX_STR_DIGITS {
            return None;
        }
        Some(s)
    }

    /// Nearest f64 (as Python's `float(int)`), saturating at ±f64::MAX where Python overflows.
    pub fn to_f64(&self) -> f64 {
        if let Some(v) = self.as_i64() {
            return v as f64;
        }
        let f = match self.to_decimal().and_then(|s| s.parse::<f64>().ok()) {
            Some(f) if f.is_finite() => f,
            _ => f64::MAX,
        };
        if self.negative {
            -f.abs()
        } else {
            f
        }
    }

    fn cmp_mag(&self, other: &Int) -> Ordering {
        self.limbs.len().cmp(&other.limbs.len()).then_with(|| self.limbs.iter().rev().cmp(other.limbs.iter().rev()))
    }

    /// Exact comparison with a float, as Python compares `int` and `float`; None for NaN.
    pub(crate) fn cmp_f64(&self, f: f64) -> Option<Ordering> {
        if f.is_nan() {
            return None;
        }
        if f.is_infinite() {
            return Some(if f > 0.0 { Ordering::Less } else { Ordering::Greater });
        }
        let fl = f.floor();
        match self.cmp(&Int::from_integral_f64(fl)) {
            Ordering::Equal if f > fl => Some(Ordering::Less),
            o => Some(o),
        }
    }
}

impl Ord for Int {
    fn cmp(&self, other: &Int) -> Ordering {
        match (self.negative, other.negative) {
            (false, true) => Ordering::Greater,
            (true, false) => Ordering::Less,
            (false, false) => self.cmp_mag(other),
            (true, true) => other.cmp_mag(self),
        }
    }
}

impl PartialOrd for Int {
    fn partial_cmp(&self, other: &Int) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// `float.__repr__`: shortest round-trip digits, exponent form outside 1e-4 ≤ |x| < 1e16.
pub fn py_float_repr(f: f64) -> String {
    if f.is_nan() {
        return "nan".into();
    }
    if f.is_infinite() {
        return if f > 0.0 { "inf".into() } else { "-inf".into() };
    }
    if f == 0.0 {
        return if f.is_sign_negative() { "-0.0".into() } else { "0.0".into() };
    }
    // Rust's `{:e}` prints the same shortest round-trip digits Python uses.
    let sci = format!("{:e}", f.abs());
    let (mant, exp) = sci.split_once('e').expect("LowerExp output has an exponent");
    let exp: i32 = exp.parse().expect("LowerExp exponent is an integer");
    let digits: String = mant.chars().filter(|c| *c != '.').collect();
    let decpt = exp + 1;
    let mut out = String::new();
    if f < 0.0 {
        out.push('-');
    }
    if !(-4 < decpt && decpt <= 16) {
        out.push_str(&digits[..1]);
        if digits.len() > 1 {
            out.push('.');
            out.push_str(&digits[1..]);
        }
        out.push('e');
        out.push(if exp < 0 { '-' } else { '+' });
        out.push_str(&format!("{:02}", exp.abs()));
    } else if decpt <= 0 {
        out.push_str("0.");
        out.extend(std::iter::repeat_n('0', (-decpt) as usize));
        out.push_str(&digits);
    } else {
        let decpt = decpt as usize;
        if digits.len() <= decpt {
            out.push_str(&digits);
            out.extend(std::iter::repeat_n('0', decpt - digits.len()));
            out.push_str(".0");
        } else {
            out.push_str(&digits[..decpt]);
            out.push('.');
            out.push_str(&digits[decpt..]);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn float_repr_matches_python() {
        for (f, want) in [
            (1.0, "1.0"),
            (1e-5, "1e-05"),
            (0.0001, "0.0001"),
            (1e16, "1e+16"),
            (1.5e16, "1.5e+16"),
            (123456789.123, "123456789.123"),
            (9999999999999998.0, "9999999999999998.0"),
            (0.1, "0.1"),
            (-2.5, "-2.5"),
            (1e300, "1e+300"),
            (5e-324, "5e-324"),
            (-0.0, "-0.0"),
            (100000.0, "100000.0"),
            (12.5, "12.5"),
        ] {
            assert_eq!(py_float_repr(f), want, "{f}");
        }
    }

    #[test]
    fn big_int_round_trips_and_python_limit() {
        let i = Int::from_digits("123456789012345678901234567890", 10, true).unwrap();
        assert_eq!(i.to_decimal().unwrap(), "-123456789012345678901234567890");
        let h = Int::from_digits("1F", 16, false).unwrap();
        assert_eq!(h.as_i64(), Some(31));
        assert_eq!(Int::from_digits("17", 8, false).unwrap().as_i64(), Some(15));
        assert_eq!(Int::from_digits("101", 2, false).unwrap().as_i64(), Some(5));
        let huge = Int::from_digits(&"f".repeat(4000), 16, false).unwrap();
        assert_eq!(huge.to_decimal(), None);
        assert_eq!(Int::from_i64(i64::MIN).to_decimal().unwrap(), i64::MIN.to_string());
        assert_eq!(Int::zero().to_decimal().unwrap(), "0");
    }

    #[test]
    fn int_float_comparison_is_exact() {
        let big = Int::from_digits("9007199254740993", 10, false).unwrap(); // 2^53 + 1
        assert_eq!(big.cmp_f64(9007199254740992.0), Some(Ordering::Greater));
        assert_eq!(Int::from_i64(2).cmp_f64(1.5), Some(Ordering::Greater));
        assert_eq!(Int::from_i64(1).cmp_f64(1.5), Some(Ordering::Less));
        assert_eq!(Int::from_i64(-2).cmp_f64(-1.5), Some(Ordering::Less));
        assert_eq!(Int::from_i64(3).cmp_f64(3.0), Some(Ordering::Equal));
        assert_eq!(Int::from_integral_f64(1e20).to_decimal().unwrap(), "100000000000000000000");
        assert_eq!(Int::from_integral_f64(-3.0).as_i64(), Some(-3));
    }
}
