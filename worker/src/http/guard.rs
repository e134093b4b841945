//! Who may call a worker: with a cluster secret, only its master (and the cluster's own
//! tools), which present it as a bearer token; the health checks stay open for
//! orchestrators (Docker, load balancers) that cannot present it.

use actix_web::body::{EitherBody, MessageBody};
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::middleware::Next;
use cocktail_common::auth::Secret;

use cocktail_service::net;

/// Paths anyone may call: the health checks and the API's description.
pub const OPEN: [&str; 3] = ["/v2/health/live", "/v2/health/ready", "/openapi.json"];

/// App data: whether [`cluster_only`] guards this worker (its `/openapi.json` says so).
#[derive(Debug, Clone, Copy)]
pub struct Guarded(pub bool);

/// Middleware: 401 for a call without the cluster secret, when there is one.
pub async fn cluster_only(
    secret: Option<Secret>,
    request: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<EitherBody<impl MessageBody>>, actix_web::Error> {
    if let Some(secret) = &secret
        && !OPEN.contains(&request.path())
        && !net::presents(request.request(), secret)
    {
        metrics::counter!("cocktail_worker_unauthorized_total").increment(1);
        let refused = net::unauthorized(
            "cocktail-worker",
            "this worker answers only its master: present the cluster secret as `Authorization: Bearer <secret>`".into(),
        );
        return Ok(request.into_response(refused).map_into_right_body());
    }
    next.call(request)
        .await
        .map(ServiceResponse::map_into_left_body)
}
