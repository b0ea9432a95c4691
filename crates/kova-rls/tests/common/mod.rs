//! A real `kova-rls` process on loopback and a tonic client built from the same Envoy types.

#![allow(dead_code)]

pub mod redis;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub use envoy_types::pb::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::Entry;
pub use envoy_types::pb::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
pub use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::Code;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_client::RateLimitServiceClient;
pub use envoy_types::pb::envoy::service::ratelimit::v3::{RateLimitRequest, RateLimitResponse};
use tonic::transport::Channel;

/// The example configuration shipped with the crate.
pub fn example_config() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/config.yaml")
}

/// A running `kova-rls`, killed on drop.
pub struct Service {
    child: Child,
    pub grpc: SocketAddr,
    pub http: SocketAddr,
}

impl Service {
    /// Starts the binary on `config` with ports chosen by the OS, plus `extra` flags.
    pub fn start(config: &Path, extra: &[&str]) -> Service {
        Service::spawn(config, extra, Stdio::inherit())
    }

    /// As [`start`](Self::start), its logs (at `info`) written to `log`.
    pub fn start_logged(config: &Path, extra: &[&str], log: &Path) -> Service {
        let file = std::fs::File::create(log).expect("creates the log file");
        Service::spawn(config, &[extra, &["--log", "info"]].concat(), Stdio::from(file))
    }

    fn spawn(config: &Path, extra: &[&str], stderr: Stdio) -> Service {
        let mut child = Command::new(env!("CARGO_BIN_EXE_kova-rls"))
            .arg("--config")
            .arg(config)
            .args(["--grpc-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0"])
            .env("KOVA_RLS_LOG", "warn")
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .expect("the kova-rls binary starts");
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("piped stdout"))
            .read_line(&mut line)
            .expect("reads stdout");
        let addr = |name: &str| -> SocketAddr {
            let field = line
                .split_whitespace()
                .find_map(|w| w.strip_prefix(name))
                .unwrap_or_else(|| panic!("no {name} in {line:?}"));
            field.parse().expect("an address")
        };
        let (grpc, http) = (addr("grpc="), addr("http="));
        Service { child, grpc, http }
    }

    /// A client on a fresh connection.
    pub async fn client(&self) -> RateLimitServiceClient<Channel> {
        RateLimitServiceClient::connect(format!("http://{}", self.grpc)).await.expect("connects")
    }

    /// `GET path` on the HTTP listener: (status code, body).
    pub fn http_get(&self, path: &str) -> (u16, String) {
        let mut stream = TcpStream::connect(self.http).expect("connects");
        stream.set_read_timeout(Some(Duration::from_secs(10))).expect("timeout");
        write!(stream, "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").expect("writes");
        let mut response = String::new();
        stream.read_to_string(&mut response).expect("reads");
        let code = response.split_whitespace().nth(1).and_then(|c| c.parse().ok()).expect("a status line");
        let body = response.split_once("\r\n\r\n").map(|(_, b)| b.to_owned()).unwrap_or_default();
        (code, body)
    }

    /// The value of the metric line that starts with `series` (its name and labels), 0 when absent.
    pub fn metric(&self, series: &str) -> f64 {
        let (_, body) = self.http_get("/metrics");
        body.lines()
            .find_map(|l| l.strip_prefix(series).and_then(|rest| rest.trim().parse().ok()))
            .unwrap_or(0.0)
    }

    /// Waits until `metric(series) >= at_least`, at most 20 s.
    pub fn wait_metric(&self, series: &str, at_least: f64) {
        let start = Instant::now();
        while self.metric(series) < at_least {
            assert!(start.elapsed() < Duration::from_secs(20), "{series} never reached {at_least}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Sends SIGTERM and waits for the exit status.
    pub fn terminate(mut self) -> std::process::ExitStatus {
        let status =
            Command::new("kill").args(["-TERM", &self.child.id().to_string()]).status().expect("kill runs");
        assert!(status.success());
        let start = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().expect("waits") {
                return status;
            }
            assert!(start.elapsed() < Duration::from_secs(20), "kova-rls did not stop on SIGTERM");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Whether the process is still running.
    pub fn is_running(&mut self) -> bool {
        self.child.try_wait().expect("waits").is_none()
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A descriptor of `(key, value)` entries.
pub fn descriptor(entries: &[(&str, &str)]) -> RateLimitDescriptor {
    RateLimitDescriptor {
        entries: entries.iter().map(|(k, v)| Entry { key: (*k).into(), value: (*v).into() }).collect(),
        ..Default::default()
    }
}

/// A request of `descriptors` in `domain` with `hits_addend`.
pub fn request(domain: &str, descriptors: Vec<RateLimitDescriptor>, hits_addend: u32) -> RateLimitRequest {
    RateLimitRequest { domain: domain.into(), descriptors, hits_addend }
}

/// A header the response asks Envoy to add.
pub fn header<'a>(response: &'a RateLimitResponse, name: &str) -> Option<&'a str> {
    response.response_headers_to_add.iter().find(|h| h.key == name).map(|h| h.value.as_str())
}

/// A file in a fresh temporary directory of this test.
pub fn temp_file(test: &str, name: &str, text: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("kova-rls-{test}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let path = dir.join(name);
    std::fs::write(&path, text).expect("writes");
    path
}
