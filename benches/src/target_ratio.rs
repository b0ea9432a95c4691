//! The comparisons the throughput targets are made of: a row against the fastest peer, against
//! governor's better row, against a named row, or against itself on one thread. Each is made
//! only between rows whose admitted shares are comparable ([`crate::comparison`]; otherwise the
//! target is "not comparable", with both shares), prints the shares where either row denied,
//! and is marked "within noise" where its margin to the goal is smaller than the rounds' spread
//! ([`crate::rounds`]).

use crate::comparison::{admitted_note, not_comparable};
use crate::report::{Record, Report, Status, TargetResult};
use crate::rounds::{noise_note, ratio_noise, Rounds};
use crate::stats::si;

/// What a target asks of kova's figure against the peer's.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Goal {
    /// kova's time per check at most this share of the peer's.
    TimeAtMost(f64),
    /// kova's throughput at least this multiple of the peer's.
    ThroughputAtLeast(f64),
}

/// A target whose rows were not measured in this run.
pub(crate) fn not_measured(name: String, goal: &str) -> TargetResult {
    TargetResult {
        name,
        goal: goal.into(),
        measured: "-".into(),
        status: Status::NotMeasured,
        within_noise: false,
    }
}

/// `x` against `y`: not comparable when their admitted shares differ, else `decide(x, y)`'s
/// figure, status, the ratio and goal its margin is read at, and whether that ratio is `y / x`
/// (a time per operation's) rather than `x / y`; with the shares where either denied, and the
/// noise mark.
fn versus(
    name: String,
    goal: &str,
    (x, y): (&Record, &Record),
    decide: impl FnOnce(&Record, &Record) -> (String, bool, f64, f64, bool),
) -> TargetResult {
    if let Some(words) = not_comparable(x, y) {
        return TargetResult {
            name,
            goal: goal.into(),
            measured: format!("{}/s vs {}/s; {words}", si(x.ops_per_sec), si(y.ops_per_sec)),
            status: Status::NotComparable,
            within_noise: false,
        };
    }
    let (mut measured, met, figure, threshold, inverted) = decide(x, y);
    if let Some(note) = admitted_note(x, y) {
        measured += &format!("; {note}");
    }
    let noise = if inverted { ratio_noise(y, x) } else { ratio_noise(x, y) };
    let within = noise_note(figure, threshold, noise);
    if let Some(note) = &within {
        measured += &format!("; {note}");
    }
    TargetResult {
        name,
        goal: goal.into(),
        measured,
        status: Status::from_bool(met),
        within_noise: within.is_some(),
    }
}

impl Report {
    /// kova's `algo` against the fastest peer of the same scenario and thread count that counts
    /// as it counts ([`Report::best_peer`]), naming the peer, and governor's better row beside it
    /// when that is not the fastest.
    pub(crate) fn peer_target(
        &self,
        name: String,
        goal: &str,
        kova: (&str, &str, usize),
        want: Goal,
    ) -> TargetResult {
        let (scenario, algo, threads) = kova;
        let Some((k, p)) = self.find(scenario, algo, threads).and_then(|k| Some((k, self.best_peer(k)?)))
        else {
            return not_measured(name, goal);
        };
        let mut target = versus(name, goal, (k, p), |k, p| {
            let speedup = k.ops_per_sec / p.ops_per_sec;
            let (mut figure, met, ratio, x, inverted) = match want {
                Goal::TimeAtMost(x) => (
                    format!(
                        "{:.2}x {} ({:.1} ns vs {:.1} ns)",
                        1.0 / speedup,
                        p.subject,
                        1e9 / k.ops_per_sec,
                        1e9 / p.ops_per_sec
                    ),
                    1.0 / speedup <= x,
                    1.0 / speedup,
                    x,
                    true,
                ),
                Goal::ThroughputAtLeast(x) => (
                    format!(
                        "{speedup:.2}x {} ({}/s vs {}/s)",
                        p.subject,
                        si(k.ops_per_sec),
                        si(p.ops_per_sec)
                    ),
                    speedup >= x,
                    speedup,
                    x,
                    false,
                ),
            };
            if speedup < 1.0 {
                figure += &format!("; {} is faster", p.subject);
            }
            (figure, met, ratio, x, inverted)
        });
        if let Some(g) = self.governor_row(scenario, threads).filter(|g| g.subject != p.subject) {
            target.measured += &format!("; {} {}/s", g.subject, si(g.ops_per_sec));
        }
        target
    }

    /// `many` threads' aggregate against one thread's, median rounds both (every record's rate
    /// is its median round), with one thread's best round beside.
    pub(crate) fn scaling_target(
        &self,
        name: String,
        goal: &str,
        many: (&str, &str, usize),
        at_least: f64,
    ) -> TargetResult {
        let (scenario, subject, threads) = many;
        let (Some(x), Some(one)) = (self.find(scenario, subject, threads), self.find(scenario, subject, 1))
        else {
            return not_measured(name, goal);
        };
        versus(name, goal, (x, one), |x, one| {
            let ratio = x.ops_per_sec / one.ops_per_sec;
            let figure = format!(
                "{ratio:.2}x ({}/s vs {}/s, median rounds; 1 thread's best {}/s)",
                si(x.ops_per_sec),
                si(one.ops_per_sec),
                si(one.best_ops())
            );
            (figure, ratio >= at_least, ratio, at_least, false)
        })
    }

    /// Row `a` against row `b`: `a`'s throughput at least `at_least` times `b`'s.
    pub(crate) fn ratio_target(
        &self,
        name: String,
        goal: &str,
        a: (&str, &str, usize),
        b: (&str, &str, usize),
        at_least: f64,
    ) -> TargetResult {
        match (self.find(a.0, a.1, a.2), self.find(b.0, b.1, b.2)) {
            (Some(x), Some(y)) => versus(name, goal, (x, y), |x, y| {
                let ratio = x.ops_per_sec / y.ops_per_sec;
                let figure = format!("{ratio:.2}x ({}/s vs {}/s)", si(x.ops_per_sec), si(y.ops_per_sec));
                (figure, ratio >= at_least, ratio, at_least, false)
            }),
            _ => not_measured(name, goal),
        }
    }

    /// Row `a` against governor's better row of the same scenario and thread count
    /// ([`Report::governor_row`]), naming it, with the other row's figure beside it.
    pub(crate) fn governor_target(
        &self,
        name: String,
        goal: &str,
        a: (&str, &str, usize),
        at_least: f64,
    ) -> TargetResult {
        let (Some(x), Some(g)) = (self.find(a.0, a.1, a.2), self.governor_row(a.0, a.2)) else {
            return not_measured(name, goal);
        };
        let other = self.other_governor(g);
        versus(name, goal, (x, g), |x, g| {
            let ratio = x.ops_per_sec / g.ops_per_sec;
            let which = match other {
                Some(o) => format!(
                    "{}, the faster of governor's two rows; {} {}/s",
                    g.subject,
                    o.subject,
                    si(o.ops_per_sec)
                ),
                None => g.subject.clone(),
            };
            let figure = format!("{ratio:.2}x ({}/s vs {}/s {which})", si(x.ops_per_sec), si(g.ops_per_sec));
            (figure, ratio >= at_least, ratio, at_least, false)
        })
    }
}

#[cfg(test)]
mod tests {
    use crate::governor_tuned::GOVERNOR_TUNED;
    use crate::report::test_support::*;
    use crate::report::*;

    #[test]
    fn a_target_between_different_admitted_shares_is_not_comparable() {
        let mut sketch = record("kova_sketch", SubjectKind::Kova, "keyed_flood", 1, 200e6);
        sketch.allowed_share = 0.03;
        let mut pingora = record(PINGORA, SubjectKind::Peer, "keyed_flood", 1, 20e6);
        pingora.allowed_share = 0.108;
        let r = report(vec![sketch, pingora]);
        let t = r.ratio_target(
            "x".into(),
            ">= 1.5x",
            ("keyed_flood", "kova_sketch", 1),
            ("keyed_flood", PINGORA, 1),
            1.5,
        );
        assert_eq!(t.status, Status::NotComparable);
        assert_eq!(t.measured, "200.00M/s vs 20.00M/s; not comparable (admitted 3.0% against 10.8%)");
    }

    #[test]
    fn governor_targets_take_the_faster_governor_row() {
        let mut r = report(vec![
            record("gcra", SubjectKind::Kova, "direct", 2, 90e6),
            record("governor", SubjectKind::Peer, "direct", 2, 30e6),
            record(GOVERNOR_TUNED, SubjectKind::Peer, "direct", 2, 60e6),
        ]);
        let t = r.governor_target("x".into(), ">= 1.2x", ("direct", "gcra", 2), 1.2);
        assert_eq!(t.status, Status::Met);
        assert_eq!(
            t.measured,
            "1.50x (90.00M/s vs 60.00M/s governor_tuned, the faster of governor's two rows; governor 30.00M/s)"
        );
        // Rounds 10% apart: a 1.50x against a goal of 1.4x is within their noise (the slowest
        // kova round over governor's fastest is 1.35x).
        r.records[0].round_ops_per_sec = vec![85e6, 90e6, 94e6];
        r.records[2].round_ops_per_sec = vec![57e6, 60e6, 63e6];
        let t = r.governor_target("x".into(), ">= 1.4x", ("direct", "gcra", 2), 1.4);
        assert_eq!(t.status, Status::Met);
        assert!(t.within_noise, "{t:?}");
        assert!(t.measured.ends_with("; within noise: margin 6.7% under the rounds' spread 10.1%"), "{t:?}");
        let t = r.governor_target("x".into(), ">= 1.2x", ("direct", "gcra", 2), 1.2);
        assert!(!t.within_noise, "{t:?}");
    }

    #[test]
    fn scaling_across_a_drop_in_admitted_share_is_not_comparable() {
        let one = record("gcra", SubjectKind::Kova, "keyed_1m_zipf", 1, 30e6);
        let mut two = record("gcra", SubjectKind::Kova, "keyed_1m_zipf", 2, 36e6);
        two.allowed_share = 0.85;
        let r = report(vec![one, two]);
        let t = r.scaling_target("x".into(), ">= 1.7x", ("keyed_1m_zipf", "gcra", 2), 1.7);
        assert_eq!(t.status, Status::NotComparable);
        assert!(t.measured.ends_with("not comparable (admitted 85.0% against 100.0%)"), "{t:?}");
    }
}
