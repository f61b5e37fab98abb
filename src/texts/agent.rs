//! User-facing texts of the agent layer (see [`crate::texts`]).
