//! The ground floor: what every layer may use and that uses nothing of concur's own (the
//! error type, units, statistics, masking of secrets, option groups' defaults, the version
//! and the allocator's name).

pub mod allocator;
pub(crate) mod clap_defaults;
pub mod error;
pub mod escape;
pub(crate) mod secret;
pub(crate) mod stats;
pub mod units;
pub mod version;
