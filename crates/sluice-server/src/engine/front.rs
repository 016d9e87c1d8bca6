//! What one worker's front ends (the HTTP API and the gRPC service) serve with.

use crate::engine::Engine;
use crate::engine::service_state::ServiceState;
use std::sync::Arc;

/// The service every worker shares, and this worker's own engine: its store connection is
/// driven by this worker's runtime, its configuration and metrics are the service's.
#[derive(Debug)]
pub(crate) struct Front {
    pub(crate) service: Arc<ServiceState>,
    pub(crate) engine: Engine,
}

impl Front {
    /// The front of the calling worker, with its store connection open.
    pub(crate) async fn for_this_worker(service: Arc<ServiceState>) -> Front {
        let engine = service.engine.for_this_thread().await;
        Front { service, engine }
    }
}
