//! The service an HTTP connection is served by.
//!
//! `POST /v1/check` and `POST /v1/peek`, nearly all of the traffic, go straight to their
//! handlers; every other request goes through axum's router, which also knows them (so it
//! stays a complete description of the API). Skipping the router's layers (routing, path
//! parameters, extensions, body-limit and response-mapping wrappers) saves about a sixth of
//! the user-space instructions of a check (callgrind; `docs/benchmarks.md`, "Service").

use crate::handoff::{Client, Queue};
use crate::http::check;
use crate::service::Service;
use axum::Router;
use axum::extract::{ConnectInfo, Request, State};
use axum::http::Method;
use axum::response::Response;
use axum::serve::IncomingStream;
use std::convert::Infallible;
use std::future::{Future, Ready, ready};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use tower::ServiceExt;

/// Makes one [`Api`] per accepted connection (for `axum::serve`).
#[derive(Clone, Debug)]
pub(crate) struct MakeApi {
    service: Arc<Service>,
    router: Router,
}

impl MakeApi {
    /// Serves `service` with `router` for everything but checks and peeks.
    pub(crate) fn new(service: Arc<Service>, router: Router) -> MakeApi {
        MakeApi { service, router }
    }
}

impl tower::Service<IncomingStream<'_, Queue>> for MakeApi {
    type Response = Api;
    type Error = Infallible;
    type Future = Ready<Result<Api, Infallible>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, stream: IncomingStream<'_, Queue>) -> Self::Future {
        let client = Client(*stream.remote_addr());
        ready(Ok(Api { service: Arc::clone(&self.service), router: self.router.clone(), client }))
    }
}

/// The API, as served to one connection.
#[derive(Clone, Debug)]
pub(crate) struct Api {
    service: Arc<Service>,
    router: Router,
    client: Client,
}

type ResponseFuture = Pin<Box<dyn Future<Output = Result<Response, Infallible>> + Send>>;

impl tower::Service<Request> for Api {
    type Response = Response;
    type Error = Infallible;
    type Future = ResponseFuture;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, mut request: Request) -> ResponseFuture {
        if request.method() == Method::POST {
            let state = State(Arc::clone(&self.service));
            match request.uri().path() {
                "/v1/check" => return Box::pin(async move { Ok(check::check(state, request).await) }),
                "/v1/peek" => return Box::pin(async move { Ok(check::peek(state, request).await) }),
                _ => {}
            }
        }
        request.extensions_mut().insert(ConnectInfo(self.client));
        Box::pin(self.router.clone().oneshot(request))
    }
}
