//! The layer without axum: a plain hyper server and a tower `service_fn`, the peer address
//! handed to the layer as a `PeerAddr` extension.

mod support;

use std::convert::Infallible;

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use hyper_util::service::TowerToHyperService;
use kova::{Gcra, ManualClock, Quota};
use kova_tower::{Key, Limit, PeerAddr, RateLimitLayer};
use support::{HttpClient, CLIENT};
use tower::ServiceBuilder;

#[tokio::test]
async fn plain_hyper_with_a_peer_addr_extension() {
    let limit = Limit::in_memory_with::<Gcra, _>(
        "ip",
        Quota::per_minute(1).unwrap(),
        Key::peer_ip(),
        ManualClock::new(),
    )
    .unwrap();
    let layer = RateLimitLayer::new(limit);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let Ok((stream, peer)) = listener.accept().await else { return };
            let service = ServiceBuilder::new()
                .map_request(move |mut request: Request<Incoming>| {
                    request.extensions_mut().insert(PeerAddr(peer));
                    request
                })
                .layer(layer.clone())
                .service_fn(|_: Request<Incoming>| async {
                    Ok::<_, Infallible>(Response::new(Full::new(Bytes::from_static(b"hi"))))
                });
            tokio::spawn(
                hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), TowerToHyperService::new(service)),
            );
        }
    });
    let client = HttpClient::new(addr, CLIENT);
    let reply = client.get("/", &[]).await;
    assert_eq!(reply.status, StatusCode::OK);
    assert_eq!(reply.body, "hi");
    assert_eq!(reply.header("ratelimit"), Some(r#""ip";r=0;t=60"#));
    let reply = client.get("/", &[]).await;
    assert_eq!(reply.status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(reply.header("retry-after"), Some("60"));
}
