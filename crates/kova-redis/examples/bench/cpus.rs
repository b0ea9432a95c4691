//! Where the bench's own redis-server and its client run. Redis runs each script call on one
//! thread; on a machine of few cores, a client thread (the runtime's workers, `redis-benchmark`)
//! that the scheduler puts on Redis's core stops a batch midway, and its cache comes back cold.
//! That measures the machine's scheduler, not the scripts, and a deployment keeps Redis on a
//! machine of its own. So by default Redis gets the last CPU this process may use, alone, and the
//! client the others; the local-layer rows, which never wait on Redis, run on every CPU.
//! `--no-pin` shares every CPU between them (Linux only sets affinities; elsewhere they share).

use std::sync::OnceLock;

/// Where the server and the client run.
#[derive(Debug, Clone)]
pub enum Placement {
    /// Redis alone on `server`, the client on `client`.
    Apart { server: usize, client: Vec<usize> },
    /// Both on every CPU, and why.
    Shared(&'static str),
}

impl Placement {
    /// A sentence for the report.
    pub fn describe(&self) -> String {
        match self {
            Placement::Apart { server, client } => format!(
                "redis-server ran alone on CPU {server}, the client (its runtime's threads and \
                 redis-benchmark) on CPU {client:?}: on a machine of few cores a client thread \
                 scheduled on Redis's core stalls every script call under way (`--no-pin` shares \
                 the CPUs)"
            ),
            Placement::Shared(why) => format!("redis-server and the client shared every CPU ({why})"),
        }
    }
}

/// The CPUs this process could use when it started.
static ALL: OnceLock<Vec<usize>> = OnceLock::new();

/// Runs `start`, which spawns redis-server, with the calling thread on the server's CPU (a
/// child inherits its parent's affinity), then moves the calling thread to the client's CPUs:
/// the threads it spawns later (build the runtime after this) inherit those.
pub fn start_apart<T>(pin: bool, start: impl FnOnce() -> T) -> (T, Placement) {
    let all = ALL.get_or_init(affinity::allowed);
    let why = if !pin {
        "--no-pin"
    } else if !cfg!(target_os = "linux") {
        "CPU affinity is set on Linux only"
    } else if all.len() < 2 {
        "this process may use one CPU"
    } else {
        let (server, client) = (all[all.len() - 1], all[..all.len() - 1].to_vec());
        if affinity::set(&[server]) {
            let started = start();
            assert!(affinity::set(&client), "moving the bench to CPU {client:?} failed");
            return (started, Placement::Apart { server, client });
        }
        "setting CPU affinity failed"
    };
    (start(), Placement::Shared(why))
}

/// Lets the calling thread run on every CPU the process could use when it started.
pub fn run_anywhere() {
    if let Some(all) = ALL.get() {
        affinity::set(all);
    }
}

#[cfg(target_os = "linux")]
mod affinity {
    use nix::sched::{sched_getaffinity, sched_setaffinity, CpuSet};
    use nix::unistd::Pid;

    /// The CPUs the calling thread may run on (pid 0: the calling thread).
    pub fn allowed() -> Vec<usize> {
        let Ok(set) = sched_getaffinity(Pid::from_raw(0)) else { return Vec::new() };
        (0..CpuSet::count()).filter(|&cpu| set.is_set(cpu).unwrap_or(false)).collect()
    }

    /// Restricts the calling thread to `cpus`; false when the system refuses.
    pub fn set(cpus: &[usize]) -> bool {
        let mut set = CpuSet::new();
        cpus.iter().all(|&cpu| set.set(cpu).is_ok()) && sched_setaffinity(Pid::from_raw(0), &set).is_ok()
    }
}

#[cfg(not(target_os = "linux"))]
mod affinity {
    pub fn allowed() -> Vec<usize> {
        Vec::new()
    }

    pub fn set(_cpus: &[usize]) -> bool {
        false
    }
}
