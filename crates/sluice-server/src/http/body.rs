//! Reading request bodies: at most [`MAX_BODY_BYTES`], within the body's deadline.
//!
//! A check's body is at most 64 KiB and a real client sends it in milliseconds, but a
//! request in flight keeps its connection's slot ([`crate::runtime::handoff`]): without a
//! deadline of its own, connections whose bodies never come would hold their listener
//! until the request timeout, and shut out every client from their address (issue 46.4).

use crate::http::MAX_BODY_BYTES;
use crate::http::deadline::{Deadline, within};
use crate::http::error::ApiError;
use axum::BoxError;
use axum::body::{Body, Bytes};
use axum::http::{Request, StatusCode};
use http_body_util::{BodyExt, LengthLimitError, Limited};

/// A request body as the handlers read it: axum's, or hyper's own.
pub(crate) trait RequestBody: hyper::body::Body<Data = Bytes, Error: Into<BoxError>> {}

impl<B: hyper::body::Body<Data = Bytes, Error: Into<BoxError>>> RequestBody for B {}

/// Reads a whole request body, up to [`MAX_BODY_BYTES`]: 413 beyond (refused before reading
/// when `Content-Length` says so), 400 when the client stops sending, 408 when the body has
/// not come in full by `deadline`.
pub(crate) async fn read_body(body: impl RequestBody, deadline: Deadline) -> Result<Bytes, ApiError> {
    match within(deadline.limit, Limited::new(body, MAX_BODY_BYTES).collect()).await {
        None => Err(ApiError::body_timeout(deadline)),
        Some(Ok(collected)) => Ok(collected.to_bytes()),
        Some(Err(error)) if error.is::<LengthLimitError>() => Err(ApiError::body_too_large()),
        Some(Err(error)) => {
            Err(ApiError::new(StatusCode::BAD_REQUEST, "bad_request", format!("cannot read the request body: {error}")))
        }
    }
}

/// `request` with its body read in full by `deadline` ([`read_body`]), for the router's
/// handlers, whose extractors would otherwise wait for it as long as the request timeout.
/// A request without a body is handed on as it is.
pub(crate) async fn buffered<B: RequestBody + Send + 'static>(
    request: Request<B>,
    deadline: Deadline,
) -> Result<Request<Body>, ApiError> {
    if hyper::body::Body::is_end_stream(request.body()) {
        return Ok(request.map(Body::new));
    }
    let (parts, body) = request.into_parts();
    let body = read_body(body, deadline).await?;
    Ok(Request::from_parts(parts, Body::from(body)))
}
