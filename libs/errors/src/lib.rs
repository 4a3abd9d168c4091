//! What running a model in process can fail on, typed, for `libs/embed` and `libs/smollm`: the
//! caller tells a file it cannot run ([`Error::Unsupported`]) from a request or setting the model
//! cannot take ([`Error::Request`]), and every message names the file, tensor or step
//! ([`Within`]). One type, so both crates word and chain their errors alike.

/// An error of a model crate; `Display` gives the whole chain (`loading x.gguf: GGUF tensor y: …`).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The file is not a model the crate runs: metadata or weights missing, another architecture
    /// or tokenizer, a chat template that does not render, blocks of an unknown size.
    #[error("{0}")]
    Unsupported(String),
    /// A request or setting the model cannot take (a prompt longer than its context, a batch
    /// smaller than one text), or a batch that failed as a whole.
    #[error("{0}")]
    Request(String),
    #[error(transparent)]
    Io(#[from] std::io::Error),
    #[error(transparent)]
    Json(#[from] serde_json::Error),
    /// A tensor operation or the weights' reader.
    #[error(transparent)]
    Tensor(#[from] candle_core::Error),
    #[error(transparent)]
    Threads(#[from] rayon::ThreadPoolBuildError),
    /// The tokenizer (loading, configuring, encoding, decoding).
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
#[macro_export]
macro_rules! fail {
    ($kind:ident, $($arg:tt)*) => {
        return Err($crate::Error::$kind(format!($($arg)*)))
    };
}

/// Names the place of an error, as `anyhow::Context` does, keeping its type.
pub trait Within<T> {
    fn within(self, context: impl FnOnce() -> String) -> Result<T>;
}

impl<T, E: Into<Error>> Within<T> for std::result::Result<T, E> {
    fn within(self, context: impl FnOnce() -> String) -> Result<T> {
        self.map_err(|e| Error::In { context: context(), source: Box::new(e.into()) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn open() -> Result<()> {
        fail!(Unsupported, "architecture {}", "gemma3");
    }

    #[test]
    fn the_chain_names_every_place() {
        let e = open().within(|| "GGUF tensor blk.0".into()).within(|| "loading x.gguf".into()).unwrap_err();
        assert_eq!(e.to_string(), "loading x.gguf: GGUF tensor blk.0: architecture gemma3");
        assert!(matches!(e, Error::In { .. }));
    }
}
