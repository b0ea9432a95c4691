//! Reloading the configuration when its files change.
//!
//! The files are polled (read and compared with what was last read) rather than watched with
//! inotify: a Kubernetes ConfigMap is updated by swapping a symlink to a new directory, and
//! editors save by renaming a new file over the old, both of which a watch on the old file's
//! inode misses; reading a few kilobytes once per interval costs nothing next to the checks.
//!
//! A read can catch a file mid-write, or a directory mid-swap (some files new, some old, one
//! gone between the listing and its read), and a torn version may still validate (a limit of
//! `30` cut to `3`). So a version is acted on only once two polls in a row read it the same:
//! a change serves one to two intervals after it is written, and a write that pauses for less
//! than an interval is never served half done.

use std::path::PathBuf;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use crate::{read_sources, telemetry, Backend, Config, Decider};

/// The configuration's files and their text, or why they could not be read.
type Read = Result<Vec<(PathBuf, String)>, String>;

/// A thread that polls the configuration's files and serves each new valid version once it
/// reads the same on two polls in a row; a version that does not validate is refused (logged
/// with its file and line, counted in `kova_rls_config_reloads_total{result="error"}`,
/// `kova_rls_config_current` set to 0) and the previous configuration keeps serving. Dropping
/// it stops the thread without waiting for the next poll (a poll under way finishes first).
#[derive(Debug)]
pub struct Reloader {
    /// Dropped to stop the thread: its wait between polls ends at the disconnection, where a
    /// sleep would hold shutdown for up to a whole interval.
    stop: Option<mpsc::Sender<()>>,
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
        let (stop, stopped) = mpsc::channel::<()>();
        let read = {
            let path = path.clone();
            move || read_sources(&path).map_err(|e| e.to_string())
        };
        let mut poller = Poller::new(decider, path, read, loaded);
        let thread = std::thread::Builder::new().name("kova-rls-reload".into()).spawn(move || {
            // Nothing is ever sent: the wait ends by its timeout (poll) or by the sender's drop.
            while let Err(RecvTimeoutError::Timeout) = stopped.recv_timeout(interval) {
                poller.poll();
            }
        })?;
        Ok(Reloader { stop: Some(stop), thread: Some(thread) })
    }
}

impl Drop for Reloader {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// What one poll did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Polled {
    /// The files read as the version last acted on (served or refused).
    Unchanged,
    /// The files read differently from the poll before: maybe still being written, not acted
    /// on.
    Settling,
    /// A new configuration serves.
    Applied,
    /// A new version was refused (the error); the previous configuration keeps serving.
    Refused(String),
}

/// One poll at a time: read the files, and act on a changed version once it is stable.
struct Poller<B: Backend, R> {
    decider: Arc<Decider<B>>,
    /// What the log names.
    path: PathBuf,
    read: R,
    /// The read last acted on (served or refused).
    seen: Read,
    /// The previous poll's read: a version is stable when this poll reads it again.
    last: Read,
}

impl<B: Backend, R: FnMut() -> Read> Poller<B, R> {
    fn new(decider: Arc<Decider<B>>, path: PathBuf, read: R, loaded: Vec<(PathBuf, String)>) -> Self {
        Poller { decider, path, read, seen: Ok(loaded.clone()), last: Ok(loaded) }
    }

    fn poll(&mut self) -> Polled {
        let now = (self.read)();
        if now == self.seen {
            self.last = now;
            return Polled::Unchanged;
        }
        if now != self.last {
            self.last = now;
            return Polled::Settling;
        }
        let polled = match self.build(&now) {
            Ok(config) => {
                let domains = config.domain_names().count();
                self.decider.set_config(config);
                telemetry::reload(true);
                tracing::info!(path = %self.path.display(), domains, "configuration reloaded");
                Polled::Applied
            }
            Err(error) => {
                telemetry::reload(false);
                tracing::error!(%error, "new configuration refused; the previous one keeps serving");
                Polled::Refused(error)
            }
        };
        self.seen = now;
        polled
    }

    /// The configuration `read` holds, checked against the backend's bounds.
    fn build(&self, read: &Read) -> Result<Config, String> {
        let sources = read.as_ref().map_err(Clone::clone)?;
        let config = Config::from_sources(sources).map_err(|e| e.to_string())?;
        config.check_limits(|l| self.decider.backend().accepts(l)).map_err(|e| e.to_string())?;
        Ok(config)
    }
}

#[cfg(test)]
#[path = "reload/tests.rs"]
mod tests;
