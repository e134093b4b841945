//! The cluster's certificate authority: the master signs a certificate for each worker a
//! provider launches (at the worker's start, for the host it serves on) and one for its
//! own cluster listener, so every call between them is TLS with nothing for the user to
//! set up. The CA's key is kept in the secrets folder with the other secrets (mode 0600)
//! and made at the first start like them; its certificate is public and travels to the
//! workers in their environment or boot script.

use std::path::Path;

use cocktail_common::auth::{SecretError, read_private, write_private};
use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};

/// The CA's file in the secrets folder: its private key, then its certificate (one file,
/// written at once, so that masters starting side by side agree on one CA).
pub const CA_FILE: &str = "cluster-ca.pem";

const CERT_BEGIN: &str = "-----BEGIN CERTIFICATE-----";

/// Why the CA could not be read, made or used.
#[derive(Debug, thiserror::Error)]
pub enum CaError {
    #[error(transparent)]
    File(#[from] SecretError),
    #[error("the cluster CA: {0}")]
    Certificate(#[from] rcgen::Error),
    #[error("the cluster CA: a certificate for `{host}`: {message}")]
    Host { host: String, message: String },
    #[error("the cluster CA `{0}` holds no certificate after its key; remove it to make a new CA")]
    NoCertificate(std::path::PathBuf),
}

/// A certificate and its private key, PEM.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize, utoipa::ToSchema)]
pub struct Issued {
    pub cert_pem: String,
    pub key_pem: String,
}

/// The cluster CA: its certificate (PEM) and what signs with its key.
pub struct ClusterCa {
    cert_pem: String,
    issuer: Issuer<'static, KeyPair>,
}

impl std::fmt::Debug for ClusterCa {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClusterCa").finish_non_exhaustive()
    }
}

/// The CA's parameters. They are the same at every start, so an issuer rebuilt from them
/// and the kept key signs exactly as the one that made the kept certificate (rcgen would
/// otherwise need an X.509 parser to read them back).
fn ca_params() -> Result<CertificateParams, rcgen::Error> {
    let mut params = CertificateParams::new(Vec::<String>::new())?;
    params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    params
        .distinguished_name
        .push(DnType::CommonName, "Cocktail-rs cluster CA");
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    Ok(params)
}

impl ClusterCa {
    /// The CA kept in `dir`, made there (mode 0600, the folder 0700) at the first start.
    pub fn read_or_create(dir: &Path) -> Result<Self, CaError> {
        let path = dir.join(CA_FILE);
        if !path.exists() {
            let made = CertifiedIssuer::self_signed(ca_params()?, KeyPair::generate()?)?;
            let text = format!("{}{}", made.key().serialize_pem(), made.pem());
            // `false`: another master made it first; theirs is read below.
            if write_private(dir, CA_FILE, text.as_bytes())? {
                tracing::info!(path = %path.display(), "made the cluster CA (mode 0600)");
            }
        }
        let text = read_private(&path)?;
        let at = text
            .find(CERT_BEGIN)
            .ok_or_else(|| CaError::NoCertificate(path.clone()))?;
        let (key, cert) = text.split_at(at);
        Ok(Self {
            cert_pem: cert.to_owned(),
            issuer: Issuer::new(ca_params()?, KeyPair::from_pem(key)?),
        })
    }

    /// The CA's certificate, PEM: what workers and clients trust.
    pub fn cert_pem(&self) -> &str {
        &self.cert_pem
    }

    /// A new key and a certificate for `hosts` (names or addresses), signed by the CA.
    pub fn issue(&self, hosts: &[String]) -> Result<Issued, CaError> {
        let mut params = CertificateParams::new(hosts.to_vec()).map_err(|e| CaError::Host {
            host: hosts.join(", "),
            message: e.to_string(),
        })?;
        if let Some(first) = hosts.first() {
            params
                .distinguished_name
                .push(DnType::CommonName, first.as_str());
        }
        params.use_authority_key_identifier_extension = true;
        let key = KeyPair::generate()?;
        let cert = params.signed_by(&key, &self.issuer)?;
        Ok(Issued {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        })
    }

    /// A rustls server configuration for `hosts`, signed by the CA: the master's cluster
    /// listener.
    pub fn server_config(&self, hosts: &[String]) -> Result<rustls::ServerConfig, CaError> {
        let issued = self.issue(hosts)?;
        cocktail_service::net::server_tls_from_pem(
            &issued.cert_pem,
            &issued.key_pem,
            "the master's cluster certificate",
        )
        .map_err(|e| CaError::Host {
            host: hosts.join(", "),
            message: e.to_string(),
        })
    }
}

#[cfg(test)]
mod tests {
    use rustls::client::danger::ServerCertVerifier as _;

    use super::*;

    #[test]
    fn a_kept_ca_signs_certificates_that_its_certificate_verifies() {
        let dir = std::env::temp_dir().join(format!("cocktail-ca-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let made = ClusterCa::read_or_create(&dir).unwrap();
        // A restart reads the same CA back.
        let kept = ClusterCa::read_or_create(&dir).unwrap();
        assert_eq!(made.cert_pem(), kept.cert_pem());
        {
            use std::os::unix::fs::PermissionsExt as _;
            let mode = std::fs::metadata(dir.join(CA_FILE))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        let issued = kept
            .issue(&["127.0.0.1".to_owned(), "worker-1".to_owned()])
            .unwrap();
        let roots =
            cocktail_service::net::parse_certificates(kept.cert_pem().as_bytes(), "ca").unwrap();
        let mut store = rustls::RootCertStore::empty();
        store.add(roots[0].clone()).unwrap();
        let verifier = rustls::client::WebPkiServerVerifier::builder_with_provider(
            std::sync::Arc::new(store),
            std::sync::Arc::new(rustls::crypto::ring::default_provider()),
        )
        .build()
        .unwrap();
        let cert = cocktail_service::net::parse_certificates(issued.cert_pem.as_bytes(), "issued")
            .unwrap();
        let now = rustls::pki_types::UnixTime::now();
        for (host, valid) in [("127.0.0.1", true), ("worker-1", true), ("worker-2", false)] {
            let name = rustls::pki_types::ServerName::try_from(host).unwrap();
            let verified = verifier.verify_server_cert(&cert[0], &[], &name, &[], now);
            assert_eq!(verified.is_ok(), valid, "{host}: {verified:?}");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
