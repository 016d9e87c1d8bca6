//! The OpenAPI document of the HTTP API (`/openapi.json`), generated from the handlers and
//! the request and response types, plus the answers any request may get whatever its path
//! (a method the path does not take, a head too large, a request not answered in time).
//! `tests/openapi.rs` holds it to what the server sends.

use crate::http::{admin, check, live, ops, playground, rlqs_buckets, top};
use utoipa::OpenApi;
use utoipa::openapi::path::Operation;
use utoipa::openapi::{Ref, RefOr, Response};

/// The OpenAPI document, generated from the handlers and types.
#[derive(OpenApi)]
#[openapi(
    info(title = "Sluice", description = "Exact, fast rate limiting: the HTTP JSON API of `sluice serve`."),
    paths(check::check, check::peek, admin::reset, admin::reload, top::top, rlqs_buckets::buckets, ops::policies, live::live, playground::playground, ops::healthz, ops::readyz, ops::metrics),
    modifiers(&AdminToken, &AnyRequest, &Constraints),
)]
struct ApiDoc;

/// The admin endpoints' bearer token.
struct AdminToken;

impl utoipa::Modify for AdminToken {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        use utoipa::openapi::security::{Http, HttpAuthScheme, SecurityScheme};
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme("admin_token", SecurityScheme::Http(Http::new(HttpAuthScheme::Bearer)));
    }
}

/// The answers any request may get, added to every operation that does not list them.
const ANY_REQUEST: [(&str, &str, bool); 3] = [
    ("405", "The path does not take this method; `Allow` lists those it takes", true),
    (
        "408",
        "Not answered within the request timeout (`request_timeout`), or its body not in full within the body timeout (`body_timeout`); HTTP/1 closes the connection",
        true,
    ),
    ("431", "The request head is over `max_request_head` bytes (no body; HTTP/1 closes the connection)", false),
];

/// Adds [`ANY_REQUEST`] to every operation.
struct AnyRequest;

impl utoipa::Modify for AnyRequest {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        for item in openapi.paths.paths.values_mut() {
            let operations = [&mut item.get, &mut item.post, &mut item.put, &mut item.delete, &mut item.patch];
            operations.into_iter().flatten().for_each(add_any_request);
        }
    }
}

fn add_any_request(operation: &mut Operation) {
    for (status, description, json) in ANY_REQUEST {
        if operation.responses.responses.contains_key(status) {
            continue;
        }
        let mut response = Response::new(description);
        if json {
            let error =
                utoipa::openapi::ContentBuilder::new().schema(Some(Ref::from_schema_name("ErrorResponse"))).build();
            response.content.insert("application/json".to_owned(), error);
        }
        operation.responses.responses.insert(status.to_owned(), RefOr::T(response));
    }
}

/// What the server enforces on request bodies and utoipa's attributes cannot say: policies
/// listed at most once, and a cost up to `u64::MAX` (the schema's `int64` stops at half).
struct Constraints;

impl utoipa::Modify for Constraints {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        use utoipa::openapi::schema::Schema;
        let Some(components) = openapi.components.as_mut() else { return };
        for name in ["CheckRequest", "PeekRequest", "ResetRequest"] {
            let Some(RefOr::T(Schema::Object(body))) = components.schemas.get_mut(name) else { continue };
            if let Some(RefOr::T(Schema::Array(policies))) = body.properties.get_mut("policies") {
                policies.unique_items = true;
            }
            if let Some(RefOr::T(Schema::Object(cost))) = body.properties.get_mut("cost") {
                // `usize` is 64 bits wide on every target Sluice builds for.
                cost.maximum = Some(utoipa::Number::UInt(usize::try_from(u64::MAX).unwrap_or(usize::MAX)));
            }
        }
    }
}

/// The OpenAPI document as JSON.
pub(crate) fn openapi_json() -> String {
    ApiDoc::openapi().to_pretty_json().unwrap_or_default()
}
