//! User-facing texts of the telegram layer (see [`crate::texts`]).
