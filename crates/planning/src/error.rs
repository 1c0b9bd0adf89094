//! The cause a planning error keeps: the error it came from (the random generator's, later a
//! driver's or a parser's), boxed, so that `std::error::Error::source` reaches it across the
//! crate seam. The same shape as `agentroom_ports::BoxError`, which this crate cannot name
//! (it depends on the domain only).

/// Any error a planning failure came from, kept as its `source()`.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;
