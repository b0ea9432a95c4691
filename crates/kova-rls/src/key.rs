//! The table key of a request descriptor: its domain and every entry, framed so that no two
//! descriptors share a key; long ones by their SHA-256.

use envoy_types::pb::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::Entry;
use sha2::{Digest, Sha256};

/// The longest key kept as the framed bytes themselves. Longer descriptors (a client-chosen
/// header value can be megabytes) are keyed by a digest of them, so a key's memory stays
/// bounded whatever the request carries.
pub const MAX_EXACT_KEY_BYTES: usize = 256;

/// First byte of a key kept as its bytes.
const EXACT: u8 = 0;
/// First byte of a key kept as its digest: never equal to an exact key.
const DIGEST: u8 = 1;

/// The key of `entries` in `domain`: `0x00` then every string length-prefixed (so `("a_b", "c")`
/// and `("a", "b_c")` differ); when that is longer than [`MAX_EXACT_KEY_BYTES`], `0x01` then
/// the SHA-256 of it.
///
/// ```
/// use envoy_types::pb::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::Entry;
/// let entry = |k: &str, v: &str| Entry { key: k.into(), value: v.into() };
/// let a = kova_rls::descriptor_key("d", &[entry("a_b", "c")]);
/// let b = kova_rls::descriptor_key("d", &[entry("a", "b_c")]);
/// assert_ne!(a, b);
/// let huge = kova_rls::descriptor_key("d", &[entry("k", &"x".repeat(1 << 20))]);
/// assert_eq!(huge.len(), 33);
/// ```
pub fn descriptor_key(domain: &str, entries: &[Entry]) -> Vec<u8> {
    let framed =
        1 + 8 + domain.len() + entries.iter().map(|e| 16 + e.key.len() + e.value.len()).sum::<usize>();
    if framed <= MAX_EXACT_KEY_BYTES {
        let mut key = Vec::with_capacity(framed);
        key.push(EXACT);
        frame(domain, entries, |bytes| key.extend_from_slice(bytes));
        key
    } else {
        let mut hasher = Sha256::new();
        frame(domain, entries, |bytes| hasher.update(bytes));
        let mut key = Vec::with_capacity(33);
        key.push(DIGEST);
        key.extend_from_slice(&hasher.finalize());
        key
    }
}

fn frame(domain: &str, entries: &[Entry], mut out: impl FnMut(&[u8])) {
    let mut string = |s: &str| {
        out(&(s.len() as u64).to_le_bytes());
        out(s.as_bytes());
    };
    string(domain);
    for entry in entries {
        string(&entry.key);
        string(&entry.value);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(k: &str, v: &str) -> Entry {
        Entry { key: k.into(), value: v.into() }
    }

    #[test]
    fn keys_separate_domains_entries_and_lengths() {
        let one = descriptor_key("d", &[entry("k", "v")]);
        assert_eq!(one[0], EXACT);
        assert_ne!(one, descriptor_key("e", &[entry("k", "v")]));
        assert_ne!(one, descriptor_key("d", &[entry("k", "v"), entry("k", "v")]));
        assert_ne!(descriptor_key("dk", &[entry("", "v")]), descriptor_key("d", &[entry("k", "v")]));
        assert_eq!(one, descriptor_key("d", &[entry("k", "v")]));
    }

    #[test]
    fn long_keys_are_digests_that_still_separate() {
        let long = "x".repeat(MAX_EXACT_KEY_BYTES);
        let a = descriptor_key("d", &[entry("k", &long)]);
        let b = descriptor_key("d", &[entry("k", &format!("{long}y"))]);
        assert_eq!((a.len(), a[0]), (33, DIGEST));
        assert_ne!(a, b);
        assert_eq!(a, descriptor_key("d", &[entry("k", &long)]));
    }
}
