//! Test harness: real `redis-server` processes on free loopback ports, killed on drop.
//!
//! If `redis-server` is missing, every test that needs it fails with the install command
//! (`crates/kova-redis/install-redis.sh`), so that a machine without Redis never reports these
//! tests as passed. `KOVA_REDIS_TESTS=skip` is the explicit opt-out: the tests then return early
//! with a notice on stderr.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// The opt-out: set to `skip` to run the suite without Redis.
pub const OPT_OUT: &str = "KOVA_REDIS_TESTS";

const INSTALL: &str = "redis-server is not on PATH, and kova-redis's tests run against real \
                       redis-server processes: install it with `crates/kova-redis/install-redis.sh` \
                       (apt-get, dnf, apk or brew), or set KOVA_REDIS_TESTS=skip to skip these tests";

/// What to do about a missing or present `redis-server`: `Ok(true)` run, `Ok(false)` skip (the
/// opt-out), `Err` fail with the message.
pub fn decide(found: bool, opt_out: Option<&str>) -> Result<bool, String> {
    match (found, opt_out) {
        (true, _) => Ok(true),
        (false, Some("skip")) => Ok(false),
        (false, Some(other)) => Err(format!("{INSTALL} ({OPT_OUT}={other:?} is not \"skip\")")),
        (false, None) => Err(INSTALL.to_owned()),
    }
}

/// Whether the binaries exist. Panics when they do not, unless `KOVA_REDIS_TESTS=skip`, which
/// prints a loud skip notice instead.
pub fn redis_available() -> bool {
    let found = Command::new("redis-server")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    let opt_out = std::env::var(OPT_OUT).ok();
    match decide(found, opt_out.as_deref()) {
        Ok(true) => true,
        Ok(false) => {
            // Written to the stderr handle directly: the harness captures eprintln! of passing tests.
            let _ = writeln!(
                std::io::stderr(),
                "\n*** SKIPPED a Redis test ({OPT_OUT}=skip): redis-server is not installed ***\n"
            );
            false
        }
        Err(message) => panic!("{message}"),
    }
}

#[test]
fn a_missing_redis_fails_unless_skipped_explicitly() {
    assert_eq!(decide(true, None), Ok(true));
    assert_eq!(decide(true, Some("skip")), Ok(true));
    assert_eq!(decide(false, Some("skip")), Ok(false));
    let missing = decide(false, None).unwrap_err();
    assert!(missing.contains("install-redis.sh") && missing.contains("KOVA_REDIS_TESTS=skip"), "{missing}");
    assert!(decide(false, Some("1")).unwrap_err().contains("is not \"skip\""));
}

static NEXT_DIR: AtomicU32 = AtomicU32::new(0);

fn scratch_dir() -> PathBuf {
    let n = NEXT_DIR.fetch_add(1, Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("kova-redis-test-{}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create a scratch directory");
    dir
}

/// A port that was free a moment ago (and, for cluster nodes, whose bus port +10000 too).
fn free_port(with_bus: bool) -> u16 {
    loop {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
        let port = listener.local_addr().expect("local addr").port();
        if !with_bus {
            return port;
        }
        if port < 55_000 && TcpListener::bind(("127.0.0.1", port + 10_000)).is_ok() {
            return port;
        }
    }
}

/// Sends PING over a raw socket; true on +PONG.
fn pings(port: u16) -> bool {
    let Ok(mut stream) =
        TcpStream::connect_timeout(&([127, 0, 0, 1], port).into(), Duration::from_millis(200))
    else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_millis(500)));
    if stream.write_all(b"PING\r\n").is_err() {
        return false;
    }
    let mut buf = [0u8; 16];
    matches!(stream.read(&mut buf), Ok(n) if buf[..n].starts_with(b"+PONG"))
}

/// One redis-server process.
pub struct RedisServer {
    child: Option<Child>,
    pub port: u16,
    dir: PathBuf,
    extra: Vec<String>,
}

impl RedisServer {
    /// Starts a plain node (no persistence) on a free port; `None` when skipped.
    pub fn start() -> Option<Self> {
        Self::start_with(&[])
    }

    /// Starts a node with extra arguments.
    pub fn start_with(extra: &[&str]) -> Option<Self> {
        if !redis_available() {
            return None;
        }
        let with_bus = extra.contains(&"--cluster-enabled");
        let dir = scratch_dir();
        for _attempt in 0..10 {
            let port = free_port(with_bus);
            let mut server = RedisServer {
                child: None,
                port,
                dir: dir.clone(),
                extra: extra.iter().map(|s| s.to_string()).collect(),
            };
            if server.spawn() {
                return Some(server);
            }
        }
        panic!("could not start redis-server on a free port after 10 attempts (see {})", dir.display());
    }

    /// Spawns the process on `self.port`; true once it answers PING.
    fn spawn(&mut self) -> bool {
        let log = self.dir.join(format!("redis-{}.log", self.port));
        let mut cmd = Command::new("redis-server");
        cmd.args([
            "--port",
            &self.port.to_string(),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
        ])
        .args(["--dir", self.dir.to_str().expect("utf-8 temp dir")])
        .args(["--logfile", log.to_str().expect("utf-8 temp dir")])
        .args(&self.extra)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
        let mut child = cmd.spawn().expect("spawn redis-server");
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(10) {
            if let Ok(Some(_)) = child.try_wait() {
                return false; // exited: most likely the port was taken meanwhile
            }
            if pings(self.port) {
                self.child = Some(child);
                return true;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = child.kill();
        let _ = child.wait();
        false
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    pub fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// kill -9, and reap.
    pub fn kill9(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill(); // SIGKILL
            let _ = child.wait();
        }
    }

    /// Starts the server again on the same port (after `kill9`).
    pub fn restart(&mut self) {
        assert!(self.child.is_none(), "restart after kill9 only");
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(10) {
            if self.spawn() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("redis-server did not restart on port {}", self.port);
    }

    /// Whether `ROLE` says master.
    pub fn is_master(&self) -> bool {
        self.cli(&["ROLE"]).starts_with("master")
    }

    /// Runs `redis-cli -p PORT args...`, returning stdout.
    pub fn cli(&self, args: &[&str]) -> String {
        let out = Command::new("redis-cli")
            .args(["-h", "127.0.0.1", "-p", &self.port.to_string()])
            .args(args)
            .output()
            .expect("run redis-cli");
        assert!(out.status.success(), "redis-cli {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).into_owned()
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.kill9();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A 3-master Redis Cluster on loopback.
pub struct RedisCluster {
    pub nodes: Vec<RedisServer>,
}

impl RedisCluster {
    pub fn start() -> Option<Self> {
        Self::start_with(0, 5000)
    }

    /// 3 masters with `replicas` replicas each; `node_timeout_ms` is how long a master may be
    /// silent before its replica is promoted.
    pub fn start_with(replicas: usize, node_timeout_ms: u64) -> Option<Self> {
        let mut nodes = Vec::new();
        let timeout = node_timeout_ms.to_string();
        for _ in 0..3 * (1 + replicas) {
            // A relative config file lives in the node's own --dir.
            let node = RedisServer::start_with(&[
                "--cluster-enabled",
                "yes",
                "--cluster-config-file",
                "nodes.conf",
                "--cluster-node-timeout",
                &timeout,
            ])?;
            nodes.push(node);
        }
        let addrs: Vec<String> = nodes.iter().map(|n| n.addr()).collect();
        let out = Command::new("redis-cli")
            .args(["--cluster", "create"])
            .args(&addrs)
            .args(["--cluster-replicas", &replicas.to_string(), "--cluster-yes"])
            .output()
            .expect("run redis-cli --cluster create");
        assert!(
            out.status.success(),
            "redis-cli --cluster create failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        let start = Instant::now();
        loop {
            let ok = nodes.iter().all(|n| n.cli(&["cluster", "info"]).contains("cluster_state:ok"));
            if ok {
                break;
            }
            assert!(start.elapsed() < Duration::from_secs(20), "cluster did not reach cluster_state:ok");
            std::thread::sleep(Duration::from_millis(50));
        }
        let cluster = RedisCluster { nodes };
        // Every replica linked to its master, so that a failover has a replica to promote.
        while cluster.nodes.iter().filter(|n| n.is_master()).count() != 3
            || cluster
                .nodes
                .iter()
                .filter(|n| !n.is_master())
                .any(|n| !n.cli(&["INFO", "replication"]).contains("master_link_status:up"))
        {
            assert!(start.elapsed() < Duration::from_secs(30), "replicas did not link to their masters");
            std::thread::sleep(Duration::from_millis(50));
        }
        Some(cluster)
    }

    pub fn urls(&self) -> Vec<String> {
        self.nodes.iter().map(|n| n.url()).collect()
    }
}
