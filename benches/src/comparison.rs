//! What a row is compared with, and when it may be.
//!
//! A denial writes nothing, so it costs less than an admission: two subjects whose admitted
//! shares differ did different work, and the faster of them has not won anything. Every ratio
//! the report calls a win (the `x governor` and `x best peer` columns, the targets, the table
//! against the fastest peer) is therefore made only between rows whose admitted shares are
//! within [`ADMITTED_GAP`]; otherwise it says "not comparable" with both shares, whichever
//! side admitted less.
//!
//! An exact limiter is compared only with exact peers, an approximate one only with approximate
//! peers ([`Counting`]): a sketch that lets keys share its counters does less work per key than
//! a table that keeps each key apart, so its speed is no bar for an exact table to clear, and
//! an exact peer is no bar for a sketch. kova's striped rows (the striped limiter, and the table
//! with hot keys, which stripes a key once it is hot) are bounded, not exact: they are compared
//! with exact peers (no peer stripes), but under their own label, never as kova's exact row.
//!
//! governor runs in two configurations, its default and its fast one
//! ([`crate::governor_tuned`]); every comparison with governor takes the better of the two rows
//! measured in the same run, so that kova is never compared with a governor slowed by a
//! default its users can change.

use crate::governor_tuned::GOVERNOR_TUNED;
use crate::kova_tables::GCRA_HOT;
use crate::report::{Record, Report, SubjectKind, PINGORA};
use crate::scenarios::STRIPED;
use crate::sketch_subject::SKETCH;
use crate::stats::percent;

/// The most two rows' admitted shares may differ for their throughput to be compared: one
/// percentage point.
pub const ADMITTED_GAP: f64 = 0.01;

/// Below this admitted share, a row's share is printed beside its figure (the summary's cells,
/// the targets), and in a scenario where an exact limiter admits every check the row is flagged.
pub const FULL_ADMISSION: f64 = 0.99;

/// governor's default row.
pub const GOVERNOR: &str = "governor";

/// The rows of governor's two configurations.
pub const GOVERNOR_ROWS: [&str; 2] = [GOVERNOR, GOVERNOR_TUNED];

/// Whether `subject` is one of governor's rows.
pub fn is_governor(subject: &str) -> bool {
    GOVERNOR_ROWS.contains(&subject)
}

/// How a subject counts a key's requests: only subjects that count alike are compared as peers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Counting {
    /// Each key has state of its own: no key is limited by another key's requests.
    Exact,
    /// Keys share the counters of a fixed sketch (count-min): a key's count may include other
    /// keys' requests, in memory that does not grow with the keys.
    Approximate,
    /// Each key has state of its own, but a striped key's admissions are bounded rather than
    /// exact: kova's `StripedLimiter` admits at most the algorithm's amount plus stripes x batch.
    /// Compared with exact peers (no peer stripes), always under this label.
    Bounded,
}

/// The approximate subjects: pingora's `Rate` and kova's sketch.
pub const APPROXIMATE: [&str; 2] = [SKETCH, PINGORA];

/// The bounded subjects: kova's striped limiters and its table with hot keys (striped once hot).
pub const BOUNDED: [&str; 3] = [STRIPED[0], STRIPED[1], GCRA_HOT];

impl Counting {
    /// How `subject` counts.
    pub fn of(subject: &str) -> Counting {
        if APPROXIMATE.contains(&subject) {
            Counting::Approximate
        } else if BOUNDED.contains(&subject) {
            Counting::Bounded
        } else {
            Counting::Exact
        }
    }

    /// The peers a row that counts so is compared with: exact peers for a bounded row (no peer
    /// stripes), else peers that count alike.
    pub fn peers(self) -> Counting {
        match self {
            Counting::Bounded => Counting::Exact,
            c => c,
        }
    }
}

/// The rule in words, for the report: "exact rows against exact peers; `kova_sketch` and
/// `pingora_rate` ... against each other".
pub fn counting_words() -> String {
    let names: Vec<String> = APPROXIMATE.iter().map(|s| format!("`{s}`")).collect();
    let bounded: Vec<String> = BOUNDED.iter().map(|s| format!("`{s}`")).collect();
    format!(
        "exact rows against exact peers only; {}, which let keys share the counters of a fixed sketch, \
         against each other; the bounded rows {}, whose striped admissions are bounded (at most the \
         algorithm's amount plus stripes x batch) rather than exact, against exact peers, labelled \
         bounded and never counted as kova's exact row",
        names.join(" and "),
        bounded.join(", ")
    )
}

impl Record {
    /// How this row's subject counts.
    pub fn counting(&self) -> Counting {
        Counting::of(&self.subject)
    }
}

/// governor's better row of `rows` (subjects with a figure; other subjects are passed over) by
/// `worse` (lower is better), named, with the other row beside it: "; governor_tuned 35.7 B,
/// the smaller of governor's two rows; governor 36.0 B" where `better` is "smaller"; both alike,
/// "; governor and governor_tuned 35.7 B each", where they print the same; the one row alone
/// where only one ran; empty where none did.
pub fn governor_beside<'a, T>(
    rows: impl IntoIterator<Item = (&'a str, T)>,
    better: &str,
    worse: impl Fn(&T) -> f64,
    text: impl Fn(&T) -> String,
) -> String {
    let mut rows: Vec<(&str, T)> = rows.into_iter().filter(|(s, _)| is_governor(s)).collect();
    rows.sort_by(|a, b| worse(&a.1).total_cmp(&worse(&b.1)));
    match &rows[..] {
        [] => String::new(),
        [(s, x)] => format!("; {s} {}", text(x)),
        // Alike as printed: neither is named the better.
        [(s, x), (o, y)] if text(x) == text(y) => format!("; {s} and {o} {} each", text(x)),
        [(s, x), rest @ ..] => {
            let rest: Vec<String> = rest.iter().map(|(o, y)| format!("{o} {}", text(y))).collect();
            format!("; {s} {}, the {better} of governor's two rows; {}", text(x), rest.join(", "))
        }
    }
}

/// `None` when `a` and `b` admitted shares within [`ADMITTED_GAP`] of each other; otherwise
/// "not comparable (admitted X% against Y%)", `a`'s share first.
pub fn not_comparable(a: &Record, b: &Record) -> Option<String> {
    // The tolerance keeps a gap of exactly `ADMITTED_GAP` comparable despite the float
    // subtraction.
    ((a.allowed_share - b.allowed_share).abs() > ADMITTED_GAP + 1e-9).then(|| {
        format!("not comparable (admitted {} against {})", percent(a.allowed_share), percent(b.allowed_share))
    })
}

/// Both shares, when the rows are comparable but either admitted under [`FULL_ADMISSION`]: a
/// ratio between two rows that both deny is read with what they denied.
pub fn admitted_note(a: &Record, b: &Record) -> Option<String> {
    (a.allowed_share < FULL_ADMISSION || b.allowed_share < FULL_ADMISSION)
        .then(|| format!("admitted {} and {}", percent(a.allowed_share), percent(b.allowed_share)))
}

impl Report {
    /// The fastest peer `row` may be compared with: in its scenario and thread count, counting as
    /// it counts ([`Counting`]), whatever it admitted (a ratio to it is declared only where the
    /// admitted shares are comparable; it is not replaced by the fastest comparable peer, so
    /// that a faster peer is never hidden).
    pub fn best_peer(&self, row: &Record) -> Option<&Record> {
        self.fastest(&row.scenario, row.threads, SubjectKind::Peer, row.counting().peers())
    }

    /// The fastest row of `kind` that counts as `counting` in `scenario` at `threads`.
    pub fn fastest(
        &self,
        scenario: &str,
        threads: usize,
        kind: SubjectKind,
        counting: Counting,
    ) -> Option<&Record> {
        self.records
            .iter()
            .filter(|r| {
                r.scenario == scenario && r.threads == threads && r.kind == kind && r.counting() == counting
            })
            .max_by(|a, b| a.ops_per_sec.total_cmp(&b.ops_per_sec))
    }

    /// The faster of governor's rows in `scenario` at `threads`: what every comparison with
    /// governor's throughput is made against.
    pub fn governor_row(&self, scenario: &str, threads: usize) -> Option<&Record> {
        GOVERNOR_ROWS
            .iter()
            .filter_map(|g| self.find(scenario, g, threads))
            .max_by(|a, b| a.ops_per_sec.total_cmp(&b.ops_per_sec))
    }

    /// governor's row with the lower `p99` in `scenario` at `threads`, with that figure: what a
    /// comparison of latency is made against (the better row by latency, which need not be the
    /// faster one).
    pub fn governor_p99_row(
        &self,
        scenario: &str,
        threads: usize,
        p99: impl Fn(&Record) -> Option<f64>,
    ) -> Option<(&Record, f64)> {
        GOVERNOR_ROWS
            .iter()
            .filter_map(|g| self.find(scenario, g, threads))
            .filter_map(|r| p99(r).map(|p| (r, p)))
            .min_by(|a, b| a.1.total_cmp(&b.1))
    }

    /// The other governor row's figure, when both ran ("governor <rate>" beside a comparison
    /// made with `used`), so that the reader sees both configurations.
    pub fn other_governor(&self, used: &Record) -> Option<&Record> {
        GOVERNOR_ROWS
            .iter()
            .filter(|g| **g != used.subject)
            .find_map(|g| self.find(&used.scenario, g, used.threads))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::test_support::*;
    use crate::report::SubjectKind;

    #[test]
    fn shares_more_than_a_point_apart_are_not_comparable_either_way() {
        let mut sketch = record("kova_sketch", SubjectKind::Kova, "keyed_flood", 1, 200e6);
        sketch.allowed_share = 0.03;
        let mut pingora = record("pingora_rate", SubjectKind::Peer, "keyed_flood", 1, 20e6);
        pingora.allowed_share = 0.108;
        assert_eq!(
            not_comparable(&sketch, &pingora).as_deref(),
            Some("not comparable (admitted 3.0% against 10.8%)")
        );
        assert_eq!(
            not_comparable(&pingora, &sketch).as_deref(),
            Some("not comparable (admitted 10.8% against 3.0%)")
        );
        let mut near = pingora.clone();
        near.allowed_share = 0.118;
        assert_eq!(not_comparable(&near, &pingora), None);
        let full = record("gcra", SubjectKind::Kova, "direct", 1, 1e6);
        let mut one_point = full.clone();
        one_point.allowed_share = 0.99;
        assert_eq!(not_comparable(&full, &one_point), None);
        assert_eq!(admitted_note(&full, &full), None);
        assert_eq!(admitted_note(&full, &one_point), None);
        assert_eq!(admitted_note(&near, &pingora).as_deref(), Some("admitted 11.8% and 10.8%"));
    }

    #[test]
    fn exact_rows_take_exact_peers_and_the_sketch_takes_pingora() {
        assert_eq!(Counting::of(PINGORA), Counting::Approximate);
        assert_eq!(Counting::of(SKETCH), Counting::Approximate);
        assert_eq!(Counting::of("gcra"), Counting::Exact);
        assert_eq!(Counting::of(GOVERNOR_TUNED), Counting::Exact);
        for bounded in ["gcra_striped", "token_bucket_striped", "gcra_hot_keys"] {
            assert_eq!(Counting::of(bounded), Counting::Bounded, "{bounded}");
        }
        let mut r = report(vec![
            record("gcra", SubjectKind::Kova, "keyed_1m_zipf", 1, 50e6),
            record(SKETCH, SubjectKind::Kova, "keyed_1m_zipf", 1, 60e6),
            record(PINGORA, SubjectKind::Peer, "keyed_1m_zipf", 1, 20e6),
            record(GOVERNOR, SubjectKind::Peer, "keyed_1m_zipf", 1, 10e6),
        ]);
        r.compute_ratios();
        let gcra = r.find("keyed_1m_zipf", "gcra", 1).unwrap();
        assert_eq!(r.best_peer(gcra).unwrap().subject, GOVERNOR);
        assert_eq!(gcra.vs_best_peer, Some(5.0));
        let sketch = r.find("keyed_1m_zipf", SKETCH, 1).unwrap();
        assert_eq!(r.best_peer(sketch).unwrap().subject, PINGORA);
        assert_eq!(sketch.vs_best_peer, Some(3.0));
        // Without an exact peer, an exact row has no best peer rather than the sketch.
        r.records.retain(|x| x.subject != GOVERNOR);
        r.compute_ratios();
        assert_eq!(r.find("keyed_1m_zipf", "gcra", 1).unwrap().vs_best_peer, None);
        r.scenarios[0].name = "keyed_1m_zipf".into();
        let md = r.to_markdown();
        assert!(md.contains("| gcra | 1 | 50.00M | - | 20.0 | 10 | 20 | 100.0% | - | - |"), "{md}");
    }

    #[test]
    fn governor_beside_names_the_better_row() {
        let text = |rows: Vec<(&str, f64)>| governor_beside(rows, "smaller", |b| *b, |b| format!("{b:.1} B"));
        assert_eq!(
            text(vec![("gcra", 31.0), (GOVERNOR, 36.0), (GOVERNOR_TUNED, 35.0)]),
            "; governor_tuned 35.0 B, the smaller of governor's two rows; governor 36.0 B"
        );
        assert_eq!(
            text(vec![(GOVERNOR, 35.71), (GOVERNOR_TUNED, 35.68)]),
            "; governor_tuned and governor 35.7 B each"
        );
        assert_eq!(text(vec![(GOVERNOR, 36.0)]), "; governor 36.0 B");
        assert_eq!(text(vec![("gcra", 31.0)]), "");
    }

    #[test]
    fn governor_is_its_better_row() {
        let mut slow_tail = record(GOVERNOR_TUNED, SubjectKind::Peer, "direct", 2, 80e6);
        slow_tail.slowest_p99 = Some(300.0);
        let mut default = record(GOVERNOR, SubjectKind::Peer, "direct", 2, 50e6);
        default.slowest_p99 = Some(100.0);
        let r = report(vec![default, slow_tail]);
        assert_eq!(r.governor_row("direct", 2).unwrap().subject, GOVERNOR_TUNED);
        let (row, p99) = r.governor_p99_row("direct", 2, |r| r.slowest_p99).unwrap();
        assert_eq!((row.subject.as_str(), p99), (GOVERNOR, 100.0));
        assert_eq!(r.other_governor(r.governor_row("direct", 2).unwrap()).unwrap().subject, GOVERNOR);
        assert!(r.governor_row("direct", 1).is_none());
        assert!(is_governor(GOVERNOR) && is_governor(GOVERNOR_TUNED) && !is_governor("gcra"));
    }
}
