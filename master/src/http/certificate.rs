//! `POST /v1/workers/certificate`: a worker a provider launched asks the cluster's CA (the
//! master) for the certificate it serves HTTPS with, for the host it registers at. The
//! same rules as registration decide (the cluster secret, `--worker-networks`, and for a
//! pool the controller manages, an instance it launched at that host), so a holder of
//! the secret gets no certificate for a host that is not its own.

use actix_web::{HttpResponse, web};
use cocktail_common::control::Registration;
use cocktail_common::oip::ErrorBody;

use super::auth::Cluster;
use super::routes::AppState;
use crate::MasterError;
use crate::access::ca::Issued;
use crate::serving::control::check_registration;

/// A certificate and key for the host of `url`, signed by the cluster CA. The body is the
/// registration the worker sends next.
#[utoipa::path(post, path = "/v1/workers/certificate", security(("cluster_secret" = [])), request_body = Registration,
    responses((status = 401, description = "No or a wrong cluster secret", body = ErrorBody),
        (status = 403, description = "A URL outside `--worker-networks`, an instance the controller did not launch at that address, or a master that signs no certificates (`--no-cluster-tls`)", body = ErrorBody),
        (status = 200, description = "The certificate (PEM) for the URL's host and its key", body = Issued),
        (status = 400, description = "Malformed JSON or a missing field", body = ErrorBody),
        (status = 413, description = "Body over 64 KiB", body = ErrorBody),
        (status = 415, description = "Body not `application/json`", body = ErrorBody),
        (status = 422, description = "Unknown model, a URL that is not https, or a bad id, naming the field", body = ErrorBody)))]
pub async fn certificate(
    _: Cluster,
    state: web::Data<AppState>,
    body: web::Json<Registration>,
) -> Result<HttpResponse, MasterError> {
    let Some(ca) = &state.access.ca else {
        return Err(MasterError::Forbidden {
            field: "url".into(),
            message: "this master signs no certificates (it runs without a provider or with `--no-cluster-tls`); give the worker its own (`--tls-cert`)".into(),
        });
    };
    let host = https_host(&body.url)?;
    admit(&state, &body).await?;
    let issued = ca
        .issue(&[host])
        .map_err(|e| MasterError::invalid("url", e.to_string()))?;
    metrics::counter!("cocktail_master_certificates_issued_total").increment(1);
    tracing::info!(id = %body.id, url = %body.url, "issued a worker certificate");
    Ok(HttpResponse::Ok().json(issued))
}

/// Whether `registration` may join: a model of the zoo and well-formed fields, a URL in
/// `--worker-networks`, and for a pool the controller manages, an instance it launched at
/// that host. Registration and certificates go by the same rules.
pub async fn admit(state: &AppState, registration: &Registration) -> Result<(), MasterError> {
    check_registration(&state.master.tasks(), registration)?;
    state.access.networks.admit(&registration.url).await?;
    if let Some(controller) = &state.controller {
        controller.admits(registration).await?;
    }
    Ok(())
}

/// The host of an https URL (brackets of an IPv6 address removed), or 422 naming `url`.
fn https_host(url: &str) -> Result<String, MasterError> {
    let parsed = reqwest::Url::parse(url)
        .map_err(|e| MasterError::invalid("url", format!("`{url}`: {e}")))?;
    match (parsed.scheme(), parsed.host_str()) {
        ("https", Some(host)) => Ok(host.trim_matches(['[', ']']).to_owned()),
        _ => Err(MasterError::invalid(
            "url",
            format!("a certificate is for an https URL with a host; given `{url}`"),
        )),
    }
}

/// A worker of a pool the controller manages must serve HTTPS when the master is the
/// cluster's CA: every call between them is then TLS. 403 naming `url` otherwise.
pub fn require_tls(state: &AppState, registration: &Registration) -> Result<(), MasterError> {
    let managed = state
        .controller
        .as_ref()
        .is_some_and(|c| c.manages(&registration.model));
    if state.access.ca.is_some() && managed && !registration.url.starts_with("https://") {
        return Err(MasterError::Forbidden {
            field: "url".into(),
            message: format!(
                "pool `{}` takes only workers serving HTTPS with a certificate from this master (`cocktail-worker --cluster-tls`); given `{}`",
                registration.model, registration.url
            ),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_https_urls_with_a_host_get_a_certificate() {
        assert_eq!(https_host("https://10.0.0.5:9000").unwrap(), "10.0.0.5");
        assert_eq!(https_host("https://[::1]:9000").unwrap(), "::1");
        assert_eq!(https_host("https://worker-3:9000/").unwrap(), "worker-3");
        for bad in ["http://10.0.0.5:9000", "not a url", "unix:/tmp/s"] {
            let error = https_host(bad).unwrap_err().to_string();
            assert!(error.contains("`url`"), "{error}");
        }
    }
}
