//! The subcommands that do a user's work, one file each. A subcommand imports the shared
//! pieces below it (`args`, `load`, `backend`, `audio`, `output`, `destination`), never another
//! subcommand (`crates/testkit/tests/layering.rs` checks it).

pub mod convert;
pub mod demo;
pub mod info;
pub mod models;
pub mod stream;
pub mod transcribe;
