//! krabka-bench.
fn main() {}
