//! kova beside its peers, in two tables: the fastest peer of each scenario against kova, exact
//! against exact and approximate against approximate (where a peer wins, the table says so;
//! where the two admitted shares more than a point apart, neither wins: [`crate::comparison`]),
//! and speed beside accuracy and memory per subject, so that an approximate peer's speed is
//! read with what it costs in accuracy.

use std::fmt::Write as _;

use crate::comparison::{not_comparable, Counting, APPROXIMATE, BOUNDED};
use crate::peer_accuracy::GOVERNOR_TUNED_ACCURACY;
use crate::report::{subject_rank, Record, Report, SubjectKind};
use crate::rounds::{noise_note, ratio_noise};
use crate::stats::si;

/// The peers that were tried and are not measured, and why: for the README.
pub const PEERS_LEFT_OUT: &str = "Peers tried and not measured here: limitador 0.14's in-memory \
     storage (`RateLimiter::new`, one `Limit` whose variable is the key) builds without its default \
     features, but each check builds a CEL context from a `HashMap` of strings and evaluates the \
     limit's expression, and its dependencies (a CEL interpreter, moka, metrics) took 14 minutes of \
     cold release build on the 2-core machine beside other builds: more CI time than this harness \
     may add, for a peer tens of microseconds a check (13-29 us there, 1 to 100,000 keys); tower's own \
     `RateLimit` layer belongs beside kova-tower in its middleware example, not in this per-check \
     loop.";

/// The scenario and thread count where kova's 1M-key speed is read for the joined table.
pub const JOINED_SCENARIO: &str = "keyed_1m_uniform";

impl Report {
    /// Per scenario and thread count: kova's fastest exact subject and kova's gcra against the
    /// fastest exact peer, and who wins; beside them the approximate subjects against each
    /// other ([`Counting`]). "not comparable", with both shares, where two rows admitted shares
    /// more than a point apart, whichever admitted less.
    pub(crate) fn best_peer_table(&self, out: &mut String) {
        let _ = writeln!(
            out,
            "Exact rows against exact peers; the approximate ones ({}) only against each other, in \
             their own column; the bounded ones ({}: striped, so their admissions are bounded by \
             stripes x batch rather than exact) against the fastest exact peer in their own column, \
             never as kova's exact row. A verdict is \"within noise\" where the two rows' rounds \
             overlap (the slower row's fastest round beats the faster row's slowest): another run \
             may order them the other way.\n",
            APPROXIMATE.map(|s| format!("`{s}`")).join(", "),
            BOUNDED.map(|s| format!("`{s}`")).join(", ")
        );
        let _ = writeln!(
            out,
            "| scenario | threads | fastest exact peer (admitted) | kova's fastest exact (admitted) | \
             kova fastest / peer | gcra / peer | | bounded: kova's fastest / exact peer | \
             approximate: kova's fastest / peer's |\n\
             |---|---:|---|---|---:|---:|---|---|---|"
        );
        for s in &self.scenarios {
            for &threads in &self.settings.threads {
                let pair = |counting| {
                    Some((
                        self.fastest(&s.name, threads, SubjectKind::Peer, counting)?,
                        self.fastest(&s.name, threads, SubjectKind::Kova, counting)?,
                    ))
                };
                let (exact, approximate) = (pair(Counting::Exact), pair(Counting::Approximate));
                if exact.is_none() && approximate.is_none() {
                    continue;
                }
                let bounded = self
                    .fastest(&s.name, threads, SubjectKind::Kova, Counting::Bounded)
                    .zip(exact.map(|(peer, _)| peer))
                    .map_or("-".to_owned(), |(kova, peer)| match not_comparable(kova, peer) {
                        Some(words) => format!("n/c: {} against {}, {words}", kova.subject, peer.subject),
                        None => format!("{}: {} / {}", ratio(kova, peer), kova.subject, peer.subject),
                    });
                let exact_cells = exact.map_or_else(
                    || "- | - | - | - | -".to_owned(),
                    |(peer, kova)| {
                        let gcra = self.find(&s.name, "gcra", threads);
                        format!(
                            "{} {}/s ({:.1}%) | {} {}/s ({:.1}%) | {} | {} | {}",
                            peer.subject,
                            si(peer.ops_per_sec),
                            peer.allowed_share * 100.0,
                            kova.subject,
                            si(kova.ops_per_sec),
                            kova.allowed_share * 100.0,
                            ratio(kova, peer),
                            gcra.map_or("-".to_owned(), |g| ratio(g, peer)),
                            verdict(kova, peer)
                        )
                    },
                );
                let approximate_cell =
                    approximate.map_or("-".to_owned(), |(peer, kova)| match not_comparable(kova, peer) {
                        Some(words) => format!("n/c: {} against {}, {words}", kova.subject, peer.subject),
                        None => format!("{}: {} / {}", ratio(kova, peer), kova.subject, peer.subject),
                    });
                let _ = writeln!(
                    out,
                    "| `{}` | {threads} | {exact_cells} | {bounded} | {approximate_cell} |",
                    s.name
                );
            }
        }
    }

    /// One row per subject: decisions/s at 1M keys on one thread, bytes per key, and the trace's
    /// wrongly allowed / denied.
    pub(crate) fn joined_table(&self, out: &mut String) {
        let mut subjects: Vec<&str> = self
            .records
            .iter()
            .filter(|r| r.scenario == JOINED_SCENARIO && r.kind != SubjectKind::Floor)
            .map(|r| r.subject.as_str())
            .chain(self.accuracy.iter().map(|a| a.algorithm.as_str()))
            .collect();
        subjects.sort_by_key(|s| subject_rank(s));
        subjects.dedup();
        if subjects.is_empty() {
            return;
        }
        let _ = writeln!(
            out,
            "| subject | decisions/s, 1M keys, 1 thread | bytes per key (1M keys) | wrongly allowed | \
             wrongly denied |\n|---|---:|---:|---:|---:|"
        );
        for subject in subjects {
            let speed = self.find(JOINED_SCENARIO, subject, 1).map_or("-".to_owned(), |r| si(r.ops_per_sec));
            let bytes = self
                .memory
                .iter()
                .find(|m| m.subject == subject)
                .and_then(|m| m.table_bytes_per_key.or(m.heap_bytes_per_key))
                .map_or("-".to_owned(), |b| format!("{b:.1} B"));
            let acc = self.accuracy.iter().find(|a| a.algorithm == subject);
            let (allowed, denied) = acc.map_or(("-".to_owned(), "-".to_owned()), |a| {
                (format!("{:.4}%", a.wrongly_allowed_pct), format!("{:.4}%", a.wrongly_denied_pct))
            });
            let _ = writeln!(out, "| {subject} | {speed} | {bytes} | {allowed} | {denied} |");
        }
        let _ = writeln!(
            out,
            "\nThe Mutex bucket, `ratelimit` and `leaky-bucket` read their own clocks and cannot replay \
             the simulated trace (no accuracy row); governor replays it on its `FakeRelativeClock`, \
             pingora's `Rate` through its window logic over its own sketch. {}",
            GOVERNOR_TUNED_ACCURACY
        );
    }
}

/// `r` against `peer`: "n/c" where their admitted shares are not comparable.
fn ratio(r: &Record, peer: &Record) -> String {
    match not_comparable(r, peer) {
        Some(_) => "n/c".to_owned(),
        None => format!("{:.2}x", r.ops_per_sec / peer.ops_per_sec),
    }
}

/// Who wins between kova's fastest exact row and the fastest exact peer, and why a peer that
/// wins does; "within noise", with the margin and the rounds' spread, where the two rows are
/// close enough that their rounds overlap (the rule the targets follow:
/// [`crate::rounds::noise_note`]), whichever is ahead.
fn verdict(kova: &Record, peer: &Record) -> String {
    if let Some(words) = not_comparable(kova, peer) {
        return format!("{} against {}: {words}", kova.subject, peer.subject);
    }
    if let Some(note) = noise_note(kova.ops_per_sec / peer.ops_per_sec, 1.0, ratio_noise(kova, peer)) {
        let ahead = if kova.ops_per_sec >= peer.ops_per_sec { "kova" } else { peer.subject.as_str() };
        return format!("{note} ({ahead} ahead in this run)");
    }
    if kova.ops_per_sec >= peer.ops_per_sec {
        return "kova ahead".to_owned();
    }
    let mut why = format!("**{} wins**", peer.subject);
    if let Some(f) = peer.vs_floor.filter(|f| *f >= 0.9) {
        // The floor is the bare instructions a check cannot avoid (a CAS, a read, or a load and
        // a clock read): a peer this close to it does little else.
        let _ = write!(why, ": it ran at {f:.2}x the scenario's floor, as fast as its bare instructions");
    }
    why
}

#[cfg(test)]
mod tests {
    use crate::report::test_support::*;
    use crate::report::*;

    #[test]
    fn a_peer_that_wins_is_named_with_its_reason() {
        let mut denying = record("leaky_bucket", SubjectKind::Peer, "direct", 1, 90e6);
        denying.allowed_share = 0.5;
        let mut at_floor = record("ratelimit", SubjectKind::Peer, "direct_deny", 1, 95e6);
        at_floor.vs_floor = Some(0.95);
        let mut r = report(vec![
            record("gcra", SubjectKind::Kova, "direct", 1, 60e6),
            record("token_bucket", SubjectKind::Kova, "direct", 1, 80e6),
            record("governor", SubjectKind::Peer, "direct", 1, 40e6),
            denying,
            record("gcra", SubjectKind::Kova, "direct", 2, 60e6),
            record("governor", SubjectKind::Peer, "direct", 2, 30e6),
            record("gcra", SubjectKind::Kova, "direct_deny", 1, 80e6),
            at_floor,
        ]);
        r.scenarios.push(ScenarioInfo {
            name: "direct_deny".into(),
            description: "d".into(),
            quota: "q".into(),
            all_admitted: false,
        });
        let mut out = String::new();
        r.best_peer_table(&mut out);
        assert!(
            out.contains(
                "**ratelimit wins**: it ran at 0.95x the scenario's floor, as fast as its bare instructions |"
            ),
            "{out}"
        );
        assert!(
            out.contains(
                "| `direct` | 1 | leaky_bucket 90.00M/s (50.0%) | token_bucket 80.00M/s (100.0%) | n/c | \
                 n/c | token_bucket against leaky_bucket: not comparable (admitted 100.0% against 50.0%) | - |"
            ),
            "{out}"
        );
        assert!(out.contains("| `direct` | 2 | governor 30.00M/s (100.0%) | gcra 60.00M/s (100.0%) | 2.00x | 2.00x | kova ahead | - | - |"), "{out}");
    }

    /// The note is symmetric: kova's row that denies more is not ahead either.
    #[test]
    fn kova_denying_more_is_not_ahead() {
        let mut sketch = record(crate::sketch_subject::SKETCH, SubjectKind::Kova, "keyed_flood", 1, 200e6);
        sketch.allowed_share = 0.03;
        let mut pingora = record(PINGORA, SubjectKind::Peer, "keyed_flood", 1, 20e6);
        pingora.allowed_share = 0.108;
        let mut r = report(vec![sketch, pingora, record("gcra", SubjectKind::Kova, "keyed_flood", 1, 11e6)]);
        r.scenarios[0].name = "keyed_flood".into();
        let mut out = String::new();
        r.best_peer_table(&mut out);
        assert!(
            out.contains(
                "| `keyed_flood` | 1 | - | - | - | - | - | - | n/c: kova_sketch against pingora_rate, not comparable \
                 (admitted 3.0% against 10.8%) |"
            ),
            "{out}"
        );
        assert!(!out.contains("kova ahead"), "{out}");
    }

    /// An exact table is never set against pingora's sketch, however fast it ran: the exact
    /// columns name the fastest exact peer, and the sketches meet only each other.
    #[test]
    fn exact_rows_meet_exact_peers_and_the_sketches_each_other() {
        let mut r = report(vec![
            record("gcra", SubjectKind::Kova, "keyed_1m_uniform", 1, 50e6),
            record(crate::sketch_subject::SKETCH, SubjectKind::Kova, "keyed_1m_uniform", 1, 60e6),
            record(PINGORA, SubjectKind::Peer, "keyed_1m_uniform", 1, 20e6),
            record("governor", SubjectKind::Peer, "keyed_1m_uniform", 1, 10e6),
            record(crate::governor_tuned::GOVERNOR_TUNED, SubjectKind::Peer, "keyed_1m_uniform", 1, 16e6),
        ]);
        r.scenarios[0].name = "keyed_1m_uniform".into();
        let mut out = String::new();
        r.best_peer_table(&mut out);
        assert!(
            out.contains(
                "| `keyed_1m_uniform` | 1 | governor_tuned 16.00M/s (100.0%) | gcra 50.00M/s (100.0%) | 3.12x | \
                 3.12x | kova ahead | - | 3.00x: kova_sketch / pingora_rate |"
            ),
            "{out}"
        );
        assert!(out.starts_with(
            "Exact rows against exact peers; the approximate ones (`kova_sketch`, `pingora_rate`)"
        ));
    }

    /// A striped row is bounded, not exact: however fast, it is not kova's exact row, and it
    /// meets the exact peer in its own, labelled column.
    #[test]
    fn bounded_rows_are_not_kovas_exact_row() {
        let mut r = report(vec![
            record("gcra", SubjectKind::Kova, "direct", 2, 24e6),
            record("gcra_striped", SubjectKind::Kova, "direct", 2, 199e6),
            record("token_bucket_striped", SubjectKind::Kova, "direct", 2, 198e6),
            record("ratelimit", SubjectKind::Peer, "direct", 2, 25e6),
        ]);
        r.settings.threads = vec![2];
        r.compute_ratios();
        let mut out = String::new();
        r.best_peer_table(&mut out);
        assert!(
            out.contains(
                "| `direct` | 2 | ratelimit 25.00M/s (100.0%) | gcra 24.00M/s (100.0%) | 0.96x | 0.96x | \
                 **ratelimit wins** | 7.96x: gcra_striped / ratelimit | - |"
            ),
            "{out}"
        );
        // The bounded row's own ratio is still against the exact peer.
        assert_eq!(r.find("direct", "gcra_striped", 2).unwrap().vs_best_peer, Some(199.0 / 25.0));
    }

    /// "kova ahead" only where the margin is over the rounds' spread.
    #[test]
    fn a_verdict_inside_the_rounds_spread_is_within_noise() {
        let mut gcra = record("gcra", SubjectKind::Kova, "keyed_1k", 1, 100.44e6);
        gcra.round_ops_per_sec = vec![95e6, 100.44e6, 104e6];
        let mut governor = record("governor", SubjectKind::Peer, "keyed_1k", 1, 100e6);
        governor.round_ops_per_sec = vec![97e6, 100e6, 100.6e6];
        let mut r = report(vec![gcra, governor]);
        r.scenarios[0].name = "keyed_1k".into();
        r.settings.threads = vec![1];
        let mut out = String::new();
        r.best_peer_table(&mut out);
        assert!(
            out.contains(
                "| 1.00x | 1.00x | within noise: margin 0.4% under the rounds' spread 6.0% (kova ahead in this run) |"
            ),
            "{out}"
        );
        assert!(!out.contains("| kova ahead |"), "{out}");
        // Beyond the spread, the verdict stands.
        r.records[0].ops_per_sec = 120e6;
        r.records[0].round_ops_per_sec = vec![115e6, 120e6, 124e6];
        let mut out = String::new();
        r.best_peer_table(&mut out);
        assert!(out.contains("| 1.20x | 1.20x | kova ahead |"), "{out}");
    }

    #[test]
    fn the_joined_table_puts_speed_beside_accuracy_and_memory() {
        let mut r = report(vec![
            record("gcra", SubjectKind::Kova, "keyed_1m_uniform", 1, 11e6),
            record(PINGORA, SubjectKind::Peer, "keyed_1m_uniform", 1, 12e6),
            record("governor", SubjectKind::Peer, "keyed_1m_uniform", 1, 4e6),
            record("floor_read", SubjectKind::Floor, "keyed_1m_uniform", 1, 50e6),
        ]);
        r.memory.push(MemoryRecord {
            subject: "gcra".into(),
            keys: 1_000_000,
            heap_bytes_per_key: Some(30.0),
            table_bytes_per_key: Some(28.5),
            cell_bytes: Some(8),
        });
        r.accuracy.push(AccuracyRecord {
            algorithm: PINGORA.into(),
            limit: 60,
            boundary_max: 120,
            flood_max: 60,
            requests: 100,
            wrongly_allowed_pct: 5.0,
            wrongly_denied_pct: 4.5,
            rate_gap_limited_pct: 1.0,
            rate_gap_all_pct: 1.0,
            over_grants: None,
            cell_bytes: 0,
            fixed_bytes: Some(65_536),
        });
        let mut out = String::new();
        r.joined_table(&mut out);
        assert!(out.contains("| gcra | 11.00M | 28.5 B | - | - |"), "{out}");
        assert!(out.contains("| pingora_rate | 12.00M | - | 5.0000% | 4.5000% |"), "{out}");
        assert!(out.contains("| governor | 4.00M | - |"), "{out}");
        assert!(!out.contains("floor_read"), "{out}");
    }
}
