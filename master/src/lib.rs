//! The Cocktail-rs master. Pure policies (`estimate`, `selection`, `voting`, `packing`)
//! are shared with the simulator; the rest is the live request path.

pub mod autoscale;
pub mod cache;
pub mod config;
pub mod controller;
pub mod dispatch;
pub mod error;
pub mod estimate;
pub mod http;
pub mod learned;
pub mod metrics;
pub mod packing;
pub mod predict;
pub mod provider;
pub mod registry;
pub mod request;
pub mod selection;
pub mod server;
pub mod service;
pub mod state;
pub mod store;
pub mod tasks;
pub mod usage;
pub mod voting;

pub use config::{Interval, MasterConfig};
pub use error::MasterError;
pub use service::Master;
