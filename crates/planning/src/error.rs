//! The cause a planning error keeps: the error it came from (a driver's, a parser's, the
//! random generator's), boxed, so that `std::error::Error::source` reaches it across the
//! crate seam. The same shape as `agentroom_ports::BoxError` and its `Cause`, which this crate
//! cannot name (it depends on the domain only), so that `RepoError` reads as `StoreError`.

use std::fmt;

/// Any error a planning failure came from, kept as its `source()`.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Shows an optional cause after the context it follows (`": <cause>"`, or nothing), so an
/// error's text stays whole for the edges that log only its `Display`.
pub(crate) struct Cause<'a>(pub(crate) &'a Option<BoxError>);

impl fmt::Display for Cause<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(source) => write!(f, ": {source}"),
            None => Ok(()),
        }
    }
}
