//! What this build is: the version written into every results file, read by the study, the
//! hub and the agent (the allocator's name is `base::allocator`'s).

/// The version written into every results file.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
