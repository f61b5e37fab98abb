//! What an operator runs besides the bot: the command line ([`cli`]), `heurist doctor`, which
//! checks a deployment and says what to fix ([`doctor`]), moving learned lessons between
//! deployments ([`lessons`]), and restoring a backup ([`restore`]). The binary parses its arguments here and calls one of these.

pub mod cli;
pub mod doctor;
pub mod lessons;
pub mod restore;
