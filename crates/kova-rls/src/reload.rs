//! Reloading the configuration when its files change.
//!
//! The files are polled (read and compared with what was last read) rather than watched with
//! inotify: a Kubernetes ConfigMap is updated by swapping a symlink to a new directory, and
//! editors save by renaming a new file over the old, both of which a watch on the old file's
//! inode misses; reading a few kilobytes once per interval costs nothing next to the checks.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use crate::{read_sources, telemetry, Backend, Config, Decider};

/// A thread that polls the configuration's files and serves each new valid version; a version
/// that does not validate is refused (logged with its file and line, counted in
/// `kova_rls_config_reloads_total{result="error"}`, `kova_rls_config_current` set to 0) and
/// the previous configuration keeps serving.
#[derive(Debug)]
pub struct Reloader {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Reloader {
    /// Starts polling `path` every `interval`; `loaded` is the text the serving configuration
    /// was built from (so an unchanged file is not reloaded).
    pub fn spawn<B: Backend>(
        decider: Arc<Decider<B>>,
        path: PathBuf,
        interval: Duration,
        loaded: Vec<(PathBuf, String)>,
    ) -> std::io::Result<Reloader> {
        let stop = Arc::new(AtomicBool::new(false));
        let stopping = Arc::clone(&stop);
        let thread = std::thread::Builder::new().name("kova-rls-reload".into()).spawn(move || {
            let mut seen = Ok(loaded);
            // Relaxed: the flag carries no data; the thread only needs to see it eventually.
            while !stopping.load(Ordering::Relaxed) {
                std::thread::sleep(interval);
                let now = read_sources(&path).map_err(|e| e.to_string());
                if now == seen {
                    continue;
                }
                match now
                    .as_ref()
                    .map_err(Clone::clone)
                    .and_then(|s| Config::from_sources(s).map_err(|e| e.to_string()))
                    .and_then(|config| {
                        config.check_limits(|l| decider.backend().accepts(l)).map_err(|e| e.to_string())?;
                        Ok(config)
                    }) {
                    Ok(config) => {
                        let domains = config.domain_names().count();
                        decider.set_config(config);
                        telemetry::reload(true);
                        tracing::info!(path = %path.display(), domains, "configuration reloaded");
                    }
                    Err(error) => {
                        telemetry::reload(false);
                        tracing::error!(%error, "new configuration refused; the previous one keeps serving");
                    }
                }
                seen = now;
            }
        })?;
        Ok(Reloader { stop, thread: Some(thread) })
    }
}

impl Drop for Reloader {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}
