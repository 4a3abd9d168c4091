//! What embedding can fail on, typed, each message naming the file or the step.

/// An error of this crate; `Display` gives the whole chain (`loading weights x: …`).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The model's config or weights are not a BERT encoder this crate runs.
    #[error("{0}")]
    Unsupported(String),
    /// Options that cannot work (a batch smaller than one text).
    #[error("{0}")]
    Options(String),
    #[error(transparent)]
    Io(#[from] std::io::Error),
    #[error(transparent)]
    Json(#[from] serde_json::Error),
    #[error(transparent)]
    Tensor(#[from] candle_core::Error),
    #[error(transparent)]
    Threads(#[from] rayon::ThreadPoolBuildError),
    /// The tokenizer (loading, configuring, encoding).
    #[error("{0}")]
    Tokenizer(String),
    /// Where an error happened: the file being read.
    #[error("{context}: {source}")]
    In {
        context: String,
        #[source]
        source: Box<Error>,
    },
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

macro_rules! fail {
    ($kind:ident, $($arg:tt)*) => {
        return Err($crate::error::Error::$kind(format!($($arg)*)))
    };
}
pub(crate) use fail;

/// Names the place of an error, as `anyhow::Context` does, keeping its type.
pub trait Within<T> {
    fn within(self, context: impl FnOnce() -> String) -> Result<T>;
}

impl<T, E: Into<Error>> Within<T> for std::result::Result<T, E> {
    fn within(self, context: impl FnOnce() -> String) -> Result<T> {
        self.map_err(|e| Error::In { context: context(), source: Box::new(e.into()) })
    }
}
