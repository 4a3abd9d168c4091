//! Terminal output: progress bars when a person is watching, plain lines otherwise.

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};

#[derive(Clone)]
pub struct Ui {
    quiet: bool,
    multi: MultiProgress,
}

impl Ui {
    pub fn new(quiet: bool) -> Self {
        let multi =
            if quiet { MultiProgress::with_draw_target(ProgressDrawTarget::hidden()) } else { MultiProgress::new() };
        Self { quiet, multi }
    }

    pub fn quiet(&self) -> bool {
        self.quiet
    }

    pub fn child(&self) -> Self {
        self.clone()
    }

    /// A bar with rate and ETA on a terminal; in a log (stderr not a terminal), one line at most
    /// every [`LOG_EVERY`] and one at the end, so a long partition is never silent.
    pub fn bar(&self, len: u64, what: &str) -> Progress {
        let b = self.multi.add(ProgressBar::new(len));
        b.set_style(
            ProgressStyle::with_template(
                "{spinner} [{elapsed_precise}] {bar:30} {pos}/{len} {per_sec} eta {eta} {msg}",
            )
            .unwrap(),
        );
        b.set_message(what.to_string());
        let log = !self.quiet && self.multi.is_hidden();
        Progress { bar: b, what: what.to_string(), log, last: std::sync::Mutex::new(std::time::Instant::now()) }
    }

    pub fn info(&self, msg: &str) {
        tracing::debug!("{msg}");
        if self.quiet {
            return;
        }
        if self.multi.is_hidden() {
            eprintln!("{msg}");
        } else {
            let _ = self.multi.println(msg);
        }
    }

    /// Errors print even with `--quiet`.
    pub fn error(&self, msg: &str) {
        tracing::debug!("{msg}");
        if self.multi.is_hidden() {
            eprintln!("error: {msg}");
        } else {
            let _ = self.multi.println(format!("error: {msg}"));
        }
    }
}

/// How often a progress line goes to a log.
pub const LOG_EVERY: std::time::Duration = std::time::Duration::from_secs(30);

pub struct Progress {
    bar: ProgressBar,
    what: String,
    /// Lines instead of a bar: nobody is watching a terminal.
    log: bool,
    last: std::sync::Mutex<std::time::Instant>,
}

impl Progress {
    pub fn inc(&self, n: u64) {
        self.bar.inc(n);
        self.maybe_log();
    }

    pub fn set_position(&self, pos: u64) {
        self.bar.set_position(pos);
        self.maybe_log();
    }

    pub fn finish_and_clear(&self) {
        self.bar.finish_and_clear();
    }

    fn maybe_log(&self) {
        if !self.log {
            return;
        }
        let (pos, len) = (self.bar.position(), self.bar.length().unwrap_or(0));
        let mut last = self.last.lock().unwrap_or_else(|e| e.into_inner());
        if last.elapsed() < LOG_EVERY && pos < len {
            return;
        }
        *last = std::time::Instant::now();
        eprintln!("{}", progress_line(&self.what, pos, len, self.bar.elapsed()));
    }
}

/// `progress requests: 12/40 (0.8/s, eta 35 s)`.
fn progress_line(what: &str, pos: u64, len: u64, elapsed: std::time::Duration) -> String {
    let rate = pos as f64 / elapsed.as_secs_f64().max(1e-3);
    let eta = if pos >= len {
        "done".to_string()
    } else if rate > 0.0 {
        format!("eta {:.0} s", (len - pos) as f64 / rate)
    } else {
        "eta unknown".to_string()
    };
    format!("progress {what}: {pos}/{len} ({rate:.1}/s, {eta})")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_log_line_gives_rate_and_eta() {
        let d = std::time::Duration::from_secs(10);
        assert_eq!(progress_line("requests", 5, 20, d), "progress requests: 5/20 (0.5/s, eta 30 s)");
        assert_eq!(progress_line("requests", 20, 20, d), "progress requests: 20/20 (2.0/s, done)");
        assert_eq!(progress_line("partitions", 0, 3, d), "progress partitions: 0/3 (0.0/s, eta unknown)");
    }
}
