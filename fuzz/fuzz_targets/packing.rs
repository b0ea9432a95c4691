//! Target 3, packing: arbitrary states round-trip through each packed encoding, and each
//! single-word algorithm's pure `decide` on an arbitrary word (corrupt, from a future or past
//! clock, or from another quota) at an arbitrary time never panics and keeps its contract.
//!
//! Catches: a field spilling into its neighbour (wrong mask or shift), a field cut short, the
//! token bucket's clamp to the burst lost, and in `decide`: overflow on words no valid history
//! produces, a denial or a peek that writes, decisions with impossible fields, an admitted word
//! that a peek at the same instant reads differently from the decision that wrote it.
#![no_main]

use arbitrary::Arbitrary;
use kova::{FixedWindow, Gcra, Quota, SlidingWindowCounter, TokenBucket, WordAlgorithm};
use libfuzzer_sys::fuzz_target;

#[derive(Debug, Arbitrary)]
struct Input {
    a: u64,
    b: u64,
    c: u64,
    word: u64,
    now: u64,
    cost: u64,
    limit: u32,
    period: u64,
    burst: u32,
}

fn check_decide<W: WordAlgorithm>(algorithm: &W, word: u64, now: u64, cost: u64) {
    let capacity = algorithm.capacity();
    let cost = cost % (capacity + 1);
    let (decision, new) = algorithm.decide(word, now, cost);
    let name = W::NAME;
    assert_eq!(decision.limit(), capacity, "{name}");
    assert!(decision.remaining() <= capacity, "{name} word {word:#x} now {now} cost {cost}: {decision:?}");
    assert_eq!(decision.fallback(), None);
    if decision.is_allowed() {
        assert_eq!(decision.retry_after_nanos(), 0, "{name}: {decision:?}");
    } else {
        assert!(decision.retry_after_nanos() >= 1, "{name}: {decision:?}");
    }
    if cost == 0 || !decision.is_allowed() {
        assert_eq!(new, word, "{name}: a peek or a denial wrote (word {word:#x} now {now} cost {cost})");
    } else if now < 1 << 62 {
        // What the admission wrote reads back, at the same instant, as what it reported (below
        // 2^62 ns, 146 years: GCRA's TAT saturates near the end of the timeline, documented).
        let (peek, same) = algorithm.decide(new, now, 0);
        assert_eq!(same, new);
        assert_eq!(
            peek.remaining(),
            decision.remaining(),
            "{name} word {word:#x} now {now} cost {cost}: admitted {decision:?}, peek after {peek:?}"
        );
    }
    let _ = algorithm.is_idle_word(word, now);
}

fuzz_target!(|input: Input| {
    // Fixed window: (window mod 2^32, count mod 2^32), every word a valid encoding.
    let (window, count) = FixedWindow::unpack_state(FixedWindow::pack_state(input.a, input.b));
    assert_eq!((window, count), (input.a & 0xFFFF_FFFF, input.b & 0xFFFF_FFFF));
    let (w, c) = FixedWindow::unpack_state(input.word);
    assert_eq!(FixedWindow::pack_state(w, c), input.word);

    // Sliding window counter: (window mod 2^24, prev mod 2^20, current mod 2^20).
    let mask20 = (1 << SlidingWindowCounter::COUNT_BITS) - 1;
    let unpacked =
        SlidingWindowCounter::unpack_state(SlidingWindowCounter::pack_state(input.a, input.b, input.c));
    assert_eq!(
        unpacked,
        (input.a & ((1 << SlidingWindowCounter::WINDOW_BITS) - 1), input.b & mask20, input.c & mask20)
    );
    let (w, p, c) = SlidingWindowCounter::unpack_state(input.word);
    assert_eq!(SlidingWindowCounter::pack_state(w, p, c), input.word);

    // A quota for the algorithms (skipped when invalid: the configuration target covers that).
    let Ok(quota) = Quota::from_nanos(u64::from(input.limit).max(1), input.period) else { return };
    let bucket_quota = if input.burst == 0 { Ok(quota) } else { quota.with_burst(u64::from(input.burst)) };

    if let Ok(Ok(bucket)) = bucket_quota.map(<TokenBucket as WordAlgorithm>::from_quota) {
        // Token bucket: (tokens clamped to the burst, stamp mod 2^42).
        let burst = bucket.capacity();
        let stamp_mask = (1u64 << TokenBucket::STAMP_BITS) - 1;
        let word = bucket.pack_state(input.a, input.b);
        assert_eq!(TokenBucket::unpack_state(word), (input.a.min(burst), input.b & stamp_mask));
        let (tokens, stamp) = TokenBucket::unpack_state(input.word);
        if tokens <= burst {
            assert_eq!(bucket.pack_state(tokens, stamp), input.word);
        }
        check_decide(&bucket, input.word, input.now, input.cost);
    }
    if let Ok(Ok(gcra)) = bucket_quota.map(<Gcra as WordAlgorithm>::from_quota) {
        check_decide(&gcra, input.word, input.now, input.cost);
    }
    if let Ok(fixed) = <FixedWindow as WordAlgorithm>::from_quota(quota) {
        // Also words whose count exceeds the limit (stored under a bigger quota): read as full.
        check_decide(&fixed, input.word, input.now, input.cost);
    }
    if let Ok(counter) = <SlidingWindowCounter as WordAlgorithm>::from_quota(quota) {
        check_decide(&counter, input.word, input.now, input.cost);
    }
});
