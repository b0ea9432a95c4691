//! Real HTTP for the tests: an axum server on a loopback port, and a client that can send from a
//! chosen loopback address (127.0.0.1 and 127.0.0.2 are both loopback on Linux, so a test can be
//! an untrusted client and a trusted proxy at once).

#![allow(dead_code, unreachable_pub)]

pub mod sf;

use std::net::{IpAddr, SocketAddr};

use axum::Router;
use bytes::Bytes;
use http::{HeaderMap, Request, StatusCode};
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;

/// The untrusted client's address.
pub const CLIENT: &str = "127.0.0.1";
/// The trusted proxy's address.
pub const PROXY: &str = "127.0.0.2";

/// Serves `app` on 127.0.0.1:0 with connection info (the peer address); returns its address.
pub async fn serve(app: Router) -> SocketAddr {
    serve_with(app, true).await
}

/// Serves `app`, with or without connection info.
pub async fn serve_with(app: Router, connect_info: bool) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind a loopback port");
    let addr = listener.local_addr().expect("local address");
    tokio::spawn(async move {
        if connect_info {
            axum::serve(listener, app.into_make_service_with_connect_info::<SocketAddr>()).await
        } else {
            axum::serve(listener, app).await
        }
    });
    addr
}

/// A response, read whole.
#[derive(Debug)]
pub struct Reply {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: String,
}

impl Reply {
    /// The value of header `name`, as text; `None` when absent.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).map(|v| v.to_str().expect("visible ASCII header"))
    }

    /// Every value of header `name`, in order.
    pub fn header_all(&self, name: &str) -> Vec<&str> {
        self.headers.get_all(name).iter().map(|v| v.to_str().expect("visible ASCII header")).collect()
    }
}

/// An HTTP/1 client sending from one local address.
pub struct HttpClient {
    client: Client<HttpConnector, Empty<Bytes>>,
    server: SocketAddr,
}

impl HttpClient {
    /// A client of `server` whose connections come from `from` (an address on loopback).
    pub fn new(server: SocketAddr, from: &str) -> Self {
        let mut connector = HttpConnector::new();
        connector.set_local_address(Some(from.parse::<IpAddr>().expect("an IP address")));
        let client = Client::builder(TokioExecutor::new()).build(connector);
        HttpClient { client, server }
    }

    /// GET `path` with `headers`.
    pub async fn get(&self, path: &str, headers: &[(&str, &str)]) -> Reply {
        let mut request = Request::get(format!("http://{}{path}", self.server));
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let response =
            self.client.request(request.body(Empty::new()).expect("a request")).await.expect("a response");
        let (parts, body) = response.into_parts();
        let body = body.collect().await.expect("the body").to_bytes();
        Reply {
            status: parts.status,
            headers: parts.headers,
            body: String::from_utf8(body.to_vec()).expect("a UTF-8 body"),
        }
    }
}
