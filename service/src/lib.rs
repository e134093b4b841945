//! The plumbing the master's and the worker's HTTP services share, so that neither
//! depends on the other: the transport ([`net`]: TLS, the cluster secret, client limits
//! and request deadlines), how a process learns to stop ([`shutdown`]), and the
//! Open Inference Protocol surface both serve ([`surface`]: 404/405 answers, OpenAPI
//! narrowing, the binary tensor body), and the configuration file that sets a server's
//! flags ([`config_file`]).

pub mod config_file;
pub mod net;
pub mod shutdown;
pub mod surface;

pub use net::{Net, NetArgs, NetError};
pub use shutdown::{shutdown_signal, shutdown_token};
