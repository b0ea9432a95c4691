//! The overhead example on one and two threads in process.

use std::time::Instant;

use super::{calls_answered_at_once, peers, router, Subject};

/// In process on one and on two threads at once, each thread calling its own clone of the same
/// router (as a server's workers do: the layer's state is shared) from clients of its own, in
/// `rounds` rounds: calls per second, and two threads' over one thread's. A layer that writes
/// something shared on every request shows here, and not on one thread.
pub(super) fn on_threads(rounds: usize) {
    const CALLS_PER_THREAD: usize = 400_000;
    println!("in process, 1 and 2 threads, {CALLS_PER_THREAD} calls per thread");
    for round in 0..rounds {
        for subject in
            [Subject::Bare, Subject::Kova, Subject::KovaShadow, Subject::Governor, Subject::BareHeaders]
        {
            let app = router(subject);
            let rate = |threads: usize| {
                let started = Instant::now();
                std::thread::scope(|s| {
                    for thread in 0..threads {
                        let mut app = app.clone();
                        s.spawn(move || {
                            let runtime = tokio::runtime::Builder::new_current_thread()
                                .enable_all()
                                .build()
                                .expect("runtime");
                            let _entered = runtime.enter();
                            let peers: Vec<_> = peers().into_iter().skip(thread * 2048).take(2048).collect();
                            calls_answered_at_once(&mut app, &peers, CALLS_PER_THREAD);
                        });
                    }
                });
                (threads * CALLS_PER_THREAD) as f64 / started.elapsed().as_secs_f64()
            };
            let (one, two) = (rate(1), rate(2));
            println!(
                "  round {round} {:<16} 1 thread {:>9.0}/s  2 threads {:>9.0}/s  2/1 {:.2}",
                subject.label(),
                one,
                two,
                two / one
            );
        }
    }
}
