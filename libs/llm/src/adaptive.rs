//! Pacing from the provider's own rate-limit headers (`x-ratelimit-{limit,remaining,reset}-
//! {requests,tokens}`, as OpenAI, vLLM gateways and most proxies send them, and the IETF draft's
//! `ratelimit-*`), so a pool runs at the real limit instead of discovering it through 429s.
//!
//! Each limit is modelled as the token bucket the headers describe: `remaining` is its level,
//! `limit` its capacity and `reset` the time to refill from `remaining` to `limit`, which gives
//! the refill rate. Admissions draw from a local copy of the bucket; every response re-anchors the
//! copy between what the server saw (`remaining`) and that minus the requests still in flight
//! (which the server may not have counted yet), so the model neither drifts optimistic nor
//! throttles itself on its own in-flight requests. With no headers seen, nothing waits.

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// One limit as a response reported it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Reading {
    pub limit: Option<f64>,
    pub remaining: f64,
    /// Time until the bucket is full again.
    pub reset: Option<Duration>,
}

/// The request and token readings of one response (either may be absent).
pub fn readings(h: &reqwest::header::HeaderMap) -> (Option<Reading>, Option<Reading>) {
    let get = |k: &str| h.get(k).and_then(|v| v.to_str().ok()).map(str::trim);
    let reading = |limit: &str, remaining: &str, reset: &str| {
        let remaining = get(remaining)?.parse::<f64>().ok().filter(|r| r.is_finite() && *r >= 0.0)?;
        Some(Reading {
            limit: get(limit).and_then(|l| l.parse::<f64>().ok()).filter(|l| l.is_finite() && *l > 0.0),
            remaining,
            reset: get(reset).and_then(parse_reset),
        })
    };
    let requests =
        reading("x-ratelimit-limit-requests", "x-ratelimit-remaining-requests", "x-ratelimit-reset-requests")
            .or_else(|| reading("ratelimit-limit", "ratelimit-remaining", "ratelimit-reset"));
    let tokens = reading("x-ratelimit-limit-tokens", "x-ratelimit-remaining-tokens", "x-ratelimit-reset-tokens");
    (requests, tokens)
}

/// `6m0s`, `1h2m3.5s`, `20ms`, `0.5s`, or plain seconds (`1.5`), as providers write it.
pub fn parse_reset(s: &str) -> Option<Duration> {
    let s = s.trim();
    if let Ok(secs) = s.parse::<f64>() {
        return (secs.is_finite() && secs >= 0.0).then(|| Duration::from_secs_f64(secs.min(86_400.0)));
    }
    let mut total = 0.0;
    let mut rest = s;
    while !rest.is_empty() {
        let digits = rest.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(rest.len());
        let n: f64 = rest[..digits].parse().ok()?;
        rest = &rest[digits..];
        let unit = rest.find(|c: char| c.is_ascii_digit() || c == '.').unwrap_or(rest.len());
        total += n * match &rest[..unit] {
            "h" => 3600.0,
            "m" => 60.0,
            "s" => 1.0,
            "ms" => 1e-3,
            "us" | "µs" => 1e-6,
            "ns" => 1e-9,
            _ => return None,
        };
        rest = &rest[unit..];
    }
    (total.is_finite() && total >= 0.0).then(|| Duration::from_secs_f64(total.min(86_400.0)))
}

/// The local copy of one bucket.
#[derive(Debug)]
struct Bucket {
    /// False until a response carried this limit's headers: then admissions never wait.
    known: bool,
    level: f64,
    capacity: f64,
    /// Refill per second, when the headers give enough to know it.
    rate: Option<f64>,
    /// When a bucket without a known rate is full again.
    full_at: Option<Instant>,
    at: Instant,
    /// Admitted and not yet answered: what the server may not have counted.
    in_flight: f64,
}

impl Bucket {
    fn new() -> Bucket {
        Bucket {
            known: false,
            level: 0.0,
            capacity: f64::INFINITY,
            rate: None,
            full_at: None,
            at: Instant::now(),
            in_flight: 0.0,
        }
    }

    fn refill(&mut self, now: Instant) {
        if let Some(r) = self.rate {
            self.level = (self.level + r * now.duration_since(self.at).as_secs_f64()).min(self.capacity);
        } else if self.full_at.is_some_and(|t| now >= t) {
            // Nothing says how it refills before that; after it, the server's next answer will.
            self.known = false;
            self.full_at = None;
        }
        self.at = now;
    }

    /// Takes `cost` now, or says how long to wait before asking again.
    fn take(&mut self, cost: f64, now: Instant) -> Option<Duration> {
        self.refill(now);
        // A request larger than the whole bucket goes alone, once the bucket is full.
        let need = cost.min(self.capacity);
        if !self.known || self.level >= need {
            self.level -= cost;
            self.in_flight += cost;
            return None;
        }
        Some(match (self.rate, self.full_at) {
            (Some(r), _) if r > 0.0 => Duration::from_secs_f64(((need - self.level) / r).min(60.0)),
            (_, Some(t)) => t.saturating_duration_since(now).min(Duration::from_secs(60)),
            _ => Duration::from_millis(100),
        })
    }

    /// `cost` was answered; `r`, if the answer carried it, is the server's view.
    fn observe(&mut self, cost: f64, r: Option<Reading>, now: Instant) {
        self.in_flight = (self.in_flight - cost).max(0.0);
        let Some(r) = r else { return };
        self.refill(now);
        if let Some(limit) = r.limit {
            self.capacity = limit;
            // The refill rate is read off a well-emptied bucket: there rounding of `remaining`
            // and of `reset` matters least.
            if let Some(reset) = r.reset.filter(|d| !d.is_zero()) {
                let missing = limit - r.remaining;
                if missing >= 1.0 && (self.rate.is_none() || missing >= limit / 4.0) {
                    self.rate = Some(missing / reset.as_secs_f64());
                }
            }
        }
        let (hi, lo) = (r.remaining, r.remaining - self.in_flight);
        self.level = if self.known { self.level.clamp(lo, hi) } else { lo };
        self.known = true;
        self.full_at = r.reset.map(|d| now + d);
    }
}

/// Both limits of one endpoint.
#[derive(Debug)]
pub struct Adaptive {
    requests: Mutex<Bucket>,
    tokens: Mutex<Bucket>,
}

impl Default for Adaptive {
    fn default() -> Self {
        Adaptive { requests: Mutex::new(Bucket::new()), tokens: Mutex::new(Bucket::new()) }
    }
}

impl Adaptive {
    /// Waits until one request of about `tokens` tokens fits both buckets, then takes it. The
    /// ticket must see the answer's headers; dropped unseen (timeout, transport failure), it
    /// still ends the request's time in flight.
    pub async fn acquire(&self, tokens: u64) -> Ticket<'_> {
        for (bucket, cost) in [(&self.requests, 1.0), (&self.tokens, tokens as f64)] {
            loop {
                let wait = bucket.lock().unwrap().take(cost, Instant::now());
                match wait {
                    None => break,
                    Some(d) => tokio::time::sleep(d.max(Duration::from_millis(1))).await,
                }
            }
        }
        Ticket { adaptive: self, tokens, done: false }
    }

    fn observe(&self, tokens: u64, headers: Option<&reqwest::header::HeaderMap>) {
        let (rq, tk) = headers.map(readings).unwrap_or((None, None));
        let now = Instant::now();
        self.requests.lock().unwrap().observe(1.0, rq, now);
        self.tokens.lock().unwrap().observe(tokens as f64, tk, now);
    }
}

/// One admitted request.
pub struct Ticket<'a> {
    adaptive: &'a Adaptive,
    tokens: u64,
    done: bool,
}

impl Ticket<'_> {
    /// The server answered (any status) with these headers.
    pub fn answered(&mut self, headers: &reqwest::header::HeaderMap) {
        if !self.done {
            self.done = true;
            self.adaptive.observe(self.tokens, Some(headers));
        }
    }
}

impl Drop for Ticket<'_> {
    fn drop(&mut self) {
        if !self.done {
            self.adaptive.observe(self.tokens, None);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reset_durations_as_providers_write_them() {
        let s = |x: f64| Some(Duration::from_secs_f64(x));
        assert_eq!(parse_reset("6m0s"), s(360.0));
        assert_eq!(parse_reset("1h2m3.5s"), s(3723.5));
        assert_eq!(parse_reset("20ms"), s(0.02));
        assert_eq!(parse_reset("0.5s"), s(0.5));
        assert_eq!(parse_reset("1.5"), s(1.5));
        assert_eq!(parse_reset("soon"), None);
        assert_eq!(parse_reset("5x"), None);
        assert_eq!(parse_reset("-1"), None);
    }

    #[test]
    fn a_drained_bucket_waits_for_its_refill_and_an_unknown_one_never_waits() {
        let t0 = Instant::now();
        let mut b = Bucket::new();
        assert_eq!(b.take(1.0, t0), None, "no headers seen: no wait");
        // 10 per second, 0 left of 10, 1 s to full.
        let r = Reading { limit: Some(10.0), remaining: 0.0, reset: Some(Duration::from_secs(1)) };
        b.observe(1.0, Some(r), t0);
        assert_eq!(b.rate, Some(10.0));
        let wait = b.take(1.0, t0).expect("empty bucket waits");
        assert!((wait.as_secs_f64() - 0.1).abs() < 1e-9, "{wait:?}");
        assert_eq!(b.take(1.0, t0 + Duration::from_millis(100)), None);
    }

    #[test]
    fn in_flight_requests_are_counted_until_the_server_has_seen_them() {
        let t0 = Instant::now();
        let mut b = Bucket::new();
        b.take(1.0, t0);
        b.take(1.0, t0);
        b.take(1.0, t0);
        // The first answer says 5 left, two others still in flight: at most 5, at least 3.
        let r = Reading { limit: Some(8.0), remaining: 5.0, reset: None };
        b.observe(1.0, Some(r), t0);
        assert_eq!(b.level, 3.0);
        // A later answer saying 4 left, one still in flight: the local 3 lies within [3, 4].
        b.observe(1.0, Some(Reading { remaining: 4.0, ..r }), t0);
        assert_eq!(b.level, 3.0);
        // Someone else shares the key: the server says 1, which wins.
        b.observe(1.0, Some(Reading { remaining: 1.0, ..r }), t0);
        assert_eq!(b.level, 1.0);
    }

    #[test]
    fn headers_are_read_in_both_spellings() {
        let mut h = reqwest::header::HeaderMap::new();
        h.insert("x-ratelimit-limit-requests", "60".parse().unwrap());
        h.insert("x-ratelimit-remaining-requests", "59".parse().unwrap());
        h.insert("x-ratelimit-reset-requests", "1s".parse().unwrap());
        h.insert("x-ratelimit-remaining-tokens", "149984".parse().unwrap());
        let (rq, tk) = readings(&h);
        assert_eq!(rq, Some(Reading { limit: Some(60.0), remaining: 59.0, reset: Some(Duration::from_secs(1)) }));
        assert_eq!(tk, Some(Reading { limit: None, remaining: 149984.0, reset: None }));
        let mut d = reqwest::header::HeaderMap::new();
        d.insert("ratelimit-remaining", "3".parse().unwrap());
        d.insert("ratelimit-reset", "2".parse().unwrap());
        assert_eq!(readings(&d).0.unwrap().reset, Some(Duration::from_secs(2)));
        assert_eq!(readings(&reqwest::header::HeaderMap::new()), (None, None));
    }
}
