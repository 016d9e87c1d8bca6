//! The service an HTTP connection is served by.
//!
//! `POST /v1/check` and `POST /v1/peek`, nearly all of the traffic, go straight to their
//! handlers; every other request goes through axum's router, which also knows them (so it
//! stays a complete description of the API). Skipping the router's layers (routing, path
//! parameters, extensions, body-limit and response-mapping wrappers), with reading the body
//! without copying the headers, took a check from 37 176 to 27 161 user-space instructions
//! (callgrind, `58e8770`; `docs/benchmarks.md`, "History").
//! [`Api`] is a hyper service itself, so a check's body is read as hyper hands it over,
//! neither boxed into axum's `Body` nor passed through a tower adapter that clones the
//! service per request.

use crate::engine::front::Front;
use crate::http::body::buffered;
use crate::http::check;
use crate::http::deadline::{Deadline, close_after_timeout, within};
use crate::http::error::ApiError;
use crate::runtime::activity::Activity;
use crate::runtime::handoff::Client;
use axum::Router;
use axum::extract::ConnectInfo;
use axum::http::{Method, Request};
use axum::response::{IntoResponse, Response};
use hyper::body::Incoming;
use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use tower::ServiceExt;

/// What every HTTP connection of a worker is served with; makes one [`Api`] per connection.
#[derive(Clone, Debug)]
pub(crate) struct MakeApi {
    front: Arc<Front>,
    router: Router,
}

impl MakeApi {
    /// Serves `front` with `router` for everything but checks and peeks.
    pub(crate) fn new(front: Arc<Front>, router: Router) -> MakeApi {
        MakeApi { front, router }
    }

    /// The API as served to one connection, from `client`, counting its requests in `activity`.
    pub(crate) fn for_client(&self, client: Client, activity: Arc<Activity>) -> Api {
        Api { front: Arc::clone(&self.front), router: self.router.clone(), client, activity }
    }
}

/// The API, as served to one connection.
#[derive(Clone, Debug)]
pub(crate) struct Api {
    front: Arc<Front>,
    router: Router,
    client: Client,
    activity: Arc<Activity>,
}

type ResponseFuture = Pin<Box<dyn Future<Output = Result<Response, Infallible>> + Send>>;

impl hyper::service::Service<Request<Incoming>> for Api {
    type Response = Response;
    type Error = Infallible;
    type Future = ResponseFuture;

    fn call(&self, request: Request<Incoming>) -> ResponseFuture {
        let in_flight = self.activity.begin();
        let version = request.version();
        if request.method() == Method::POST {
            let peek = match request.uri().path() {
                "/v1/check" => Some(false),
                "/v1/peek" => Some(true),
                _ => None,
            };
            if let Some(peek) = peek {
                let front = Arc::clone(&self.front);
                return Box::pin(async move {
                    let _in_flight = in_flight;
                    let response = if peek {
                        check::peek_request(&front, request).await
                    } else {
                        check::check_request(&front, request).await
                    };
                    Ok(close_after_timeout(version, response))
                });
            }
        }
        let routed = self.routed(request);
        Box::pin(async move {
            let _in_flight = in_flight;
            Ok(close_after_timeout(version, routed.await))
        })
    }
}

impl Api {
    /// `request`'s answer by the router, its body read first by the body's deadline, the
    /// whole within the request's.
    fn routed(&self, request: Request<Incoming>) -> impl Future<Output = Response> + Send + 'static {
        let settings = &self.front.service.settings;
        let (body, whole) = (Deadline::body(settings), Deadline::request(settings));
        let (router, client) = (self.router.clone(), self.client);
        let answer = async move {
            let mut request = match buffered(request, body).await {
                Ok(request) => request,
                Err(error) => return error.into_response(),
            };
            request.extensions_mut().insert(ConnectInfo(client));
            router.oneshot(request).await.unwrap_or_else(|never| match never {})
        };
        async move { within(whole.limit, answer).await.unwrap_or_else(|| ApiError::request_timeout(whole).into_response()) }
    }
}
