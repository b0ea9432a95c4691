//! `envoy.service.ratelimit.v3.RateLimitService` over tonic.

use std::sync::Arc;

use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::Code;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_server::{
    RateLimitService, RateLimitServiceServer,
};
use envoy_types::pb::envoy::service::ratelimit::v3::{RateLimitRequest, RateLimitResponse};
use tokio::task::JoinError;
use tonic::{Request, Response, Status};

use crate::{telemetry, Backend, Decider, MemoryBackend};

/// The gRPC service: every call decided by a shared [`Decider`].
#[derive(Debug)]
pub struct RateLimitGrpc<B: Backend = MemoryBackend> {
    decider: Arc<Decider<B>>,
}

impl<B: Backend> RateLimitGrpc<B> {
    /// Serves `decider`'s decisions.
    pub fn new(decider: Arc<Decider<B>>) -> Self {
        RateLimitGrpc { decider }
    }

    /// The tonic server to add to a router.
    pub fn into_server(self) -> RateLimitServiceServer<Self> {
        RateLimitServiceServer::new(self)
    }
}

#[tonic::async_trait]
impl<B: Backend> RateLimitService for RateLimitGrpc<B> {
    /// Decides on a task of its own, which this call awaits. Tonic drops a call's future when
    /// the client cancels or its deadline passes (Envoy's `timeout`), and a decision dropped
    /// between its checks, or in the middle of giving back what they took, would keep units
    /// that a denied or failed request must not consume. A spawned task is not dropped with
    /// the call: the decision, its refunds and its metrics always run to the end, and only the
    /// answer goes unread.
    async fn should_rate_limit(
        &self,
        request: Request<RateLimitRequest>,
    ) -> Result<Response<RateLimitResponse>, Status> {
        let decider = Arc::clone(&self.decider);
        let request = request.into_inner();
        match tokio::spawn(async move { answer(&decider, &request).await }).await {
            Ok(answer) => answer.map(Response::new),
            Err(failed) => Err(task_failed(&failed)),
        }
    }
}

/// One call's decision, counted and logged as the caller will see it.
async fn answer<B: Backend>(
    decider: &Decider<B>,
    request: &RateLimitRequest,
) -> Result<RateLimitResponse, Status> {
    match decider.decide(request).await {
        Ok(response) => {
            telemetry::request(response.overall_code == Code::OverLimit as i32);
            Ok(response)
        }
        Err(error) => {
            telemetry::request_error(error.reason());
            tracing::debug!(domain = %request.domain, %error, "request refused");
            Err(error.to_status())
        }
    }
}

/// The status of a call whose decision's task ended without an answer. A panic (a backend's:
/// the library itself does not panic on any input) is caught by the task and answered
/// `INTERNAL`, so the call fails alone instead of unwinding into tonic's connection. A task is
/// cancelled only when the runtime shuts down: `UNAVAILABLE`, the service going away.
fn task_failed(failed: &JoinError) -> Status {
    if failed.is_panic() {
        telemetry::request_error("panic");
        tracing::error!(error = %failed, "a decision panicked");
        Status::internal("the rate limit decision failed")
    } else {
        telemetry::request_error("cancelled");
        Status::unavailable("the rate limit service is shutting down")
    }
}
