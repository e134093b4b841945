//! The Cocktail-rs master.
//!
//! - `policy`: pure decisions (selection, voting, packing, prediction, autoscaling),
//!   shared with the simulator.
//! - `serving`: the request path, from parsing to the voted answer.
//! - `resources`: the resource controller, its providers and its state.
//! - `access`: who may call what (secrets, API keys, worker networks).
//! - `http` and `grpc`: the OIP surfaces (`http` also the control plane).
//! - `server`, `config`, `metrics`, `error`: the process around them.
//!
//! Every module is also re-exported at the top (`cocktail_master::selection`, ...).

pub mod access;
pub mod config;
pub mod error;
pub mod grpc;
pub mod http;
pub mod metrics;
pub mod policy;
pub mod resources;
pub mod server;
pub mod serving;

pub use policy::{
    autoscale, ensemble, estimate, health, kairos, mix, packing, predict, ribbon, selection, voting,
};
pub use resources::{controller, learned, provider, store};
pub use serving::{
    cache, control, dispatch, failover, registry, request, service, state, tasks, usage,
};

pub use config::{Interval, MasterConfig};
pub use error::MasterError;
pub use service::Master;
