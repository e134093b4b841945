//! Shared secrets and how they travel: the cluster secret (workers ↔ master), the admin
//! token (the master's admin API) and clients' API keys, each sent as an
//! `Authorization: Bearer …` header (RFC 6750) and compared in constant time.
//!
//! Secrets come from the environment or from a file that only its owner can read (mode
//! 0600), never from a command line that `ps` shows; a master that is given none
//! generates them into its secrets folder (`.cocktail/` by default) and reuses them after
//! a restart, so the workers it launched keep their standing.

use std::fmt;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

/// The cluster secret, as workers and the master read it from their environment.
pub const CLUSTER_SECRET_ENV: &str = "COCKTAIL_CLUSTER_SECRET";
/// The admin token, as the master and the project's tools read it.
pub const ADMIN_TOKEN_ENV: &str = "COCKTAIL_ADMIN_TOKEN";
/// A client's API key, as `cocktail loadgen` reads it.
pub const API_KEY_ENV: &str = "COCKTAIL_API_KEY";
/// File names in the secrets folder.
pub const CLUSTER_SECRET_FILE: &str = "cluster-secret";
pub const ADMIN_TOKEN_FILE: &str = "admin-token";
/// The secrets folder a master uses when told none (relative to where it runs).
pub const DEFAULT_SECRETS_DIR: &str = ".cocktail";

/// Fewest bytes a secret given by the user may have.
pub const MIN_SECRET_BYTES: usize = 16;
/// Random bytes of a generated secret (hex-encoded: twice as many characters).
const GENERATED_BYTES: usize = 32;

/// Why a secret could not be read or made.
#[derive(Debug, thiserror::Error)]
pub enum SecretError {
    #[error("cannot read or write the secret `{path}`: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "the secret `{path}` can be read by others (mode {mode:o}); `chmod 600` it so only its owner can"
    )]
    Exposed { path: PathBuf, mode: u32 },
    #[error("{what} must be at least {MIN_SECRET_BYTES} bytes of printable ASCII; given {given}")]
    Weak { what: String, given: usize },
    #[error("the system's random source failed: {0}")]
    Random(String),
}

/// A secret string: never printed (its `Debug` and `Display` are redacted).
#[derive(Clone, PartialEq, Eq)]
pub struct Secret {
    value: String,
    /// Its SHA-256, kept so that checking a presented secret (every call a worker
    /// answers) hashes only that one.
    digest: [u8; 32],
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(<redacted>)")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

impl Secret {
    /// A secret already checked (or generated).
    fn checked(value: String) -> Self {
        Self {
            digest: digest(&value),
            value,
        }
    }

    /// A secret given by the user (`what` names it in the error): at least
    /// [`MIN_SECRET_BYTES`] of printable ASCII, surrounding whitespace ignored.
    pub fn new(value: &str, what: &str) -> Result<Self, SecretError> {
        let value = value.trim();
        if value.len() < MIN_SECRET_BYTES || !value.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(SecretError::Weak {
                what: what.to_owned(),
                given: value.len(),
            });
        }
        Ok(Self::checked(value.to_owned()))
    }

    /// 32 bytes from the operating system's random source, hex-encoded.
    pub fn generate() -> Result<Self, SecretError> {
        let mut bytes = [0u8; GENERATED_BYTES];
        getrandom::fill(&mut bytes).map_err(|e| SecretError::Random(e.to_string()))?;
        Ok(Self::checked(hex::encode(bytes)))
    }

    /// Reads a secret file, refusing one that its group or others may read.
    pub fn read(path: &Path) -> Result<Self, SecretError> {
        Self::new(&read_private(path)?, &path.display().to_string())
    }

    /// The secret in `dir/name`, made (mode 0600, the folder 0700) if it is not there.
    /// Two processes making it at once agree on the first one written.
    pub fn read_or_create(dir: &Path, name: &str) -> Result<Self, SecretError> {
        let path = dir.join(name);
        if path.exists() {
            return Self::read(&path);
        }
        let secret = Self::generate()?;
        if write_private(dir, name, secret.value.as_bytes())? {
            Ok(secret)
        } else {
            Self::read(&path)
        }
    }

    /// The value itself, to send; never log it.
    pub fn expose(&self) -> &str {
        &self.value
    }

    /// `Bearer <secret>`, the `Authorization` header value that presents it.
    pub fn bearer(&self) -> String {
        format!("Bearer {}", self.value)
    }

    /// Whether `presented` is this secret. Both sides are compared as SHA-256 digests, so
    /// that the comparison takes the same time whatever their contents and lengths.
    pub fn matches(&self, presented: &str) -> bool {
        digest(presented).ct_eq(&self.digest).into()
    }
}

/// SHA-256 of a secret, as API key files store them.
pub fn digest(secret: &str) -> [u8; 32] {
    Sha256::digest(secret.as_bytes()).into()
}

/// The token of an `Authorization: Bearer <token>` header value (the scheme is
/// case-insensitive, RFC 6750 §2.1).
pub fn bearer_token(header: &str) -> Option<&str> {
    let (scheme, token) = header.trim().split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| token.trim())
        .filter(|t| !t.is_empty())
}

/// A secret from an environment variable (unless empty), else from a file, else `None`.
pub fn from_env_or_file(env: &str, file: Option<&Path>) -> Result<Option<Secret>, SecretError> {
    match std::env::var(env) {
        Ok(value) if !value.trim().is_empty() => Secret::new(&value, env).map(Some),
        _ => file.map(Secret::read).transpose(),
    }
}

/// The secrets a tool gives the masters and workers it starts (benchmarks, `cocktail
/// up`'s soak test): the environment's, else fresh ones for this run. They travel in the
/// children's environment.
#[derive(Debug, Clone)]
pub struct RunSecrets {
    pub cluster: Secret,
    pub admin: Secret,
}

impl RunSecrets {
    pub fn from_env_or_new() -> Result<Self, SecretError> {
        let get = |env| match from_env_or_file(env, None)? {
            Some(secret) => Ok(secret),
            None => Secret::generate(),
        };
        Ok(Self {
            cluster: get(CLUSTER_SECRET_ENV)?,
            admin: get(ADMIN_TOKEN_ENV)?,
        })
    }

    /// The environment variables that hand them to a child process.
    pub fn env(&self) -> [(&'static str, &str); 2] {
        [
            (CLUSTER_SECRET_ENV, self.cluster.expose()),
            (ADMIN_TOKEN_ENV, self.admin.expose()),
        ]
    }
}

/// The admin token the project's own tools (`cocktail up`, loadgen, benches) present:
/// `COCKTAIL_ADMIN_TOKEN`, else the one in the default secrets folder, if any.
pub fn admin_token_for_tools() -> Option<Secret> {
    from_env_or_file(
        ADMIN_TOKEN_ENV,
        Some(&Path::new(DEFAULT_SECRETS_DIR).join(ADMIN_TOKEN_FILE)),
    )
    .ok()
    .flatten()
}

/// Reads a private file (a secret, a key), refusing one that its group or others may
/// read.
pub fn read_private(path: &Path) -> Result<String, SecretError> {
    use std::os::unix::fs::PermissionsExt as _;
    let io = |source| SecretError::Io {
        path: path.to_owned(),
        source,
    };
    let mode = std::fs::metadata(path).map_err(io)?.permissions().mode() & 0o777;
    if mode & 0o077 != 0 {
        return Err(SecretError::Exposed {
            path: path.to_owned(),
            mode,
        });
    }
    std::fs::read_to_string(path).map_err(io)
}

/// Writes `dir/name` (mode 0600, the folder made 0700) unless it exists; whether this call
/// wrote it (`false`: a concurrent maker's file was there first, and stays).
pub fn write_private(dir: &Path, name: &str, contents: &[u8]) -> Result<bool, SecretError> {
    use std::os::unix::fs::{DirBuilderExt as _, OpenOptionsExt as _};
    let path = dir.join(name);
    let io = |source| SecretError::Io {
        path: path.clone(),
        source,
    };
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(io)?;
    // Written whole to a private temporary file, then linked into place: a reader never
    // sees half a file, and a concurrent maker's file wins if it was first.
    let staging = dir.join(format!(".{name}.{}", std::process::id()));
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&staging)
        .map_err(io)?;
    file.write_all(contents).map_err(io)?;
    file.sync_all().map_err(io)?;
    drop(file);
    let linked = std::fs::hard_link(&staging, &path);
    let _ = std::fs::remove_file(&staging);
    match linked {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(false),
        Err(e) => Err(io(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_redacted_and_compared_whole() {
        let secret = Secret::new("  correct-horse-battery-staple\n", "test").unwrap();
        assert_eq!(
            format!("{secret:?} {secret}"),
            "Secret(<redacted>) <redacted>"
        );
        assert!(secret.matches("correct-horse-battery-staple"));
        for wrong in [
            "",
            "correct-horse-battery-stapl",
            "correct-horse-battery-staple2",
        ] {
            assert!(!secret.matches(wrong), "{wrong}");
        }
        let err = Secret::new("short", "COCKTAIL_X").unwrap_err().to_string();
        assert!(
            err.contains("COCKTAIL_X must be at least 16 bytes"),
            "{err}"
        );
        assert!(Secret::new("has a space in the middle", "x").is_err());
    }

    #[test]
    fn generated_secrets_are_long_and_distinct() {
        let (a, b) = (Secret::generate().unwrap(), Secret::generate().unwrap());
        assert_eq!(a.expose().len(), 64);
        assert_ne!(a, b);
    }

    #[test]
    fn bearer_tokens_are_parsed_case_insensitively() {
        assert_eq!(bearer_token("Bearer abc"), Some("abc"));
        assert_eq!(bearer_token("bearer  abc "), Some("abc"));
        assert_eq!(bearer_token("Basic abc"), None);
        assert_eq!(bearer_token("Bearer "), None);
        assert_eq!(bearer_token("abc"), None);
    }

    #[test]
    fn secret_files_are_made_private_reused_and_refused_when_exposed() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = std::env::temp_dir().join(format!("cocktail-auth-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let made = Secret::read_or_create(&dir, "s").unwrap();
        let mode = std::fs::metadata(dir.join("s"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        assert_eq!(Secret::read_or_create(&dir, "s").unwrap(), made);
        std::fs::set_permissions(dir.join("s"), std::fs::Permissions::from_mode(0o644)).unwrap();
        let err = Secret::read(&dir.join("s")).unwrap_err().to_string();
        assert!(err.contains("chmod 600"), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
