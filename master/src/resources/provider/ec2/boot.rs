//! The boot script (EC2 user data) of a worker instance: fetch or write the cluster
//! secret to a file only root reads, read the instance's id and address from the
//! instance metadata service (IMDSv2), and start `cocktail-worker` for its model,
//! registered under the instance's id at its own address, watching the spot notice.
//! Pure, so that the script is tested as text and the moto harness can read it back.

use cocktail_common::auth::Secret;

/// Where the boot script leaves the cluster secret.
pub const SECRET_FILE: &str = "/etc/cocktail/cluster-secret";
/// Where it leaves the cluster CA's certificate.
pub const CA_FILE: &str = "/etc/cocktail/cluster-ca.pem";
/// The port workers listen on.
pub const WORKER_PORT: u16 = 9000;

/// Where a worker's cluster secret comes from.
#[derive(Debug, Clone)]
pub enum SecretSource {
    /// An AWS Secrets Manager secret, read at boot with the instance profile's rights
    /// (`deploy/aws/`): the secret never appears in the user data.
    SecretsManager {
        id: String,
        region: String,
    },
    /// The secret itself, written from the user data (readable through the instance
    /// metadata service by anything on the instance; docs/security.md).
    Inline(Secret),
    None,
}

/// What one pool's instances run.
#[derive(Debug, Clone)]
pub struct Boot<'a> {
    pub model: &'a str,
    pub threads: u32,
    pub master_url: &'a str,
    pub secret: &'a SecretSource,
    /// The cluster CA's certificate (PEM): the worker trusts it for the master and asks
    /// the master for its own certificate (`--cluster-tls`). `None`: plain HTTP.
    pub ca: Option<&'a str>,
}

/// Quotes `value` for bash (single quotes; a quote inside becomes `'\''`).
fn quote(value: &str) -> String {
    format!("'{}'", value.replace('\'', r"'\''"))
}

impl Boot<'_> {
    /// The script, as EC2 runs it at first boot.
    pub fn script(&self) -> String {
        let mut script = String::from("#!/bin/bash\nset -euo pipefail\n");
        let secret_flag = match self.secret {
            SecretSource::SecretsManager { id, region } => {
                script.push_str(&format!(
                    "install -d -m 700 /etc/cocktail\n\
                     (umask 077; aws secretsmanager get-secret-value --region {} --secret-id {} \
                     --query SecretString --output text > {SECRET_FILE})\n",
                    quote(region),
                    quote(id)
                ));
                format!(" --cluster-secret-file {SECRET_FILE}")
            }
            SecretSource::Inline(secret) => {
                script.push_str(&format!(
                    "install -d -m 700 /etc/cocktail\n\
                     (umask 077; printf '%s' {} > {SECRET_FILE})\n",
                    quote(secret.expose())
                ));
                format!(" --cluster-secret-file {SECRET_FILE}")
            }
            SecretSource::None => String::new(),
        };
        let (scheme, tls_flags) = match self.ca {
            Some(ca) => {
                script.push_str(&format!(
                    "install -d -m 700 /etc/cocktail\n\
                     printf '%s' {} > {CA_FILE}\n",
                    quote(ca)
                ));
                ("https", format!(" --tls-ca {CA_FILE} --cluster-tls"))
            }
            None => ("http", String::new()),
        };
        script.push_str(&format!(
            "IMDS=http://169.254.169.254\n\
             TOKEN=$(curl -s -X PUT $IMDS/latest/api/token -H 'X-aws-ec2-metadata-token-ttl-seconds: 300')\n\
             ID=$(curl -s -H \"X-aws-ec2-metadata-token: $TOKEN\" $IMDS/latest/meta-data/instance-id)\n\
             IP=$(curl -s -H \"X-aws-ec2-metadata-token: $TOKEN\" $IMDS/latest/meta-data/local-ipv4)\n\
             exec cocktail-worker --model {model} --host 0.0.0.0 --port {WORKER_PORT} --threads {threads} \
             --master {master} --id \"$ID\" --advertise-url \"{scheme}://$IP:{WORKER_PORT}\" --imds-url $IMDS{secret_flag}{tls_flags}\n",
            model = quote(self.model),
            threads = self.threads,
            master = quote(self.master_url),
        ));
        script
    }
}

/// What the moto harness needs back from a boot script to start its worker as the
/// instance would.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Parsed {
    pub model: Option<String>,
    /// The inline secret, if the script carries one.
    pub secret: Option<String>,
    pub master: Option<String>,
    /// The cluster CA's certificate, if the worker serves HTTPS.
    pub ca: Option<String>,
}

/// Reads back what [`Boot::script`] wrote.
pub fn parse(script: &str) -> Parsed {
    let unquote = |s: &str| s.trim_matches('\'').replace(r"'\''", "'");
    let flag = |name: &str| {
        script
            .split_whitespace()
            .skip_while(|w| *w != name)
            .nth(1)
            .map(unquote)
    };
    // The value between the `printf` that writes `file` and the redirection into it (a
    // certificate spans several lines).
    let written = |file: &str| {
        let end = script.find(&format!(" > {file}"))?;
        let start = script[..end].rfind("printf '%s' ")? + "printf '%s' ".len();
        Some(unquote(&script[start..end]))
    };
    Parsed {
        model: flag("--model"),
        secret: written(SECRET_FILE),
        master: flag("--master"),
        ca: written(CA_FILE),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_script_starts_the_pools_worker_with_its_secret_from_the_chosen_source() {
        let inline = SecretSource::Inline(Secret::new("it's-a-secret-0123456789", "t").unwrap());
        let boot = Boot {
            model: "lenet",
            threads: 4,
            master_url: "http://10.0.0.1:8080",
            secret: &inline,
            ca: None,
        };
        let script = boot.script();
        assert!(
            script.contains("--model 'lenet' --host 0.0.0.0 --port 9000 --threads 4"),
            "{script}"
        );
        assert!(script.contains(&format!("--cluster-secret-file {SECRET_FILE}")));
        let parsed = parse(&script);
        assert_eq!(parsed.model.as_deref(), Some("lenet"));
        assert_eq!(parsed.secret.as_deref(), Some("it's-a-secret-0123456789"));
        assert_eq!(parsed.master.as_deref(), Some("http://10.0.0.1:8080"));
        assert_eq!(parsed.ca, None);
        assert!(
            script.contains("--advertise-url \"http://$IP:9000\""),
            "{script}"
        );
        let managed = SecretSource::SecretsManager {
            id: "cocktail/cluster-secret".into(),
            region: "eu-west-1".into(),
        };
        let script = Boot {
            secret: &managed,
            ..boot
        }
        .script();
        assert!(script.contains("aws secretsmanager get-secret-value --region 'eu-west-1' --secret-id 'cocktail/cluster-secret'"), "{script}");
        assert_eq!(parse(&script).secret, None);
        assert!(!script.contains("it's-a-secret"));
        // With the cluster's CA: the worker trusts it, serves HTTPS with a certificate
        // from the master, and advertises an https URL.
        let ca = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";
        let script = Boot {
            secret: &managed,
            master_url: "https://10.0.0.1:8443",
            ca: Some(ca),
            ..boot
        }
        .script();
        assert!(
            script.contains(&format!("--tls-ca {CA_FILE} --cluster-tls")),
            "{script}"
        );
        assert!(
            script.contains("--advertise-url \"https://$IP:9000\""),
            "{script}"
        );
        let parsed = parse(&script);
        assert_eq!(parsed.ca.as_deref(), Some(ca));
        assert_eq!(parsed.master.as_deref(), Some("https://10.0.0.1:8443"));
        assert_eq!(parsed.secret, None);
    }
}
