//! The fuzz targets' bodies ([`targets`]), one file shared with the test suite's mutation run.

mod targets;

pub use targets::*;
