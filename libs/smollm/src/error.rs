//! What running a model can fail on, typed: the engine tells a file it cannot run from a request
//! the model cannot take, and every message names the file or the step.

/// An error of this crate; `Display` gives the whole chain (`loading x.gguf: GGUF tensor y: …`).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The file is not a model this crate runs: metadata missing, another architecture or
    /// tokenizer, a chat template that does not render, blocks of an unknown size.
    #[error("{0}")]
    Unsupported(String),
    /// A request the model cannot take (a prompt longer than its context), or a batch that
    /// failed as a whole.
    #[error("{0}")]
    Request(String),
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// A tensor operation or the GGUF reader.
    #[error(transparent)]
    Tensor(#[from] candle_core::Error),
    /// The tokenizer (building it from the GGUF, encoding, decoding).
    #[error("{0}")]
    Tokenizer(String),
    /// Where an error happened: the file or tensor being read.
    #[error("{context}: {source}")]
    In {
        context: String,
        #[source]
        source: Box<Error>,
    },
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// `bail!` for [`Error::Unsupported`] and the like: `fail!(Unsupported, "…", args)`.
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
