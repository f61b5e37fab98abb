//! User-facing texts of the turn layer (see [`crate::texts`]).
