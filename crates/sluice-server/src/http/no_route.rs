//! axum's own answers for a path it does not route (404) or a method a path does not take
//! (405) have no body: this gives them the JSON error body every other error has.

use crate::http::error::ApiError;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};

/// `response` as it is, unless it is a bodiless 404 or 405; then the same status with the
/// JSON error body (`not_found`, `method_not_allowed`), a 405 keeping its `Allow` header.
pub(crate) async fn explain(response: Response) -> Response {
    let status = response.status();
    let routed = !matches!(status, StatusCode::NOT_FOUND | StatusCode::METHOD_NOT_ALLOWED);
    if routed || response.headers().contains_key(header::CONTENT_TYPE) {
        return response;
    }
    let (code, message) = if status == StatusCode::NOT_FOUND {
        ("not_found", "no such path: /openapi.json lists the API's paths")
    } else {
        ("method_not_allowed", "this path does not take this method: the Allow header lists those it takes")
    };
    let mut answer = ApiError::new(status, code, message).into_response();
    if let Some(allow) = response.headers().get(header::ALLOW) {
        answer.headers_mut().insert(header::ALLOW, allow.clone());
    }
    answer
}
