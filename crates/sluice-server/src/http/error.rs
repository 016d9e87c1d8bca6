//! Errors as HTTP responses: a status, and a JSON body with a stable code.

use crate::engine::RequestError;
use crate::http::MAX_BODY_BYTES;
use crate::http::api::ErrorResponse;
use crate::http::deadline::Deadline;
use axum::Json;
use axum::extract::rejection::{JsonRejection, QueryRejection};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use sluice_core::StoreError;

/// An error answered to an HTTP client.
#[derive(Debug)]
pub(crate) struct ApiError {
    status: StatusCode,
    code: &'static str,
    message: String,
}

impl ApiError {
    pub(crate) fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> ApiError {
        ApiError { status, code, message: message.into() }
    }

    pub(crate) fn unauthorized(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::UNAUTHORIZED, "unauthorized", message)
    }

    /// 408: the request was not answered within `deadline` (the request timeout).
    pub(crate) fn request_timeout(deadline: Deadline) -> ApiError {
        let message = format!("the request was not answered within {:?} ({})", deadline.limit, deadline.setting);
        ApiError::new(StatusCode::REQUEST_TIMEOUT, deadline.setting, message)
    }

    /// 408: the request's body did not come in full within `deadline` (the body timeout,
    /// or the request timeout if shorter).
    pub(crate) fn body_timeout(deadline: Deadline) -> ApiError {
        let message =
            format!("the request body did not come in full within {:?} ({})", deadline.limit, deadline.setting);
        ApiError::new(StatusCode::REQUEST_TIMEOUT, deadline.setting, message)
    }

    /// 413: the body is over [`MAX_BODY_BYTES`].
    pub(crate) fn body_too_large() -> ApiError {
        let message = format!("the request body is over {MAX_BODY_BYTES} bytes");
        ApiError::new(StatusCode::PAYLOAD_TOO_LARGE, "payload_too_large", message)
    }
}

impl From<QueryRejection> for ApiError {
    /// A query string that does not parse: 400, with axum's words for what is wrong.
    fn from(rejection: QueryRejection) -> ApiError {
        ApiError::new(StatusCode::BAD_REQUEST, "bad_request", rejection.body_text())
    }
}

impl From<JsonRejection> for ApiError {
    fn from(rejection: JsonRejection) -> ApiError {
        let (status, code) = match &rejection {
            JsonRejection::MissingJsonContentType(_) => (StatusCode::UNSUPPORTED_MEDIA_TYPE, "unsupported_media_type"),
            JsonRejection::BytesRejection(_) if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE => {
                (StatusCode::PAYLOAD_TOO_LARGE, "payload_too_large")
            }
            _ => (StatusCode::BAD_REQUEST, "bad_request"),
        };
        let message = match &rejection {
            // In the words check and peek use (`json_body`): serde's own message.
            JsonRejection::JsonDataError(_) | JsonRejection::JsonSyntaxError(_) => {
                format!("invalid request body: {}", deepest_cause(&rejection))
            }
            _ => rejection.body_text(),
        };
        ApiError::new(status, code, message)
    }
}

/// The last error in `error`'s chain of sources: the parser's own message.
fn deepest_cause<'a>(error: &'a (dyn std::error::Error + 'static)) -> &'a (dyn std::error::Error + 'static) {
    let mut deepest = error;
    while let Some(source) = deepest.source() {
        deepest = source;
    }
    deepest
}

/// Parses a JSON body borrowing from it (the hot path: no copies of keys and names), with
/// the same answers as axum's `Json`: 415 without a JSON content type, 400 with serde's
/// message (line and column) for a body that does not fit.
pub(crate) fn json_body<'a, T: serde::Deserialize<'a>>(headers: &HeaderMap, body: &'a [u8]) -> Result<T, ApiError> {
    let content_type = headers.get(header::CONTENT_TYPE).and_then(|value| value.to_str().ok()).unwrap_or("");
    let essence = content_type.split(';').next().unwrap_or("").trim();
    let is_json = essence.eq_ignore_ascii_case("application/json")
        || (essence.starts_with("application/") && essence.ends_with("+json"));
    if !is_json {
        let message = "expected a request body with `Content-Type: application/json`";
        return Err(ApiError::new(StatusCode::UNSUPPORTED_MEDIA_TYPE, "unsupported_media_type", message));
    }
    serde_json::from_slice(body).map_err(|error| {
        ApiError::new(StatusCode::BAD_REQUEST, "bad_request", format!("invalid request body: {error}"))
    })
}

impl From<RequestError> for ApiError {
    fn from(error: RequestError) -> ApiError {
        let message = error.to_string();
        match error {
            RequestError::UnknownPolicy { .. } => ApiError::new(StatusCode::NOT_FOUND, "unknown_policy", message),
            RequestError::DuplicatePolicy(_) | RequestError::NoPolicy => {
                ApiError::new(StatusCode::BAD_REQUEST, "bad_request", message)
            }
            RequestError::InvalidKey(_) => ApiError::new(StatusCode::BAD_REQUEST, "invalid_key", message),
            RequestError::Store(StoreError::Unavailable(cause)) => ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "store_unavailable",
                format!("store unavailable: {cause}"),
            ),
            // Not the caller's fault, and it passes: keys stop being limited, or expire.
            RequestError::Store(StoreError::Full { .. }) => {
                ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "store_full", message)
            }
            RequestError::Store(StoreError::Refused(_)) => {
                ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "refused", message)
            }
            RequestError::Store(_) => ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "store_error", message),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut response =
            (self.status, Json(ErrorResponse { error: self.code, message: self.message })).into_response();
        if self.status == StatusCode::SERVICE_UNAVAILABLE {
            response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
        }
        if self.status == StatusCode::UNAUTHORIZED {
            response.headers_mut().insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        response
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Not the caller's fault, and it passes: 503 with a retry, and the cause named.
    #[test]
    fn a_memory_store_full_of_limited_keys_answers_503_store_full() {
        let error = ApiError::from(RequestError::Store(StoreError::Full { max_keys: 16, max_memory: 1 << 20 }));
        assert_eq!((error.status, error.code), (StatusCode::SERVICE_UNAVAILABLE, "store_full"));
        assert!(error.message.contains("full of limited keys (max_keys 16"), "{}", error.message);
        let response = error.into_response();
        assert_eq!(response.headers()[header::RETRY_AFTER], "1");
    }
}
