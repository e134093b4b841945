//! `/dashboard`: a read-only live view of the master for operators, behind the admin
//! token (`session`). The page is HTML with inline SVG drawn on the server (`page`,
//! `charts`); `/dashboard/app.js`, a few lines of plain JavaScript, fetches
//! `/dashboard/data` every sampling period and swaps each view's HTML in. The figures
//! come from the same domain state as `/v1/ensembles`, `/v1/pools`, `/v1/decisions`,
//! `/v1/cost` and `/v1/workers`, plus the `history` ring sampled in the background.

mod charts;
mod page;
pub mod session;

use actix_web::http::header;
use actix_web::{HttpRequest, HttpResponse, HttpResponseBuilder, web};
use cocktail_common::control::MISSED_HEARTBEATS;
use cocktail_common::oip::ErrorBody;
use serde::{Deserialize, Serialize};

use super::routes::AppState;
use crate::MasterError;
use crate::history;
use crate::resources::provider::now_s;
use crate::resources::store::DecisionRecord;
use session::Viewer;

pub use session::Sessions;

/// Longest sign-in form body.
pub const FORM_BYTES: usize = 4096;
/// Autoscaler decisions read for the resources view.
const SCALING_READ: usize = 20;

/// The sign-in form's fields.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
pub struct SignIn {
    /// The master's admin token.
    #[schema(min_length = 1, max_length = 1024)]
    pub token: String,
}

/// Every view's HTML, to swap into the page.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct DashboardData {
    /// When it was drawn, in seconds since the Unix epoch.
    pub at_s: f64,
    /// Seconds between samples (and between the page's refreshes).
    pub period_s: u64,
    /// Each view's HTML by name: traffic, selection, resources, cost, workers.
    pub views: std::collections::BTreeMap<String, String>,
}

/// Response headers of every dashboard page: no framing, no caching, scripts only from
/// this master.
fn html(mut response: HttpResponseBuilder) -> HttpResponseBuilder {
    response
        .content_type("text/html; charset=utf-8")
        .insert_header((
            header::CONTENT_SECURITY_POLICY,
            "default-src 'none'; script-src 'self'; connect-src 'self'; style-src 'unsafe-inline'; \
             img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
        ))
        .insert_header((header::CACHE_CONTROL, "no-store"))
        .insert_header((header::X_CONTENT_TYPE_OPTIONS, "nosniff"))
        .insert_header((header::REFERRER_POLICY, "no-referrer"));
    response
}

async fn inputs(state: &AppState) -> page::Inputs {
    let master = &state.master;
    let scaling = state.controller.as_ref().map(|c| {
        let mut recent = c.store.recent_records::<DecisionRecord>(SCALING_READ);
        recent.sort_by(|a, b| b.at.total_cmp(&a.at));
        recent
    });
    page::Inputs {
        now_s: now_s(),
        samples: state.history.samples(),
        workers: master.registry.view(),
        selection: master.traffic.decisions(),
        scaling,
        heartbeat_ms: master.config.heartbeat.as_millis() as u64,
        missed_heartbeats: MISSED_HEARTBEATS,
    }
}

/// The dashboard, or its sign-in form for a browser without a session.
#[utoipa::path(get, path = "/dashboard", responses(
    (status = 200, description = "The dashboard (HTML with inline SVG), or its sign-in form without a session", body = String, content_type = "text/html")))]
pub async fn show(state: web::Data<AppState>, request: HttpRequest) -> HttpResponse {
    if !session::signed_in(&state, &request) {
        return html(HttpResponse::Ok()).body(page::sign_in(None).into_string());
    }
    let views = page::views(&inputs(&state).await);
    html(HttpResponse::Ok()).body(page::page(&views, state.sessions.required()).into_string())
}

/// Signs in with the admin token (a form field, never a URL): sets the session cookie
/// (`HttpOnly; SameSite=Strict; Path=/dashboard`) and sends the browser to `/dashboard`.
#[utoipa::path(post, path = "/dashboard/sign-in",
    request_body(content = SignIn, content_type = "application/x-www-form-urlencoded"),
    responses(
        (status = 303, description = "Signed in: the session cookie is set; `Location: /dashboard`"),
        (status = 401, description = "A wrong token: the form again, saying so", body = String, content_type = "text/html"),
        (status = 400, description = "No `token` field, or a body that is not a form", body = ErrorBody),
        (status = 413, description = "Body over 4 KiB", body = ErrorBody),
        (status = 415, description = "Body not `application/x-www-form-urlencoded`", body = ErrorBody)))]
pub async fn sign_in(state: web::Data<AppState>, form: web::Form<SignIn>) -> HttpResponse {
    match state
        .sessions
        .sign_in(state.access.admin.as_ref(), &form.token)
    {
        Some(cookie) => HttpResponse::SeeOther()
            .insert_header((header::LOCATION, session::PATH))
            .insert_header((header::CACHE_CONTROL, "no-store"))
            .cookie(cookie)
            .finish(),
        None => {
            metrics::counter!("cocktail_master_unauthorized_total", "realm" => "dashboard")
                .increment(1);
            html(HttpResponse::Unauthorized())
                .body(page::sign_in(Some("That is not the admin token.")).into_string())
        }
    }
}

/// Ends the session: the cookie is removed.
#[utoipa::path(post, path = "/dashboard/sign-out", responses(
    (status = 303, description = "Signed out; `Location: /dashboard`")))]
pub async fn sign_out(state: web::Data<AppState>) -> HttpResponse {
    HttpResponse::SeeOther()
        .insert_header((header::LOCATION, session::PATH))
        .cookie(state.sessions.sign_out())
        .finish()
}

/// Every view's HTML, drawn now: what the page polls.
#[utoipa::path(get, path = "/dashboard/data", security(("admin_token" = []), ("dashboard_session" = [])),
    responses(
        (status = 200, description = "Each view's HTML", body = DashboardData),
        (status = 401, description = "No session cookie and no admin token", body = ErrorBody)))]
pub async fn data(_: Viewer, state: web::Data<AppState>) -> HttpResponse {
    let inputs = inputs(&state).await;
    let views = page::views(&inputs)
        .into_iter()
        .zip(page::VIEWS)
        .map(|(markup, name)| (name.to_owned(), markup.into_string()))
        .collect();
    HttpResponse::Ok()
        .insert_header((header::CACHE_CONTROL, "no-store"))
        .json(DashboardData {
            at_s: inputs.now_s,
            period_s: history::SAMPLE_PERIOD.as_secs(),
            views,
        })
}

/// The page's script: polls `/dashboard/data` and swaps each view in. Written by hand:
/// a dozen lines need no library (and there is no build step).
const SCRIPT: &str = r#""use strict";
(function () {
  const updated = document.getElementById("updated");
  async function refresh() {
    try {
      const response = await fetch("/dashboard/data", { credentials: "same-origin", cache: "no-store" });
      if (response.status === 401) { window.location.reload(); return; }
      if (!response.ok) { throw new Error(response.status + " " + response.statusText); }
      const data = await response.json();
      for (const [name, html] of Object.entries(data.views)) {
        const body = document.querySelector("section[data-view='" + name + "'] .body");
        if (body) { body.innerHTML = html; }
      }
      updated.textContent = "updated " + new Date(data.at_s * 1000).toLocaleTimeString();
      setTimeout(refresh, data.period_s * 1000);
    } catch (error) {
      updated.textContent = "not updated: " + error.message;
      setTimeout(refresh, 5000);
    }
  }
  setTimeout(refresh, 1000);
})();
"#;

/// The page's script (plain JavaScript, no library).
#[utoipa::path(get, path = "/dashboard/app.js", responses(
    (status = 200, description = "The dashboard's script", body = String, content_type = "text/javascript")))]
pub async fn script() -> HttpResponse {
    HttpResponse::Ok()
        .content_type("text/javascript; charset=utf-8")
        .insert_header((header::CACHE_CONTROL, "no-cache"))
        .body(SCRIPT)
}

/// A sign-in body the form extractor refused: 415 for another media type, 413 over
/// [`FORM_BYTES`], else 400 naming what is wrong.
pub fn form_error(error: actix_web::error::UrlencodedError) -> MasterError {
    use actix_web::error::UrlencodedError;
    match error {
        UrlencodedError::ContentType => MasterError::UnsupportedMediaType(
            "the body must be `application/x-www-form-urlencoded`".into(),
        ),
        UrlencodedError::Overflow { .. } => MasterError::PayloadTooLarge { limit: FORM_BYTES },
        other => MasterError::Malformed(format!("the sign-in form: {other}")),
    }
}
