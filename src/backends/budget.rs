//! Budgets (issues 16 and 30): `max_cost` per model (`[[models]]`) and per run
//! (`[stages.generate]`), checked before each request from the price table and a reservation that
//! bounds what the request can cost whatever its text: every prompt byte a token (a byte-level BPE
//! token covers at least one byte) plus a chat template's overhead, and the output cap. A request
//! goes out only if what was spent, what is in flight and its own reservation stay within both
//! budgets; otherwise the partition stops cleanly once its in-flight answers are in (every answer
//! is kept) and says how much was spent and how much is left to ask.
//!
//! An answer is charged its reported usage; one whose reply reports none is charged its
//! reservation, as is every earlier attempt that reached the server and may have been billed, and
//! a failure charges its reservation for every attempt that may have been billed. So what is
//! charged never falls below what a provider bills for requests that honour `max_tokens`, and the
//! ledger never passes a budget by more than what a server billing beyond `max_tokens` adds. One
//! ledger per process: one `doc2ci run`.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

use doc2ci_llm::{LlmError, Reply, Request};

use super::GenSettings;

#[derive(Default)]
struct Ledger {
    /// model → (spent, reserved by requests in flight)
    models: HashMap<String, (f64, f64)>,
    run: (f64, f64),
}

fn ledger() -> &'static Mutex<Ledger> {
    static L: OnceLock<Mutex<Ledger>> = OnceLock::new();
    L.get_or_init(Default::default)
}

/// The budgets that bind one model's requests.
#[derive(Debug, Clone)]
pub struct Budget {
    model: String,
    per_model: Option<f64>,
    per_run: Option<f64>,
    price_in: f64,
    price_out: f64,
    /// Attempts a request may take (1 + retries), each possibly billed.
    attempts: u32,
}

impl Budget {
    /// `None` when no budget applies (no `max_cost`, or no price to count with).
    pub fn new(model: &str, g: &GenSettings, per_run: Option<f64>) -> Option<Budget> {
        if g.max_cost.is_none() && per_run.is_none() {
            return None;
        }
        if g.price_per_1k_input.is_none() && g.price_per_1k_output.is_none() {
            return None;
        }
        Some(Budget {
            model: model.into(),
            per_model: g.max_cost,
            per_run,
            price_in: g.price_per_1k_input.unwrap_or(0.0),
            price_out: g.price_per_1k_output.unwrap_or(0.0),
            attempts: g.retries.saturating_add(1),
        })
    }

    /// The most one attempt of `req` can cost: an upper bound of its prompt tokens for any text
    /// (its bytes, plus a chat template's tokens around each message) and the output cap.
    pub fn estimate(&self, req: &Request) -> f64 {
        let prompt: u64 = req.messages.iter().map(|m| m.content.len() as u64 + 16).sum::<u64>() + 16;
        (self.price_in * prompt as f64 + self.price_out * req.max_tokens as f64) / 1000.0
    }

    /// What the outcome of a request reserved at `est` is charged (see the module's doc).
    pub fn charge(&self, est: f64, r: &Result<Reply, LlmError>) -> f64 {
        match r {
            Ok(reply) => {
                let this = match (reply.prompt_tokens, reply.completion_tokens) {
                    (Some(p), Some(c)) => (self.price_in * p as f64 + self.price_out * c as f64) / 1000.0,
                    _ => est,
                };
                this + est * reply.billed_retries as f64
            }
            // A 4xx is refused before any work.
            Err(LlmError::Http(_)) => 0.0,
            Err(_) => est * self.attempts as f64,
        }
    }

    /// Reserves `est` if it fits both budgets.
    pub fn reserve(&self, est: f64) -> bool {
        let mut l = ledger().lock().expect("budget ledger");
        let (ms, mr) = l.models.get(&self.model).copied().unwrap_or_default();
        let fits_model = self.per_model.is_none_or(|b| ms + mr + est <= b + 1e-12);
        let fits_run = self.per_run.is_none_or(|b| l.run.0 + l.run.1 + est <= b + 1e-12);
        if !(fits_model && fits_run) {
            return false;
        }
        l.models.entry(self.model.clone()).or_default().1 += est;
        l.run.1 += est;
        true
    }

    /// Replaces a reservation by what the answer cost (0 for a failure: it is not billed here).
    pub fn settle(&self, est: f64, actual: f64) {
        let mut l = ledger().lock().expect("budget ledger");
        let e = l.models.entry(self.model.clone()).or_default();
        e.1 = (e.1 - est).max(0.0);
        e.0 += actual;
        l.run.1 = (l.run.1 - est).max(0.0);
        l.run.0 += actual;
    }

    /// What was spent, for the message when a budget stops a partition.
    pub fn spent(&self) -> (f64, f64) {
        let l = ledger().lock().expect("budget ledger");
        (l.models.get(&self.model).map_or(0.0, |e| e.0), l.run.0)
    }

    pub fn describe(&self) -> String {
        let (m, r) = self.spent();
        let mut parts = Vec::new();
        if let Some(b) = self.per_model {
            parts.push(format!("model `{}` spent {m:.4} of max_cost {b:.4}", self.model));
        }
        if let Some(b) = self.per_run {
            parts.push(format!("this run spent {r:.4} of [stages.generate] max_cost {b:.4}"));
        }
        parts.join("; ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use doc2ci_llm::Message;

    fn budget() -> Budget {
        Budget { model: "m".into(), per_model: Some(1.0), per_run: None, price_in: 1.0, price_out: 2.0, attempts: 3 }
    }

    fn reply(usage: Option<(u32, u32)>, billed_retries: u32) -> Reply {
        Reply {
            text: "x".into(),
            prompt_tokens: usage.map(|u| u.0),
            completion_tokens: usage.map(|u| u.1),
            latency_ms: 1.0,
            finish_reason: None,
            endpoint: "e".into(),
            attempts: 1 + billed_retries,
            billed_retries,
        }
    }

    /// Issue 30: the reservation bounds the prompt of any text (one token per byte, even for text
    /// a tokenizer splits byte by byte), and what is charged never falls below a provider's bill.
    #[test]
    fn charges_are_bounded_by_reservations_and_never_below_the_bill() {
        let b = budget();
        let hostile = "𝕏".repeat(500); // 2,000 bytes, up to 2,000 byte-level tokens
        let req = Request {
            messages: vec![Message::new("system", "s"), Message::new("user", hostile.as_str())],
            temperature: 0.0,
            max_tokens: 64,
            seed: None,
            extra: Default::default(),
        };
        let est = b.estimate(&req);
        let worst_bill = (1.0 * (2_001.0 + 2.0 * 8.0) + 2.0 * 64.0) / 1000.0;
        assert!(est >= worst_bill, "{est} < {worst_bill}");
        // Reported usage is charged as reported, plus each earlier attempt that may have been billed.
        let r = Ok(reply(Some((100, 10)), 0));
        assert!((b.charge(est, &r) - 0.12).abs() < 1e-12);
        assert!((b.charge(est, &Ok(reply(Some((100, 10)), 2))) - (0.12 + 2.0 * est)).abs() < 1e-12);
        // No usage: the reservation, an upper bound of the bill.
        assert_eq!(b.charge(est, &Ok(reply(None, 0))), est);
        // A refusal is not billed; any other failure may have been, on every attempt.
        assert_eq!(b.charge(est, &Err(LlmError::Http("400".into()))), 0.0);
        assert_eq!(b.charge(est, &Err(LlmError::Retryable("timed out".into()))), 3.0 * est);
    }

    /// The ledger never admits a request whose reservation would pass the budget, so what is
    /// charged stays within it: the overshoot is zero while servers honour `max_tokens`.
    #[test]
    fn the_ledger_never_passes_the_budget() {
        let b = Budget { model: "ledger-test".into(), ..budget() };
        let est = 0.3;
        let mut spent = 0.0;
        while b.reserve(est) {
            // Usage missing: charged the whole reservation.
            let c = b.charge(est, &Ok(reply(None, 0)));
            b.settle(est, c);
            spent += c;
        }
        assert_eq!(b.spent().0, spent);
        assert!(spent <= 1.0 + 1e-12 && spent > 1.0 - est, "{spent}");
    }
}
