//! The Cocktail-rs master.
//!
//! The pure decisions (selection, voting, packing, prediction, autoscaling, the control
//! loop) are the `cocktail-policy` crate, which the simulator shares.
//!
//! - `serving`: the request path, from parsing to the voted answer.
//! - `resources`: the resource controller, its providers and its state.
//! - `access`: who may call what (secrets, API keys, worker networks).
//! - `http` and `grpc`: the OIP surfaces (`http` also the control plane).
//! - `history`: the dashboard's ring of samples.
//! - `reload`: re-reading the zoo while serving.
//! - `server`, `config`, `metrics`, `error`: the process around them.

pub mod access;
pub mod config;
pub mod error;
pub mod grpc;
pub mod history;
pub mod http;
pub mod metrics;
pub mod reload;
pub mod resources;
pub mod server;
pub mod serving;

pub use config::{Interval, MasterConfig};
pub use error::MasterError;
pub use serving::service::Master;
