//! The fast CPU backend.
