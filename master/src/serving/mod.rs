//! The request path: parsing and checking requests, the per-constraint ensembles and
//! their shared cache, the worker pools, dispatch with deadlines, voting, feedback, and
//! the usage the resource controller measures.

pub mod answer;
pub mod cache;
pub mod control;
pub mod dispatch;
pub mod failover;
pub mod registry;
pub mod request;
pub mod service;
pub mod state;
pub mod tasks;
pub mod traffic;
pub mod usage;
