//! A real `redis-server` on a free loopback port, killed on drop (the approach of kova-redis's
//! tests/integration/server.rs, reduced to one node).
//!
//! A missing `redis-server` fails the test with the install command; `KOVA_REDIS_TESTS=skip`
//! (kova-redis's opt-out) skips it with a notice instead.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// One redis-server process, without persistence (a kill loses its state).
pub struct RedisServer {
    child: Option<Child>,
    pub port: u16,
    dir: PathBuf,
    extra: Vec<String>,
}

impl RedisServer {
    /// Starts one on a free port; `None` when skipped by `KOVA_REDIS_TESTS=skip`.
    pub fn start(test: &str) -> Option<RedisServer> {
        Self::start_with(test, &[])
    }

    /// Starts one with `extra` arguments (a cluster node's also needs its bus port, +10000, free).
    pub fn start_with(test: &str, extra: &[&str]) -> Option<RedisServer> {
        let found = Command::new("redis-server")
            .arg("--version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if !found {
            if std::env::var("KOVA_REDIS_TESTS").as_deref() == Ok("skip") {
                let _ = writeln!(std::io::stderr(), "\n*** SKIPPED {test} (KOVA_REDIS_TESTS=skip) ***\n");
                return None;
            }
            panic!(
                "redis-server is not on PATH: install it with crates/kova-redis/install-redis.sh, \
                 or set KOVA_REDIS_TESTS=skip"
            );
        }
        static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("kova-rls-redis-{test}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("a scratch directory");
        for _attempt in 0..10 {
            let port = free_port(extra.contains(&"--cluster-enabled"));
            let extra = extra.iter().map(|s| s.to_string()).collect();
            let mut server = RedisServer { child: None, port, dir: dir.clone(), extra };
            if server.spawn() {
                return Some(server);
            }
        }
        panic!("redis-server did not start on a free port in 10 attempts (see {})", dir.display());
    }

    /// Spawns the process on `self.port`; true once it answers PING.
    fn spawn(&mut self) -> bool {
        let port = self.port.to_string();
        let mut child = Command::new("redis-server")
            .args(["--port", &port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
            .args(["--dir", self.dir.to_str().expect("utf-8 temp dir")])
            .args(&self.extra)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawns redis-server");
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(10) {
            if let Ok(Some(_)) = child.try_wait() {
                return false; // the port was taken meanwhile
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

    /// Runs `redis-cli -p PORT args...`, returning stdout.
    pub fn cli(&self, args: &[&str]) -> String {
        let out = Command::new("redis-cli")
            .args(["-h", "127.0.0.1", "-p", &self.port.to_string()])
            .args(args)
            .output()
            .expect("runs redis-cli");
        assert!(out.status.success(), "redis-cli {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// kill -9, and reap.
    pub fn kill9(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts it again on the same port (after `kill9`), empty.
    pub fn restart(&mut self) {
        assert!(self.child.is_none(), "restart after kill9 only");
        let start = Instant::now();
        while !self.spawn() {
            assert!(start.elapsed() < Duration::from_secs(10), "redis-server did not restart");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.kill9();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A port that was free a moment ago (and, for a cluster node, its bus port +10000 too).
fn free_port(with_bus: bool) -> u16 {
    loop {
        let port = TcpListener::bind("127.0.0.1:0").expect("binds").local_addr().expect("addr").port();
        if !with_bus || (port < 55_000 && TcpListener::bind(("127.0.0.1", port + 10_000)).is_ok()) {
            return port;
        }
    }
}

/// Three masters on loopback, slots assigned, `cluster_state:ok` on each.
pub struct RedisCluster {
    pub nodes: Vec<RedisServer>,
}

impl RedisCluster {
    pub fn start(test: &str) -> Option<RedisCluster> {
        let flags = ["--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf"];
        let nodes = (0..3).map(|_| RedisServer::start_with(test, &flags)).collect::<Option<Vec<_>>>()?;
        let addrs: Vec<String> = nodes.iter().map(|n| format!("127.0.0.1:{}", n.port)).collect();
        let out = Command::new("redis-cli")
            .args(["--cluster", "create"])
            .args(&addrs)
            .args(["--cluster-replicas", "0", "--cluster-yes"])
            .output()
            .expect("runs redis-cli --cluster create");
        assert!(out.status.success(), "cluster create: {}", String::from_utf8_lossy(&out.stdout));
        let start = Instant::now();
        while !nodes.iter().all(|n| n.cli(&["CLUSTER", "INFO"]).contains("cluster_state:ok")) {
            assert!(start.elapsed() < Duration::from_secs(20), "the cluster never reached cluster_state:ok");
            std::thread::sleep(Duration::from_millis(50));
        }
        Some(RedisCluster { nodes })
    }

    /// `--redis-cluster`'s value.
    pub fn urls(&self) -> String {
        self.nodes.iter().map(RedisServer::url).collect::<Vec<_>>().join(",")
    }
}

fn pings(port: u16) -> bool {
    let Ok(mut stream) =
        TcpStream::connect_timeout(&([127, 0, 0, 1], port).into(), Duration::from_millis(200))
    else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_millis(500)));
    let mut buf = [0u8; 16];
    stream.write_all(b"PING\r\n").is_ok()
        && matches!(stream.read(&mut buf), Ok(n) if buf[..n].starts_with(b"+PONG"))
}
