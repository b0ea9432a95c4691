//! The reloader's polls on scripted reads: what it serves after each, no thread, no clock.

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::Arc;

use super::{Polled, Poller, Read};
use crate::{Decider, Limit, MemoryBackend, MemoryOptions, RequestLimits};

/// `other` at 1 an hour, then `user` at `user` an hour.
fn yaml(user: u32) -> String {
    format!(
        "domain: r
descriptors:
  - key: other
    rate_limit: {{ unit: hour, requests_per_unit: 1 }}
  - key: user
    rate_limit:
      unit: hour
      requests_per_unit: {user}
"
    )
}

fn sources(files: &[(&str, &str)]) -> Vec<(PathBuf, String)> {
    files.iter().map(|(file, text)| (PathBuf::from(file), (*text).to_owned())).collect()
}

/// A poller serving `loaded`, whose reads are `script`, one per poll.
fn poller(loaded: Vec<(PathBuf, String)>, script: Vec<Read>) -> Poller<MemoryBackend, impl FnMut() -> Read> {
    let config = crate::Config::from_sources(&loaded).expect("the loaded config validates");
    let backend = MemoryBackend::new(MemoryOptions { max_keys: 64, ..MemoryOptions::default() }).unwrap();
    let decider = Arc::new(Decider::new(config, backend, RequestLimits::default()));
    let mut script = VecDeque::from(script);
    let read = move || script.pop_front().expect("a scripted read per poll");
    Poller::new(decider, PathBuf::from("config"), read, loaded)
}

/// The serving `user` rule's `requests_per_unit`, in `domain`.
fn user_limit<R: FnMut() -> Read>(poller: &Poller<MemoryBackend, R>, domain: &str) -> Option<u32> {
    let config = poller.decider.config();
    match config.domain(domain)?.find([("user", "u")])?.limit() {
        Limit::Limited(limited) => Some(limited.requests_per_unit()),
        _ => None,
    }
}

/// A file caught mid-write that still validates (`requests_per_unit: 30` cut to `3`) is never
/// served: a version serves once two polls in a row read it the same.
#[test]
fn a_torn_file_is_never_served() {
    let (old, new) = (yaml(10), yaml(30));
    let torn = &new[..new.find("30").expect("the new limit") + 1];
    assert!(crate::Config::from_yaml("c.yaml".as_ref(), torn).is_ok(), "the torn text validates");
    let mut poller = poller(
        sources(&[("c.yaml", &old)]),
        vec![
            Ok(sources(&[("c.yaml", torn)])),
            Ok(sources(&[("c.yaml", &new)])),
            Ok(sources(&[("c.yaml", &new)])),
        ],
    );
    let first = poller.poll();
    assert_eq!(user_limit(&poller, "r"), Some(10), "the torn read must not serve");
    assert_eq!(first, Polled::Settling);
    assert_eq!(poller.poll(), Polled::Settling);
    assert_eq!(user_limit(&poller, "r"), Some(10));
    assert_eq!(poller.poll(), Polled::Applied);
    assert_eq!(user_limit(&poller, "r"), Some(30));
}

/// A directory read during a ConfigMap's symlink swap (one file new, one old; then a file gone
/// between the listing and its read) serves nothing and refuses nothing: the new set serves
/// once it reads the same twice.
#[test]
fn a_directory_read_mid_swap_is_never_served_nor_refused() {
    let (old, new) = (yaml(10), yaml(30));
    let (a_old, b_old) = (old.replace("domain: r", "domain: a"), old.replace("domain: r", "domain: b"));
    let (a_new, b_new) = (new.replace("domain: r", "domain: a"), new.replace("domain: r", "domain: b"));
    let both_new = || Ok(sources(&[("d/a.yaml", &a_new), ("d/b.yaml", &b_new)]));
    let mut poller = poller(
        sources(&[("d/a.yaml", &a_old), ("d/b.yaml", &b_old)]),
        vec![
            Ok(sources(&[("d/a.yaml", &a_new), ("d/b.yaml", &b_old)])),
            Err("d/b.yaml: cannot read: No such file or directory".to_owned()),
            both_new(),
            both_new(),
            both_new(),
        ],
    );
    let mixed = poller.poll();
    assert_eq!((user_limit(&poller, "a"), user_limit(&poller, "b")), (Some(10), Some(10)), "a mixed read");
    assert_eq!(mixed, Polled::Settling);
    assert_eq!(poller.poll(), Polled::Settling, "a file gone mid-swap is not refused");
    assert_eq!(poller.poll(), Polled::Settling);
    assert_eq!((user_limit(&poller, "a"), user_limit(&poller, "b")), (Some(10), Some(10)));
    assert_eq!(poller.poll(), Polled::Applied);
    assert_eq!((user_limit(&poller, "a"), user_limit(&poller, "b")), (Some(30), Some(30)));
    assert_eq!(poller.poll(), Polled::Unchanged);
}

/// A bad version that stays is refused once, after it read the same twice; a good one after
/// it serves.
#[test]
fn a_stable_bad_version_is_refused_once() {
    let (old, bad, fixed) = (yaml(10), yaml(10).replace("unit: hour", "unit: fortnight"), yaml(20));
    let mut poller = poller(
        sources(&[("c.yaml", &old)]),
        vec![
            Ok(sources(&[("c.yaml", &bad)])),
            Ok(sources(&[("c.yaml", &bad)])),
            Ok(sources(&[("c.yaml", &bad)])),
            Ok(sources(&[("c.yaml", &fixed)])),
            Ok(sources(&[("c.yaml", &fixed)])),
        ],
    );
    assert_eq!(poller.poll(), Polled::Settling);
    assert!(matches!(poller.poll(), Polled::Refused(error) if error.contains("fortnight")));
    assert_eq!(poller.poll(), Polled::Unchanged);
    assert_eq!(user_limit(&poller, "r"), Some(10));
    assert_eq!(poller.poll(), Polled::Settling);
    assert_eq!(poller.poll(), Polled::Applied);
    assert_eq!(user_limit(&poller, "r"), Some(20));
}
