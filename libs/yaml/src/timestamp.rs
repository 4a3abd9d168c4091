//! `!!timestamp`, as ruamel.yaml's safe loader resolves and constructs it (Python `date`/`datetime`).

use crate::cursor::Cursor;

/// A date or date-time; `python_str` prints what Python's `str()` (and so `json.dumps(default=str)`) does.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Timestamp {
    pub year: u16,
    pub month: u8,
    pub day: u8,
    pub time: Option<TimeOfDay>,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct TimeOfDay {
    pub hour: u8,
    pub minute: u8,
    pub second: u8,
    pub microsecond: u32,
    /// UTC offset in minutes for aware date-times (`Z` is 0); None for naive ones.
    pub offset_minutes: Option<i32>,
}

impl Cursor<'_> {
    fn digits(&mut self, min: usize, max: usize) -> Option<u32> {
        let start = self.i;
        while self.i < self.s.len() && self.i - start < max && self.s[self.i].is_ascii_digit() {
            self.i += 1;
        }
        if self.i - start < min {
            return None;
        }
        std::str::from_utf8(&self.s[start..self.i]).ok()?.parse().ok()
    }
    fn blanks(&mut self) -> usize {
        self.many(|c| matches!(c, b' ' | b'\t'))
    }
}

struct Raw {
    year: u32,
    month: u32,
    day: u32,
    time: Option<RawTime>,
}

struct RawTime {
    hour: u32,
    minute: u32,
    second: u32,
    fraction: Option<String>,
    tz: Option<RawTz>,
}

enum RawTz {
    Z,
    Offset { sign: i32, hours: u32, minutes: u32 },
}

/// Matches ruamel's construction regex (`util.timestamp_regexp`); `strict_date` adds the
/// resolver's rule that a date without a time has two-digit month and day.
fn scan(text: &str, strict_date: bool) -> Option<Raw> {
    let mut c = Cursor::new(text.as_bytes());
    let year = c.digits(4, 4)?;
    if !c.eat(b'-') {
        return None;
    }
    let month_start = c.i;
    let month = c.digits(1, 2)?;
    let month_len = c.i - month_start;
    if !c.eat(b'-') {
        return None;
    }
    let day_start = c.i;
    let day = c.digits(1, 2)?;
    let day_len = c.i - day_start;
    if c.end() {
        if strict_date && (month_len != 2 || day_len != 2) {
            return None;
        }
        return Some(Raw { year, month, day, time: None });
    }
    if !(c.eat(b'T') || c.eat(b't')) && c.blanks() == 0 {
        return None;
    }
    let hour = c.digits(1, 2)?;
    if !c.eat(b':') {
        return None;
    }
    let minute = c.digits(2, 2)?;
    if !c.eat(b':') {
        return None;
    }
    let second = c.digits(2, 2)?;
    let mut fraction = None;
    if c.eat(b'.') {
        let start = c.i;
        while c.i < c.s.len() && c.s[c.i].is_ascii_digit() {
            c.i += 1;
        }
        fraction = Some(text[start..c.i].to_string());
    }
    let mut tz = None;
    if !c.end() {
        c.blanks();
        if c.eat(b'Z') {
            tz = Some(RawTz::Z);
        } else {
            let sign = if c.eat(b'+') {
                1
            } else if c.eat(b'-') {
                -1
            } else {
                return None;
            };
            let h = c.digits(1, 2)?;
            let m = if c.eat(b':') { c.digits(2, 2)? } else { 0 };
            tz = Some(RawTz::Offset { sign, hours: h, minutes: m });
        }
        if !c.end() {
            return None;
        }
    }
    Some(Raw { year, month, day, time: Some(RawTime { hour, minute, second, fraction, tz }) })
}

fn days_in_month(year: u32, month: u32) -> u32 {
    match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        _ if (year.is_multiple_of(4) && !year.is_multiple_of(100)) || year.is_multiple_of(400) => 29,
        _ => 28,
    }
}

impl Timestamp {
    /// Whether an untagged plain scalar resolves to `!!timestamp` under ruamel's resolver.
    pub(crate) fn resolves(text: &str) -> bool {
        scan(text, true).is_some()
    }

    /// Constructs as ruamel's `create_timestamp` does; Err carries Python's ValueError text.
    pub(crate) fn construct(text: &str) -> Result<Timestamp, String> {
        let raw = scan(text, false).ok_or_else(|| format!("failed to construct timestamp from \"{text}\""))?;
        if !(1..=9999).contains(&raw.year) {
            return Err(format!("year {} is out of range", raw.year));
        }
        if !(1..=12).contains(&raw.month) {
            return Err("month must be in 1..12".into());
        }
        if raw.day < 1 || raw.day > days_in_month(raw.year, raw.month) {
            return Err("day is out of range for month".into());
        }
        let mut ts = Timestamp { year: raw.year as u16, month: raw.month as u8, day: raw.day as u8, time: None };
        let Some(RawTime { hour, minute, second, fraction, tz }) = raw.time else {
            return Ok(ts);
        };
        if hour > 23 {
            return Err("hour must be in 0..23".into());
        }
        if minute > 59 {
            return Err("minute must be in 0..59".into());
        }
        if second > 59 {
            return Err("second must be in 0..59".into());
        }
        // ruamel keeps six fraction digits, rounds up on the seventh only, and turns an
        // overflow into "fraction 0, plus one second".
        let mut micro = 0u32;
        let mut carry_second = false;
        if let Some(f) = fraction.filter(|f| !f.is_empty()) {
            let mut six: String = f.chars().take(6).collect();
            while six.len() < 6 {
                six.push('0');
            }
            let mut frac: u32 = six.parse().expect("six ASCII digits");
            if f.len() > 6 && f.as_bytes()[6] > b'4' {
                frac += 1;
            }
            if frac > 999_999 {
                carry_second = true;
            } else {
                micro = frac;
            }
        }
        let offset_minutes = match tz {
            None => None,
            Some(RawTz::Z) => Some(0),
            Some(RawTz::Offset { sign, hours, minutes }) => {
                let total = (hours * 60 + minutes) as i32;
                if total >= 24 * 60 {
                    return Err(
                        "offset must be a timedelta strictly between -timedelta(hours=24) and timedelta(hours=24)"
                            .into(),
                    );
                }
                Some(sign * total)
            }
        };
        ts.time = Some(TimeOfDay {
            hour: hour as u8,
            minute: minute as u8,
            second: second as u8,
            microsecond: micro,
            offset_minutes,
        });
        if carry_second {
            ts.add_second()?;
        }
        Ok(ts)
    }

    fn add_second(&mut self) -> Result<(), String> {
        let t = self.time.as_mut().expect("only date-times carry a second");
        t.second += 1;
        if t.second < 60 {
            return Ok(());
        }
        t.second = 0;
        t.minute += 1;
        if t.minute < 60 {
            return Ok(());
        }
        t.minute = 0;
        t.hour += 1;
        if t.hour < 24 {
            return Ok(());
        }
        t.hour = 0;
        self.day += 1;
        if u32::from(self.day) <= days_in_month(u32::from(self.year), u32::from(self.month)) {
            return Ok(());
        }
        self.day = 1;
        self.month += 1;
        if self.month <= 12 {
            return Ok(());
        }
        self.month = 1;
        if self.year == 9999 {
            return Err("date value out of range".into());
        }
        self.year += 1;
        Ok(())
    }

    /// Python's `str(date)` / `str(datetime)` (`isoformat(' ')`).
    pub fn python_str(&self) -> String {
        let mut s = format!("{:04}-{:02}-{:02}", self.year, self.month, self.day);
        if let Some(t) = &self.time {
            s.push_str(&format!(" {:02}:{:02}:{:02}", t.hour, t.minute, t.second));
            if t.microsecond != 0 {
                s.push_str(&format!(".{:06}", t.microsecond));
            }
            if let Some(off) = t.offset_minutes {
                let sign = if off < 0 { '-' } else { '+' };
                s.push_str(&format!("{sign}{:02}:{:02}", off.abs() / 60, off.abs() % 60));
            }
        }
        s
    }

    /// Microseconds since 0001-01-01 00:00 (UTC for aware values), for Python's equality:
    /// aware date-times compare by instant.
    pub(crate) fn instant_micros(&self) -> i64 {
        let (y, m, d) = (i64::from(self.year), i64::from(self.month), i64::from(self.day));
        // Days from civil (proleptic Gregorian).
        let yy = if m <= 2 { y - 1 } else { y };
        let era = yy.div_euclid(400);
        let yoe = yy - era * 400;
        let mp = (m + 9) % 12;
        let doy = (153 * mp + 2) / 5 + d - 1;
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
        let days = era * 146_097 + doe;
        let mut micros = days * 86_400_000_000;
        if let Some(t) = &self.time {
            micros += (i64::from(t.hour) * 3600 + i64::from(t.minute) * 60 + i64::from(t.second)) * 1_000_000
                + i64::from(t.microsecond);
            if let Some(off) = t.offset_minutes {
                micros -= i64::from(off) * 60_000_000;
            }
        }
        micros
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(t: &str) -> String {
        Timestamp::construct(t).map(|t| t.python_str()).unwrap_or_else(|e| format!("ERR {e}"))
    }

    #[test]
    fn matches_ruamel_and_python_str() {
        assert_eq!(s("2024-01-02"), "2024-01-02");
        assert_eq!(s("2024-01-02 10:11:12"), "2024-01-02 10:11:12");
        assert_eq!(s("2024-01-02T10:11:12.5Z"), "2024-01-02 10:11:12.500000+00:00");
        assert_eq!(s("2024-01-02t10:11:12+05:30"), "2024-01-02 10:11:12+05:30");
        assert_eq!(s("2001-1-2 3:04:05"), "2001-01-02 03:04:05");
        assert_eq!(s("2001-01-02   3:04:05.123456789 -5"), "2001-01-02 03:04:05.123457-05:00");
        assert_eq!(s("2001-01-02 03:04:05 Z"), "2001-01-02 03:04:05+00:00");
        assert_eq!(s("2001-12-31 23:59:59.9999996"), "2002-01-01 00:00:00");
        assert!(s("2024-13-45").starts_with("ERR"));
        assert!(s("2001-01-02T24:00:00").starts_with("ERR"));
        assert!(s("2023-02-29").starts_with("ERR"));
        assert_eq!(s("2024-02-29"), "2024-02-29");
        assert!(Timestamp::resolves("2024-01-02"));
        assert!(!Timestamp::resolves("2024-1-02"));
        assert!(Timestamp::resolves("2024-1-2 1:02:03"));
        assert!(!Timestamp::resolves("2024-01-02x"));
        assert!(!Timestamp::resolves("2024-01-02 10:11"));
    }

    #[test]
    fn aware_instants_compare_in_utc() {
        let a = Timestamp::construct("2024-01-02 10:00:00+02:00").unwrap();
        let b = Timestamp::construct("2024-01-02 08:00:00Z").unwrap();
        assert_eq!(a.instant_micros(), b.instant_micros());
    }
}
