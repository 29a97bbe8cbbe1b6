//! The error of a checked constructor: the reason, and the inputs handed back.

use std::fmt;

use sparse_core::{Error, Result};

/// A constructor refused its inputs; `parts` gives them back so nothing is lost.
pub struct Rejected<P> {
    pub parts: P,
    pub error: Error,
}

/// What a checked constructor ends with: `m`, built without checks, when `validate` accepts it;
/// otherwise its arrays, taken back by `into_parts`, with the error.
pub(crate) fn validated<M, P>(
    m: M,
    validate: impl FnOnce(&M) -> Result<()>,
    into_parts: impl FnOnce(M) -> P,
) -> Result<M, Rejected<P>> {
    match validate(&m) {
        Ok(()) => Ok(m),
        Err(error) => Err(Rejected {
            parts: into_parts(m),
            error,
        }),
    }
}

impl<P> fmt::Debug for Rejected<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Rejected")
            .field("error", &self.error)
            .finish_non_exhaustive()
    }
}

impl<P> fmt::Display for Rejected<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.error.fmt(f)
    }
}

impl<P> std::error::Error for Rejected<P> {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.error)
    }
}

impl<P> From<Rejected<P>> for Error {
    fn from(r: Rejected<P>) -> Error {
        r.error
    }
}
