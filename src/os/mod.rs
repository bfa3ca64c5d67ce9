//! What concur uses of the machine it runs on: child processes and their descriptors, memory
//! shared with them, the files it writes, Ctrl-C, the terminal, and TLS configurations.

pub(crate) mod files;
pub(crate) mod interrupt;
pub(crate) mod live;
pub(crate) mod maps;
pub(crate) mod process;
pub(crate) mod shared;
pub(crate) mod terminal;
pub mod tls;
