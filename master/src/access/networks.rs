//! Where workers may live (`--worker-networks`): a worker URL must be http(s) to a host
//! whose every address lies in one of these networks, so that a registration cannot
//! point the master at the metadata service or any other internal address (server-side
//! request forgery). Host names are resolved once, at registration.

use std::net::IpAddr;
use std::time::Duration;

use ipnet::IpNet;

use crate::MasterError;

/// How long a worker's host name may take to resolve.
const RESOLVE_TIMEOUT: Duration = Duration::from_secs(2);

/// The allowed networks.
#[derive(Debug, Clone, PartialEq)]
pub struct Networks(Vec<IpNet>);

impl Default for Networks {
    /// Loopback only.
    fn default() -> Self {
        Self::loopback()
    }
}

impl Networks {
    /// This host: the local provider's workers.
    pub fn loopback() -> Self {
        Self::from_static(&["127.0.0.0/8", "::1/128"])
    }

    /// This host and the private ranges (RFC 1918, IPv6 unique local): Docker networks,
    /// a VPC, static workers on a LAN. Link-local addresses (the cloud metadata service)
    /// and public ones are not in it.
    pub fn private() -> Self {
        Self::from_static(&[
            "127.0.0.0/8",
            "::1/128",
            "10.0.0.0/8",
            "172.16.0.0/12",
            "192.168.0.0/16",
            "fc00::/7",
        ])
    }

    fn from_static(cidrs: &[&str]) -> Self {
        Self(cidrs.iter().filter_map(|c| c.parse().ok()).collect())
    }

    /// `--worker-networks` as given: CIDRs (`10.0.0.0/8`) or single addresses.
    pub fn parse(cidrs: &[String]) -> Result<Self, MasterError> {
        cidrs
            .iter()
            .map(|c| {
                c.parse::<IpNet>()
                    .or_else(|_| c.parse::<IpAddr>().map(IpNet::from))
                    .map_err(|_| {
                        MasterError::invalid(
                            "--worker-networks",
                            format!("`{c}` is not a CIDR such as 10.0.0.0/8"),
                        )
                    })
            })
            .collect::<Result<_, _>>()
            .map(Self)
    }

    pub fn contains(&self, address: IpAddr) -> bool {
        self.0.iter().any(|net| net.contains(&address))
    }

    /// Checks a worker URL: its host's every address must be allowed (403 otherwise).
    pub async fn admit(&self, url: &str) -> Result<(), MasterError> {
        let refuse = |message: String| MasterError::Forbidden {
            field: "url".into(),
            message,
        };
        let parsed = reqwest::Url::parse(url)
            .map_err(|e| MasterError::invalid("url", format!("`{url}` is not a URL: {e}")))?;
        let (Some(host), Some(port)) = (parsed.host_str(), parsed.port_or_known_default()) else {
            return Err(MasterError::invalid(
                "url",
                format!("`{url}` names no host"),
            ));
        };
        let host = host.trim_start_matches('[').trim_end_matches(']');
        let addresses: Vec<IpAddr> = match host.parse::<IpAddr>() {
            Ok(ip) => vec![ip],
            Err(_) => tokio::time::timeout(RESOLVE_TIMEOUT, tokio::net::lookup_host((host, port)))
                .await
                .map_err(|_| {
                    refuse(format!(
                        "`{host}` did not resolve within {RESOLVE_TIMEOUT:?}"
                    ))
                })?
                .map_err(|e| refuse(format!("`{host}` does not resolve: {e}")))?
                .map(|a| a.ip())
                .collect(),
        };
        match addresses.iter().find(|a| !self.contains(**a)) {
            None if !addresses.is_empty() => Ok(()),
            None => Err(refuse(format!("`{host}` resolves to no address"))),
            Some(outside) => Err(refuse(format!(
                "`{host}` ({outside}) is outside the worker networks {}; see --worker-networks",
                self.describe()
            ))),
        }
    }

    pub fn describe(&self) -> String {
        let list: Vec<String> = self.0.iter().map(ToString::to_string).collect();
        format!("[{}]", list.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn worker_urls_must_lie_in_the_networks() {
        let private = Networks::private();
        for ok in [
            "http://127.0.0.1:9000",
            "http://10.1.2.3:9000",
            "https://[::1]:9000",
            "http://localhost:1",
        ] {
            private
                .admit(ok)
                .await
                .unwrap_or_else(|e| panic!("{ok}: {e}"));
        }
        for (bad, why) in [
            (
                "http://169.254.169.254/latest",
                "outside the worker networks",
            ),
            ("http://8.8.8.8:80", "outside the worker networks"),
            ("http://", "`url`"),
        ] {
            let err = private.admit(bad).await.unwrap_err().to_string();
            assert!(err.contains(why), "{bad}: {err}");
        }
        let err = Networks::loopback()
            .admit("http://10.0.0.1:9000")
            .await
            .unwrap_err();
        assert!(matches!(err, MasterError::Forbidden { .. }), "{err}");
    }

    #[test]
    fn flags_parse_as_cidrs_or_addresses() {
        let nets = Networks::parse(&["10.0.0.0/8".into(), "192.0.2.7".into()]).unwrap();
        assert!(nets.contains("10.9.9.9".parse().unwrap()));
        assert!(nets.contains("192.0.2.7".parse().unwrap()));
        assert!(!nets.contains("192.0.2.8".parse().unwrap()));
        let err = Networks::parse(&["ten".into()]).unwrap_err().to_string();
        assert!(err.contains("`ten` is not a CIDR"), "{err}");
    }
}
