//! The shared model cache: the selection of each constraint key in Redis, so that several
//! masters serve a constraint with the same ensemble (Cocktail §4.1, "model cache").
//!
//! The master's own table of constraint states ([`crate::serving::state`]) is the in-process
//! cache; this layer sits behind it. Redis is never required: every call has a short
//! timeout, and an error or a timeout is a miss (counted in
//! `cocktail_master_cache_errors_total`), never a failed request. The connection is made
//! lazily and re-made by the `ConnectionManager` after an outage.

use std::time::Duration;

use cocktail_common::redact::UrlWithCredentials;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use serde::{Deserialize, Serialize};

use crate::error::MasterError;

/// What is stored per constraint key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CachedSelection {
    pub members: Vec<String>,
    /// Bumped by every O2 change, so masters can tell newer from older.
    pub generation: u64,
}

#[derive(Clone)]
pub struct SharedCache {
    connection: ConnectionManager,
    namespace: String,
    ttl: Duration,
    timeout: Duration,
}

impl std::fmt::Debug for SharedCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedCache")
            .field("namespace", &self.namespace)
            .field("ttl", &self.ttl)
            .finish_non_exhaustive()
    }
}

impl SharedCache {
    /// Prepares a lazy connection; must run inside the Tokio runtime.
    pub fn connect(
        url: &str,
        namespace: &str,
        ttl: Duration,
        timeout: Duration,
    ) -> Result<Self, MasterError> {
        let client = redis::Client::open(url).map_err(|e| {
            let url = UrlWithCredentials::new(url);
            MasterError::Internal(format!("redis URL `{url}`: {e}"))
        })?;
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(Duration::from_millis(250)))
            .set_response_timeout(Some(timeout))
            .set_number_of_retries(1)
            .set_max_delay(Duration::from_millis(500));
        let connection = ConnectionManager::new_lazy_with_config(client, config)
            .map_err(|e| MasterError::Internal(format!("redis: {e}")))?;
        Ok(Self {
            connection,
            namespace: namespace.to_owned(),
            ttl,
            timeout,
        })
    }

    fn key(&self, constraint_key: &str) -> String {
        format!("{}:selection:{constraint_key}", self.namespace)
    }

    /// The cached selection, or `None` on a miss, an error or a timeout.
    pub async fn get(&self, constraint_key: &str) -> Option<CachedSelection> {
        let mut connection = self.connection.clone();
        let mut get = redis::cmd("GET");
        get.arg(self.key(constraint_key));
        let command = get.query_async::<Option<String>>(&mut connection);
        let value = self.outcome("get", tokio::time::timeout(self.timeout, command).await)??;
        match serde_json::from_str(&value) {
            Ok(selection) => Some(selection),
            Err(e) => {
                tracing::warn!(key = constraint_key, error = %e, "ignoring a malformed cached selection");
                metrics::counter!("cocktail_master_cache_errors_total", "op" => "decode")
                    .increment(1);
                None
            }
        }
    }

    /// Stores a selection with the TTL; failures are logged and counted.
    pub async fn put(&self, constraint_key: &str, selection: &CachedSelection) {
        let Ok(value) = serde_json::to_string(selection) else {
            return;
        };
        let mut connection = self.connection.clone();
        let mut set = redis::cmd("SET");
        set.arg(self.key(constraint_key))
            .arg(value)
            .arg("EX")
            .arg(self.ttl.as_secs().max(1));
        let command = set.query_async::<()>(&mut connection);
        self.outcome("set", tokio::time::timeout(self.timeout, command).await);
    }

    fn outcome<T>(
        &self,
        op: &'static str,
        result: Result<redis::RedisResult<T>, tokio::time::error::Elapsed>,
    ) -> Option<T> {
        match result {
            Ok(Ok(value)) => Some(value),
            Ok(Err(e)) => {
                tracing::debug!(op, error = %e, "redis call failed; treated as a miss");
                metrics::counter!("cocktail_master_cache_errors_total", "op" => op).increment(1);
                None
            }
            Err(_) => {
                tracing::debug!(op, "redis call timed out; treated as a miss");
                metrics::counter!("cocktail_master_cache_errors_total", "op" => op).increment(1);
                None
            }
        }
    }
}
