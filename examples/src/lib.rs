//! Runnable microdcs programs. [`plant`] is the reference plant keyspace, used by
//! the `plant` binary (the main demo) and by the tests; [`recipe`] runs a small
//! SFC recipe on it through the poller.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod logging;
pub mod miroir;
pub mod plant;
pub mod prometheus;
pub mod recipe;
