//! `envoy.service.ratelimit.v3.RateLimitService` over tonic.

use std::sync::Arc;

use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::Code;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_server::{
    RateLimitService, RateLimitServiceServer,
};
use envoy_types::pb::envoy::service::ratelimit::v3::{RateLimitRequest, RateLimitResponse};
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
    async fn should_rate_limit(
        &self,
        request: Request<RateLimitRequest>,
    ) -> Result<Response<RateLimitResponse>, Status> {
        match self.decider.decide(request.get_ref()).await {
            Ok(response) => {
                telemetry::request(response.overall_code == Code::OverLimit as i32);
                Ok(Response::new(response))
            }
            Err(error) => {
                telemetry::request_error(error.reason());
                tracing::debug!(domain = %request.get_ref().domain, %error, "request refused");
                Err(error.to_status())
            }
        }
    }
}
