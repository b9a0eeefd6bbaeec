//! Transcript output formats.
