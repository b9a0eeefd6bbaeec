//! The conformance suite: every backend of this build against the references, through one
//! entry point (`cargo test -p susurrus-testkit --test conformance`). `ops` runs every op case
//! of the registry on each backend against the reference interpreter; `golden` runs the real
//! models' golden clips token for token against faster-whisper's transcripts. A new backend
//! adds its constructor to `susurrus_testkit::backends` and a line to each list.

mod golden;
mod ops;
