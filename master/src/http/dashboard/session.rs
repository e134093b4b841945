//! Who may read the dashboard: whoever signed in with the admin token through its form.
//! Signing in sets a cookie holding a random session value of this master process (never
//! the token itself, and never in a URL): `HttpOnly` (no script reads it), `SameSite=
//! Strict` (no other site's page sends it), `Path=/dashboard` (no other route sees it),
//! and `Secure` when the master speaks TLS. Both the token and the cookie are compared
//! in constant time ([`Secret::matches`]). The session value is made at start, so a
//! restart signs every viewer out.

use std::future::{Ready, ready};

use actix_web::cookie::{Cookie, SameSite};
use actix_web::dev::Payload;
use actix_web::{FromRequest, HttpRequest, web};
use cocktail_common::auth::Secret;
use cocktail_service::net::presents;

use crate::MasterError;
use crate::http::routes::AppState;

/// The cookie's name.
pub const COOKIE: &str = "cocktail_dashboard";
/// The only path the cookie is sent to.
pub const PATH: &str = "/dashboard";

/// This process's dashboard session: `None` when the master has no admin token (then
/// the admin API is open too, and so is the dashboard).
#[derive(Debug)]
pub struct Sessions {
    session: Option<Secret>,
    /// Whether the cookie is `Secure` (the master serves HTTPS).
    secure: bool,
}

impl Sessions {
    /// Sessions for a master whose admin token is `admin`.
    pub fn new(admin: Option<&Secret>, secure: bool) -> Result<Self, MasterError> {
        let session = admin
            .map(|_| Secret::generate())
            .transpose()
            .map_err(|e| MasterError::Internal(format!("dashboard session: {e}")))?;
        Ok(Self { session, secure })
    }

    /// Whether sign-in is needed at all.
    pub fn required(&self) -> bool {
        self.session.is_some()
    }

    /// The cookie that signs a viewer in, once `token` proved to be `admin`; `None` for a
    /// wrong token.
    pub fn sign_in(&self, admin: Option<&Secret>, token: &str) -> Option<Cookie<'static>> {
        match (admin, &self.session) {
            (Some(admin), Some(session)) if admin.matches(token) => {
                Some(self.cookie(session.expose().to_owned()))
            }
            (None, None) => Some(self.cookie(String::new())),
            _ => None,
        }
    }

    /// A cookie that ends the session in the browser.
    pub fn sign_out(&self) -> Cookie<'static> {
        let mut cookie = self.cookie(String::new());
        cookie.make_removal();
        cookie
    }

    fn cookie(&self, value: String) -> Cookie<'static> {
        Cookie::build(COOKIE, value)
            .path(PATH)
            .http_only(true)
            .same_site(SameSite::Strict)
            .secure(self.secure)
            .finish()
    }

    /// Whether `request` carries this process's session cookie (or none is needed).
    fn admits(&self, request: &HttpRequest) -> bool {
        match &self.session {
            None => true,
            Some(session) => request
                .cookie(COOKIE)
                .is_some_and(|c| session.matches(c.value())),
        }
    }
}

/// A signed-in viewer of the dashboard: the session cookie, or the admin token as a
/// bearer (for tools).
#[derive(Debug)]
pub struct Viewer;

impl FromRequest for Viewer {
    type Error = MasterError;
    type Future = Ready<Result<Self, MasterError>>;

    fn from_request(request: &HttpRequest, _: &mut Payload) -> Self::Future {
        let Some(state) = request.app_data::<web::Data<AppState>>() else {
            return ready(Err(MasterError::Internal(
                "the app state is missing".into(),
            )));
        };
        let bearer = state
            .access
            .admin
            .as_ref()
            .is_some_and(|admin| presents(request, admin));
        if bearer || state.sessions.admits(request) {
            return ready(Ok(Viewer));
        }
        metrics::counter!("cocktail_master_unauthorized_total", "realm" => "dashboard")
            .increment(1);
        ready(Err(MasterError::Unauthorized {
            realm: "admin",
            message: format!(
                "{} needs a dashboard session (sign in at {PATH}) or the admin token as `Authorization: Bearer <token>`",
                request.path()
            ),
        }))
    }
}

/// Whether `request` may see the dashboard itself rather than its sign-in form.
pub fn signed_in(state: &AppState, request: &HttpRequest) -> bool {
    state.sessions.admits(request)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]
    use super::*;

    #[test]
    fn only_the_admin_token_gets_the_session_cookie() {
        let admin = Secret::new("admin-token-0123456789abcdef", "test").unwrap();
        let sessions = Sessions::new(Some(&admin), false).unwrap();
        assert!(sessions.sign_in(Some(&admin), "wrong").is_none());
        let cookie = sessions
            .sign_in(Some(&admin), "admin-token-0123456789abcdef")
            .unwrap();
        assert_ne!(cookie.value(), admin.expose());
        assert_eq!(cookie.http_only(), Some(true));
        assert_eq!(cookie.same_site(), Some(SameSite::Strict));
        assert_eq!(cookie.path(), Some(PATH));
        let rendered = cookie.to_string();
        assert!(rendered.contains("HttpOnly") && rendered.contains("SameSite=Strict"));
    }
}
