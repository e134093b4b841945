//! Client API keys (`--api-keys FILE`): bearer keys for the inference endpoints, each
//! with a requests-per-second budget, a token bucket (governor's GCRA) that allows
//! `burst` requests at once. The file holds SHA-256 digests, never the keys:
//!
//! ```toml
//! [[keys]]
//! name = "alice"          # shows in logs and metrics
//! sha256 = "9f86d08…"     # `cocktail keys new` prints a key and this line
//! rps = 20.0
//! burst = 40              # optional; default: rps rounded up
//! ```

use std::collections::HashMap;
use std::num::NonZeroU32;
use std::path::Path;
use std::time::Duration;

use cocktail_common::auth::digest;
use governor::clock::{Clock as _, DefaultClock};
use governor::{DefaultDirectRateLimiter, Quota, RateLimiter};
use serde::Deserialize;

use crate::MasterError;

/// Most requests per second one key may be given.
pub const MAX_RPS: f64 = 1_000_000.0;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct KeyFile {
    keys: Vec<KeyEntry>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct KeyEntry {
    name: String,
    sha256: String,
    rps: f64,
    burst: Option<u32>,
}

#[derive(Debug)]
struct Client {
    name: String,
    limiter: DefaultDirectRateLimiter,
}

/// Why a client's request is refused.
#[derive(Debug, Clone, PartialEq)]
pub enum Refusal {
    /// No key presented, or one not in the file.
    Unknown,
    /// The key's bucket is empty; a token comes back after `retry_after`.
    OverBudget { name: String, retry_after: Duration },
}

/// The keys of `--api-keys`, by digest.
#[derive(Debug, Default)]
pub struct ApiKeys {
    clients: HashMap<[u8; 32], Client>,
}

impl ApiKeys {
    pub fn load(path: &Path) -> Result<Self, MasterError> {
        let text = std::fs::read_to_string(path).map_err(|e| {
            MasterError::invalid(
                "--api-keys",
                format!("cannot read `{}`: {e}", path.display()),
            )
        })?;
        Self::parse(&text).map_err(|e| match e {
            MasterError::InvalidInput { field, message } => {
                MasterError::invalid(format!("--api-keys {}: {field}", path.display()), message)
            }
            other => other,
        })
    }

    pub fn parse(text: &str) -> Result<Self, MasterError> {
        let file: KeyFile =
            toml::from_str(text).map_err(|e| MasterError::invalid("keys", e.to_string()))?;
        let mut clients = HashMap::new();
        for (i, entry) in file.keys.into_iter().enumerate() {
            let field = |name: &str| format!("keys[{i}].{name}");
            let bytes = hex::decode(entry.sha256.trim())
                .ok()
                .and_then(|b| <[u8; 32]>::try_from(b).ok())
                .ok_or_else(|| {
                    MasterError::invalid(field("sha256"), "must be 64 hex digits (a SHA-256)")
                })?;
            if !(entry.rps > 0.0 && entry.rps <= MAX_RPS) {
                return Err(MasterError::invalid(
                    field("rps"),
                    format!("must be above 0 and at most {MAX_RPS}; given {}", entry.rps),
                ));
            }
            let burst = entry.burst.unwrap_or(entry.rps.ceil() as u32);
            let burst = NonZeroU32::new(burst)
                .ok_or_else(|| MasterError::invalid(field("burst"), "must be at least 1"))?;
            let quota = Quota::with_period(Duration::from_secs_f64(1.0 / entry.rps))
                .ok_or_else(|| MasterError::invalid(field("rps"), "is too large"))?
                .allow_burst(burst);
            let client = Client {
                name: entry.name,
                limiter: RateLimiter::direct(quota),
            };
            if clients.insert(bytes, client).is_some() {
                return Err(MasterError::invalid(field("sha256"), "appears twice"));
            }
        }
        Ok(Self { clients })
    }

    pub fn len(&self) -> usize {
        self.clients.len()
    }

    pub fn is_empty(&self) -> bool {
        self.clients.is_empty()
    }

    /// Takes one request from the budget of the key presented; its name if admitted.
    /// The key is found by its digest, which leaks nothing about the key through timing.
    pub fn admit(&self, presented: Option<&str>) -> Result<&str, Refusal> {
        let client = presented
            .and_then(|key| self.clients.get(&digest(key)))
            .ok_or(Refusal::Unknown)?;
        match client.limiter.check() {
            Ok(()) => Ok(&client.name),
            Err(not_until) => Err(Refusal::OverBudget {
                name: client.name.clone(),
                retry_after: not_until.wait_time_from(DefaultClock::default().now()),
            }),
        }
    }

    /// [`Self::admit`] for a client of the inference endpoints, HTTP or gRPC alike:
    /// counted per key name, refused as a [`MasterError`]. `needs` says how to present a
    /// key, for the 401 (built only then).
    pub fn admit_client(
        &self,
        presented: Option<&str>,
        needs: impl FnOnce() -> String,
    ) -> Result<(), MasterError> {
        match self.admit(presented) {
            Ok(name) => {
                metrics::counter!("cocktail_master_key_requests_total", "key" => name.to_owned())
                    .increment(1);
                Ok(())
            }
            Err(Refusal::Unknown) => {
                metrics::counter!("cocktail_master_unauthorized_total", "realm" => "api-key")
                    .increment(1);
                Err(MasterError::Unauthorized {
                    realm: "api-key",
                    message: needs(),
                })
            }
            Err(Refusal::OverBudget { name, retry_after }) => {
                metrics::counter!("cocktail_master_rate_limited_total").increment(1);
                Err(MasterError::RateLimited {
                    key: name,
                    retry_after,
                })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(rps: f64, burst: u32) -> String {
        format!(
            "[[keys]]\nname = \"alice\"\nsha256 = \"{}\"\nrps = {rps}\nburst = {burst}\n",
            hex::encode(digest("alice-key-0123456789"))
        )
    }

    #[test]
    fn a_key_gets_its_burst_then_waits_for_tokens() {
        let keys = ApiKeys::parse(&file(1.0, 3)).unwrap();
        for _ in 0..3 {
            assert_eq!(keys.admit(Some("alice-key-0123456789")), Ok("alice"));
        }
        match keys.admit(Some("alice-key-0123456789")) {
            Err(Refusal::OverBudget { name, retry_after }) => {
                assert_eq!(name, "alice");
                assert!(retry_after > Duration::from_millis(500), "{retry_after:?}");
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(keys.admit(Some("mallory")), Err(Refusal::Unknown));
        assert_eq!(keys.admit(None), Err(Refusal::Unknown));
    }

    #[test]
    fn bad_entries_name_their_field() {
        for (text, field) in [
            (file(0.0, 1), "keys[0].rps"),
            (file(1.0, 0), "keys[0].burst"),
            (
                "[[keys]]\nname = \"a\"\nsha256 = \"xyz\"\nrps = 1\n".into(),
                "keys[0].sha256",
            ),
            (
                "[[keys]]\nname = \"a\"\nrps = 1\n".into(),
                "missing field `sha256`",
            ),
        ] {
            let err = ApiKeys::parse(&text).unwrap_err().to_string();
            assert!(err.contains(field), "{err}");
        }
    }
}
