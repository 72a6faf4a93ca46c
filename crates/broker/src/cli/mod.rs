//! Operator subcommands of the `krabka` binary other than `serve`.
//!
//! Each lives in its own module so `main.rs` stays a thin clap front.

pub mod cluster_status;
pub mod remote_metadata;
pub mod worm_heads;
