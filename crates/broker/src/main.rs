//! The `krabka` binary.
fn main() {}
