//! The fair-contention targets: how a contended word is shared between threads, in the tight
//! loop and with a request handler's work between checks.

use crate::report::{Report, Status, TargetResult};
use crate::targets::not_measured;

impl Report {
    /// The fair-contention targets: the exact word at 2 threads shared evenly in the tight loop,
    /// and with a request handler's work between checks no slower than governor, its slowest
    /// thread's p99 below governor's; the keyed hot key against governor's keyed.
    pub(crate) fn fairness_targets(&self, t: &mut Vec<TargetResult>) {
        let name = "one hot key (direct), 2 threads, gcra (exact): slowest thread's share of the fastest's, and aggregate vs governor";
        t.push(match (self.find("direct", "gcra", 2), self.find("direct", "governor", 2)) {
            (Some(k), Some(g)) => {
                let share = k.thread_share.unwrap_or(0.0);
                let ratio = k.ops_per_sec / g.ops_per_sec;
                TargetResult {
                    name: name.into(),
                    goal: ">= 0.6, >= 1.5x".into(),
                    measured: format!(
                        "{share:.2} (governor {:.2}), {ratio:.2}x",
                        g.thread_share.unwrap_or(0.0)
                    ),
                    status: Status::from_bool(share >= 0.6 && ratio >= 1.5),
                }
            }
            _ => not_measured(name.into(), ">= 0.6, >= 1.5x"),
        });
        for (scenario, peer) in [("direct_work", "governor"), ("keyed_hot_work", "governor")] {
            let name = format!(
                "{scenario}, 2 threads, gcra (exact): aggregate vs {peer}, and the slowest thread's p99 vs {peer}'s"
            );
            t.push(match (self.find(scenario, "gcra", 2), self.find(scenario, peer, 2)) {
                (Some(k), Some(g)) => {
                    let ratio = k.ops_per_sec / g.ops_per_sec;
                    let p99 = match (k.slowest_p99, g.slowest_p99) {
                        (Some(a), Some(b)) if b > 0.0 => a / b,
                        _ => f64::INFINITY,
                    };
                    TargetResult {
                        name,
                        goal: ">= 1x, <= 0.8x".into(),
                        measured: format!(
                            "{ratio:.2}x, {p99:.2}x ({} vs {} ns)",
                            k.slowest_p99.map_or("-".into(), |v| format!("{v:.0}")),
                            g.slowest_p99.map_or("-".into(), |v| format!("{v:.0}"))
                        ),
                        status: Status::from_bool(ratio >= 1.0 && p99 <= 0.8),
                    }
                }
                _ => not_measured(name, ">= 1x, <= 0.8x"),
            });
        }
        let name = "keyed_hot, 2 threads, gcra (exact): p99 vs governor's keyed, and aggregate";
        t.push(match (self.find("keyed_hot", "gcra", 2), self.find("keyed_hot", "governor", 2)) {
            (Some(k), Some(g)) => {
                let ratio = k.ops_per_sec / g.ops_per_sec;
                let (kp, gp) = (k.ns_p99.unwrap_or(f64::INFINITY), g.ns_p99.unwrap_or(0.0));
                TargetResult {
                    name: name.into(),
                    goal: "p99 <= governor's, >= 2x".into(),
                    measured: format!("p99 {kp:.0} vs {gp:.0} ns, {ratio:.2}x"),
                    status: Status::from_bool(kp <= gp && ratio >= 2.0),
                }
            }
            _ => not_measured(name.into(), "p99 <= governor's, >= 2x"),
        });
    }
}
