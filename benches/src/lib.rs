//! The evaluation: benchmarks, the load generator, the trace-driven simulator, and the
//! reports and plots that compare the schemes (issue 6).

pub mod autoscaling;
pub mod drift_goals;
pub mod drift_report;
pub mod drift_rules;
pub mod ensemble_gain;
pub mod goals;
pub mod hetero;
pub mod loadgen;
pub mod measured;
pub mod parallel;
pub mod plots;
pub mod process;
pub mod procfs;
pub mod report;
pub mod results;
pub mod sim;
pub mod stats;
pub mod traces;
pub mod workload;
