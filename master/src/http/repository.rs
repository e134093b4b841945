//! The zoo while serving: Triton's model repository index (`POST /v2/repository/index`)
//! and the reload of the manifest (`POST /v1/zoo/reload`, as SIGHUP does).

use actix_web::{HttpResponse, web};
use cocktail_common::oip::ErrorBody;

use super::auth::Admin;
use super::routes::AppState;
use crate::MasterError;
use crate::serving::service::{ModelIndex, ZooChange};

/// Every model of the zoo with its state (`READY` while a worker serves it), and every
/// removed one whose workers are still draining (`UNLOADING`).
#[utoipa::path(post, path = "/v2/repository/index", security(("admin_token" = [])),
    responses((status = 401, description = "No or a wrong admin token", body = ErrorBody),
        (status = 200, description = "The zoo's models", body = Vec<ModelIndex>)))]
pub async fn repository_index(_: Admin, state: web::Data<AppState>) -> HttpResponse {
    HttpResponse::Ok().json(state.master.model_index())
}

/// Re-reads the zoo manifest (`--zoo`) and checks it as at start: new models become
/// selectable (a resource controller launches their pools once an ensemble uses them),
/// removed ones get no new request and their pools drain, and the selections of every
/// task whose models changed are made again. A broken manifest is refused (422, naming
/// the problem) and the zoo served stays.
#[utoipa::path(post, path = "/v1/zoo/reload", security(("admin_token" = [])),
    responses((status = 401, description = "No or a wrong admin token", body = ErrorBody),
        (status = 200, description = "Reloaded: what changed", body = ZooChange),
        (status = 422, description = "Refused, naming the problem; the zoo served is unchanged", body = ErrorBody)))]
pub async fn reload(_: Admin, state: web::Data<AppState>) -> Result<HttpResponse, MasterError> {
    let change = state.reloader.reload("admin").await?;
    Ok(HttpResponse::Ok().json(change))
}
