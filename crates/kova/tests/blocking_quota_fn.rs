//! A quota function is the user's code, and may block (a lookup in another service, a lock):
//! while it runs, no other insert may be held back. A thread pinned for the epoch holds every
//! table's grace periods back, so the quota function must run unpinned.

use std::sync::mpsc;
use std::sync::Mutex;
use std::thread;
use std::time::Duration;

use kova::{Fallback, Gcra, Keyed, Quota};

/// Keys checked on the busy table while the quota function blocks: enough that its small
/// table needs lines back from grace periods many times over.
const BUSY_KEYS: u64 = 200_000;

fn blocking_table(entered: mpsc::Sender<()>, release: mpsc::Receiver<()>) -> Keyed<u64, Gcra> {
    let release = Mutex::new(release);
    Keyed::<u64, Gcra>::builder(Quota::per_minute(100).expect("valid"))
        .quota_fn(move |_| {
            let _ = entered.send(());
            let _ = release.lock().expect("not poisoned").recv_timeout(Duration::from_secs(30));
            None
        })
        .build()
        .expect("valid table")
}

/// Counts the checks of `BUSY_KEYS` new keys on a small full table that were denied for want
/// of room (`TableFullDenied`): an evicting insert needs removed lines back, which takes a
/// grace period.
fn denied_for_room(busy: &Keyed<u64, Gcra>) -> u64 {
    (0..BUSY_KEYS).filter(|key| busy.check(key).fallback() == Some(Fallback::TableFullDenied)).count() as u64
}

fn busy_table() -> Keyed<u64, Gcra> {
    Keyed::<u64, Gcra>::builder(Quota::per_minute(100).expect("valid"))
        .max_keys(256)
        .doorkeeper(0)
        .build()
        .expect("valid table")
}

#[test]
fn a_blocking_quota_function_holds_back_no_other_tables_inserts() {
    let (entered_tx, entered_rx) = mpsc::channel();
    let (release_tx, release_rx) = mpsc::channel();
    let slow = blocking_table(entered_tx, release_rx);
    let busy = busy_table();
    let denied = thread::scope(|scope| {
        let waiting = scope.spawn(|| slow.check(&1).is_allowed());
        entered_rx.recv_timeout(Duration::from_secs(30)).expect("the quota function ran");
        let denied = denied_for_room(&busy);
        release_tx.send(()).expect("the quota function waits");
        assert!(waiting.join().expect("no panic"), "the blocked check is admitted once released");
        denied
    });
    assert_eq!(denied, 0, "inserts denied for want of room while another table's quota function blocked");
}

#[test]
fn a_blocking_quota_function_of_a_peek_holds_back_no_other_tables_inserts() {
    let (entered_tx, entered_rx) = mpsc::channel();
    let (release_tx, release_rx) = mpsc::channel();
    let slow = blocking_table(entered_tx, release_rx);
    let busy = busy_table();
    let denied = thread::scope(|scope| {
        let waiting = scope.spawn(|| slow.peek(&1).is_allowed());
        entered_rx.recv_timeout(Duration::from_secs(30)).expect("the quota function ran");
        let denied = denied_for_room(&busy);
        release_tx.send(()).expect("the quota function waits");
        assert!(waiting.join().expect("no panic"), "a fresh key's peek is admitted");
        denied
    });
    assert_eq!(
        denied, 0,
        "inserts denied for want of room while another table's peek's quota function blocked"
    );
}
