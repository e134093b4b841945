//! Benchmarks, reports, and later the load generator and the simulator (issue 6).
