//! Budgets (issue 16): `max_cost` per model (`[[models]]`) and per run (`[stages.generate]`),
//! checked before each request from the price table and the prompt's token estimate (its
//! characters / 4, plus the output cap: the most the request can cost). A request goes out only
//! if what was spent, what is in flight and its own estimate stay within both budgets; otherwise
//! the partition stops cleanly once its in-flight answers are in (every answer is kept) and says
//! how much was spent and how much is left to ask. One ledger per process: one `doc2ci run`.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

use doc2ci_llm::Request;

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
        })
    }

    /// The most `req` can cost.
    pub fn estimate(&self, req: &Request) -> f64 {
        let prompt: u64 = req.messages.iter().map(|m| m.content.len() as u64 / 4 + 4).sum();
        (self.price_in * prompt as f64 + self.price_out * req.max_tokens as f64) / 1000.0
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
