//! kova's own keyed tables as the scenarios build them: the default table of each algorithm,
//! and beside it the GCRA table without its doorkeeper and with hot keys.

use kova::{Algorithm, Gcra, Keyed, Quota};

use crate::catalog::{Scenario, LARGE_KEYS};
use crate::subject::{KovaKeyed, Subject};

/// A kova keyed table of `u64` keys for `quota`: the default options, except that the 1M-key
/// scenarios get room for twice their keys (the bound is split evenly over the shards, so a
/// shard could fill before the table does and send live keys to the table-full policy). Memory
/// is allocated as keys arrive, so the larger bound costs nothing until it is used.
pub(crate) fn kova_table<A: Algorithm>(quota: Quota, keys: usize) -> KovaKeyed<A> {
    let table = if keys >= LARGE_KEYS {
        Keyed::<u64, A>::builder(quota).max_keys(2 * keys).build()
    } else {
        Keyed::<u64, A>::builder(quota).build()
    };
    KovaKeyed(table.expect("quota representable"))
}

/// Keys in the flood scenario's tables (their bound).
pub const FLOOD_BOUND: usize = 65_536;

/// kova's GCRA table without its doorkeeper (`KeyedBuilder::doorkeeper(0)`), measured beside
/// the default tables (which have one) in the churn and flood scenarios: every new key's first
/// check inserts it, where the default table admits it at the door.
pub const GCRA_NO_DOOR: &str = "gcra_no_doorkeeper";

/// [`GCRA_NO_DOOR`]'s table for `scenario` (churn or flood, at either quota): as the default
/// GCRA table of that scenario, without a doorkeeper.
pub(crate) fn no_door_table(scenario: Scenario, quota: Quota) -> KovaKeyed<Gcra> {
    let builder = Keyed::<u64, Gcra>::builder(quota).doorkeeper(0);
    if scenario.flow() == Scenario::KeyedFlood {
        return filled_to_bound(builder);
    }
    KovaKeyed(builder.build().expect("quota representable"))
}

/// A kova table for the flood scenario, with the default options.
pub(crate) fn flood_table<A: Algorithm>(quota: Quota) -> KovaKeyed<A> {
    filled_to_bound(Keyed::<u64, A>::builder(quota))
}

/// The flood scenario's table from `builder`: bounded at [`FLOOD_BOUND`] keys and filled to it
/// with keys that are idle by the time the measurement starts, each checked twice so that it
/// passes the doorkeeper into the table.
fn filled_to_bound<A: Algorithm>(builder: kova::keyed::KeyedBuilder<u64, A>) -> KovaKeyed<A> {
    let table = KovaKeyed(builder.max_keys(FLOOD_BOUND).build().expect("quota representable"));
    // Keys far above the ones the measurement draws (`FreshKeys` counts up from 0).
    for key in 0..FLOOD_BOUND as u64 {
        table.hit(u64::MAX - key);
        table.hit(u64::MAX - key);
    }
    table
}

/// kova's GCRA table with hot keys (`KeyedBuilder::hot_keys`, the default stripes, batch and
/// threshold). In the hot-key scenario the key is striped by the table itself once its checks
/// contend; in the cold scenarios (many keys, new keys) it is measured beside the default GCRA
/// table to show what the option costs a table whose keys never get hot.
pub const GCRA_HOT: &str = "gcra_hot_keys";

/// Hot slots of [`GCRA_HOT`]'s table.
const HOT_SLOTS: usize = 16;

/// [`GCRA_HOT`]'s table for `scenario`, with room for `keys`: as the default GCRA table of that
/// scenario ([`kova_table`], or the flood's [`flood_table`]), with hot keys.
pub(crate) fn hot_table(scenario: Scenario, quota: Quota, keys: usize) -> KovaKeyed<Gcra> {
    let mut builder = Keyed::<u64, Gcra>::builder(quota);
    if keys >= LARGE_KEYS {
        builder = builder.max_keys(2 * keys);
    }
    let builder = builder.hot_keys(kova::keyed::HotKeys::new(HOT_SLOTS)).expect("hot keys in range");
    if scenario == Scenario::KeyedFlood {
        return filled_to_bound(builder);
    }
    KovaKeyed(builder.build().expect("quota representable"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::subject::Subject;

    /// The 1M-key scenarios' quota refills a unit a nanosecond, so a doorkeeper entry is young
    /// only within the coarse tick it was written in: two checks back to back still insert a
    /// key (a key whose two checks straddle a tick stays at the door, a few in a million).
    #[test]
    fn the_large_tables_hold_the_keys_their_fill_checks_twice() {
        let quota = Scenario::Keyed1mUniform.quota(kova::AlgorithmKind::Gcra);
        let table = kova_table::<Gcra>(quota, LARGE_KEYS);
        let keys = 20_000u64;
        for k in 0..keys {
            table.hit(k);
            table.hit(k);
        }
        let held = table.keys().unwrap();
        assert!(held as f64 >= keys as f64 * 0.99, "{held} of {keys}");
    }
}
