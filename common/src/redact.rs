//! Configuration values that may carry a credential, so that logging the effective
//! configuration (`tracing::info!(config = ?args)`) never prints one.

use std::convert::Infallible;
use std::fmt;
use std::str::FromStr;

/// What a redacted part prints as.
pub const REDACTED: &str = "<redacted>";

/// A service URL that may hold a user and password (`redis://:PASSWORD@host:6379`,
/// `mongodb://USER:PASSWORD@h1,h2/?replicaSet=rs`). `Debug` and `Display` print it with
/// the user information replaced by `<redacted>`; [`UrlWithCredentials::expose`] gives
/// the URL itself, for the client that connects.
#[derive(Clone, PartialEq, Eq)]
pub struct UrlWithCredentials(String);

impl UrlWithCredentials {
    pub fn new(url: impl Into<String>) -> Self {
        Self(url.into())
    }

    /// The URL as given, credentials included.
    pub fn expose(&self) -> &str {
        &self.0
    }

    pub fn into_exposed(self) -> String {
        self.0
    }

    /// The URL with its user information (everything before the last `@` of the
    /// authority) replaced by `<redacted>`.
    pub fn redacted(&self) -> String {
        // Hand-split rather than `url::Url`: MongoDB's seed lists (`h1:27017,h2:27017`)
        // are not URLs that crate accepts, and a URL it rejects must still be redacted.
        let url = self.0.as_str();
        let start = url.find("://").map_or(0, |i| i + 3);
        let rest = &url[start..];
        let authority = rest.find(['/', '?', '#']).map_or(rest, |end| &rest[..end]);
        match authority.rfind('@') {
            Some(at) => format!("{}{REDACTED}{}", &url[..start], &rest[at..]),
            None => url.to_owned(),
        }
    }
}

impl fmt::Debug for UrlWithCredentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.redacted(), f)
    }
}

impl fmt::Display for UrlWithCredentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.redacted())
    }
}

impl FromStr for UrlWithCredentials {
    type Err = Infallible;

    fn from_str(url: &str) -> Result<Self, Self::Err> {
        Ok(Self::new(url))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_information_is_redacted_and_the_rest_kept() {
        let cases = [
            ("redis://127.0.0.1:6379", "redis://127.0.0.1:6379"),
            (
                "redis://:hunter2@cache:6379/0",
                "redis://<redacted>@cache:6379/0",
            ),
            (
                "rediss://user:p%40ss@cache:6380",
                "rediss://<redacted>@cache:6380",
            ),
            (
                "mongodb://admin:s3cret@h1:27017,h2:27017/cocktail?replicaSet=rs",
                "mongodb://<redacted>@h1:27017,h2:27017/cocktail?replicaSet=rs",
            ),
            (
                "mongodb+srv://u:pw@cluster.example.net",
                "mongodb+srv://<redacted>@cluster.example.net",
            ),
            // An `@` after the authority is not user information.
            ("http://host/path?to=a@b", "http://host/path?to=a@b"),
            // A password holding `@` unescaped: everything up to the last one goes.
            ("redis://:pa@ss@cache:6379", "redis://<redacted>@cache:6379"),
            ("user:pw@host", "<redacted>@host"),
        ];
        for (given, shown) in cases {
            let url: UrlWithCredentials = given.parse().unwrap();
            assert_eq!(url.to_string(), shown, "{given}");
            assert_eq!(format!("{url:?}"), format!("{shown:?}"), "{given}");
            assert_eq!(url.expose(), given);
        }
    }
}
