//! Who may do what at the master. Three kinds of caller, each with its own bearer secret:
//! workers and the master's own calls to them present the cluster secret; operators
//! present the admin token for everything that changes or reveals the cluster; clients
//! present an API key when `--api-keys` is on. Worker URLs must lie in
//! `--worker-networks`, and a worker of a pool the controller manages must be an instance
//! it launched (`controller::Controller::admits`). The master is the cluster's CA (`ca`):
//! provider-launched workers serve HTTPS with certificates it signs. `http::auth` turns these into request
//! extractors; `docs/security.md` has the threat model.

pub mod ca;
pub mod keys;
pub mod networks;

use cocktail_common::auth::Secret;

pub use keys::ApiKeys;
pub use networks::Networks;

/// The master's secrets and admission rules; `None` turns a check off (in-process use:
/// the `cocktail-master` binary always has a cluster secret and an admin token).
#[derive(Debug, Default)]
pub struct Access {
    pub cluster: Option<Secret>,
    pub admin: Option<Secret>,
    /// Shared with the gRPC endpoint.
    pub keys: Option<std::sync::Arc<ApiKeys>>,
    pub networks: Networks,
    /// The cluster CA, when the workers a provider launches serve HTTPS (the default).
    pub ca: Option<std::sync::Arc<ca::ClusterCa>>,
}
