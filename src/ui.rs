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

    pub fn bar(&self, len: u64, what: &str) -> ProgressBar {
        let b = self.multi.add(ProgressBar::new(len));
        b.set_style(ProgressStyle::with_template("{spinner} [{elapsed_precise}] {bar:30} {pos}/{len} {msg}").unwrap());
        b.set_message(what.to_string());
        b
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
