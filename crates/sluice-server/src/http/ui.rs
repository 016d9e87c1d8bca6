//! The dashboard's page and assets (`/ui`), built into the binary, and who may open them.
//!
//! The page is plain JavaScript and SVG with no build step and nothing from the internet:
//! its files live in `crates/sluice-server/ui/` and are served with a content
//! security policy that lets them load only from this server.

use crate::config::settings::UiAccess;
use crate::engine::front::Front;
use crate::http::error::ApiError;
use crate::runtime::handoff::Client;
use axum::extract::{ConnectInfo, Path, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use std::net::SocketAddr;
use std::sync::Arc;

/// Scripts, styles, images and requests from this server only; no frames, no forms.
const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
     img-src 'self'; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// One file of the page: its name under `/ui/`, content type and bytes.
type Asset = (&'static str, &'static str, &'static str);

const INDEX: Asset = ("index.html", "text/html; charset=utf-8", include_str!("../../ui/index.html"));

/// Every file of the page but the page itself.
const ASSETS: [Asset; 9] = [
    ("app.js", "text/javascript; charset=utf-8", include_str!("../../ui/app.js")),
    ("live.js", "text/javascript; charset=utf-8", include_str!("../../ui/live.js")),
    ("playground.js", "text/javascript; charset=utf-8", include_str!("../../ui/playground.js")),
    ("rates.js", "text/javascript; charset=utf-8", include_str!("../../ui/rates.js")),
    ("rows.js", "text/javascript; charset=utf-8", include_str!("../../ui/rows.js")),
    ("store_tables.js", "text/javascript; charset=utf-8", include_str!("../../ui/store_tables.js")),
    ("timeline.js", "text/javascript; charset=utf-8", include_str!("../../ui/timeline.js")),
    ("style.css", "text/css; charset=utf-8", include_str!("../../ui/style.css")),
    ("icon.svg", "image/svg+xml", include_str!("../../ui/icon.svg")),
];

/// Answers when `access` lets `peer` open the dashboard: 404 when it is off, 403 for a
/// client not on the loopback interface while it is for loopback clients only.
pub(crate) fn admit(access: UiAccess, peer: SocketAddr) -> Result<(), ApiError> {
    match access {
        UiAccess::Open => Ok(()),
        UiAccess::Loopback if Client(peer).is_loopback() => Ok(()),
        UiAccess::Loopback => Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "forbidden",
            "the dashboard answers loopback clients only (`--ui open` opens it to every client)",
        )),
        UiAccess::Off => Err(ApiError::new(StatusCode::NOT_FOUND, "not_found", "the dashboard is off (`--ui off`)")),
    }
}

/// `GET /ui`: the page.
pub(crate) async fn index(front: State<Arc<Front>>, client: ConnectInfo<Client>) -> Response {
    serve(&front, client, Some(INDEX))
}

/// `GET /ui/{file}`: the page's scripts, styles and icon.
pub(crate) async fn asset(front: State<Arc<Front>>, client: ConnectInfo<Client>, Path(file): Path<String>) -> Response {
    serve(&front, client, ASSETS.into_iter().find(|(name, _, _)| *name == file))
}

fn serve(front: &Front, ConnectInfo(Client(peer)): ConnectInfo<Client>, asset: Option<Asset>) -> Response {
    if let Err(error) = admit(front.service.settings.ui, peer) {
        return error.into_response();
    }
    let Some((_, content_type, body)) = asset else {
        return ApiError::new(StatusCode::NOT_FOUND, "not_found", "no such file of the dashboard").into_response();
    };
    let mut response = body.into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    headers.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(CONTENT_SECURITY_POLICY));
    headers.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_clients_only_unless_opened_or_off() {
        let local: SocketAddr = "127.0.0.1:1".parse().unwrap();
        let mapped: SocketAddr = "[::ffff:127.0.0.1]:1".parse().unwrap();
        let remote: SocketAddr = "192.0.2.1:1".parse().unwrap();
        assert!(admit(UiAccess::Loopback, local).is_ok());
        assert!(admit(UiAccess::Loopback, mapped).is_ok());
        assert!(admit(UiAccess::Loopback, remote).is_err());
        assert!(admit(UiAccess::Open, remote).is_ok());
        assert!(admit(UiAccess::Off, local).is_err());
    }
}
