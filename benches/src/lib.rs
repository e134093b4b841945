//! Benchmarks and reports; later the load generator and the simulator (issue 6).

pub mod process;
pub mod stats;
pub mod traces;
