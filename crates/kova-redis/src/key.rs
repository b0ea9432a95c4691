//! Redis key names: `prefix:{tag}:algorithm`, the user's key made safe inside a hash tag.

use std::fmt;

use kova::AlgorithmKind;
use sha2::{Digest, Sha256};

/// The longest escaped user key kept verbatim in the tag; longer keys are hashed.
pub const MAX_VERBATIM_KEY: usize = 128;

/// The longest prefix accepted.
pub const MAX_PREFIX: usize = 256;

/// A key prefix Redis Cluster would misread.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum PrefixError {
    /// The prefix contains `{` or `}`, which would change the key's hash tag.
    Brace,
    /// The prefix is longer than [`MAX_PREFIX`] bytes.
    TooLong {
        /// Its length in bytes.
        len: usize,
    },
}

impl fmt::Display for PrefixError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PrefixError::Brace => {
                f.write_str("a key prefix must not contain '{' or '}' (it would change the hash tag)")
            }
            PrefixError::TooLong { len } => {
                write!(f, "a key prefix of {len} bytes is longer than {MAX_PREFIX}")
            }
        }
    }
}

impl std::error::Error for PrefixError {}

/// Builds the Redis key of a (user key, algorithm) pair.
///
/// The key is `prefix:{tag}:alg`, where `tag` is
/// - `=` followed by the user key with every byte outside printable ASCII, and `{`, `}`, `%`,
///   written as `%XX` (uppercase hex), when that is at most [`MAX_VERBATIM_KEY`] bytes;
/// - `#` followed by the hex SHA-256 of the user key otherwise.
///
/// So the tag never contains a brace (Redis Cluster hashes exactly the tag: all of one limit's
/// keys land on one slot), is never empty (an empty `{}` would make Redis hash the whole name),
/// and distinct user keys give distinct tags (escaping is injective, the two forms differ in
/// their first byte, and finding two keys with the same SHA-256 is infeasible). The prefix is
/// checked to hold no brace, so nothing a caller passes can address another key.
///
/// ```
/// use kova::AlgorithmKind;
/// let keys = kova_redis::KeyBuilder::new("rl")?;
/// assert_eq!(keys.key(b"user:42", AlgorithmKind::Gcra), b"rl:{=user:42}:gcra");
/// assert_eq!(keys.key(b"a}b {c", AlgorithmKind::FixedWindow), b"rl:{=a%7Db%20%7Bc}:fw");
/// assert!(keys.key(&[b'x'; 1000], AlgorithmKind::Gcra).starts_with(b"rl:{#"));
/// assert!(kova_redis::KeyBuilder::new("bad{prefix").is_err());
/// # Ok::<(), kova_redis::PrefixError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyBuilder {
    prefix: String,
}

impl KeyBuilder {
    /// Keys under `prefix` (`"kova"` by default in the limiter).
    pub fn new(prefix: &str) -> Result<Self, PrefixError> {
        if prefix.contains(['{', '}']) {
            return Err(PrefixError::Brace);
        }
        if prefix.len() > MAX_PREFIX {
            return Err(PrefixError::TooLong { len: prefix.len() });
        }
        Ok(KeyBuilder { prefix: prefix.to_owned() })
    }

    /// The prefix.
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// The Redis key holding `user_key`'s state for `kind`.
    pub fn key(&self, user_key: &[u8], kind: AlgorithmKind) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.prefix.len() + user_key.len().min(MAX_VERBATIM_KEY) + 16);
        out.extend_from_slice(self.prefix.as_bytes());
        out.extend_from_slice(b":{");
        push_tag(&mut out, user_key);
        out.extend_from_slice(b"}:");
        out.extend_from_slice(short_name(kind).as_bytes());
        out
    }
}

impl KeyBuilder {
    /// The Redis key of limit `index` of a composite on `user_key`:
    /// `prefix:{tag}:limits:<index>:alg`. The same tag as the key's single limits, so all of a
    /// composite's keys share one cluster slot, and a suffix no single limit's key has, so a
    /// composite's state is its own.
    pub(crate) fn limits_key(&self, user_key: &[u8], index: usize, kind: AlgorithmKind) -> Vec<u8> {
        let mut out = self.key(user_key, kind);
        out.truncate(out.len() - short_name(kind).len());
        out.extend_from_slice(format!("limits:{index}:{}", short_name(kind)).as_bytes());
        out
    }
}

/// The algorithm's suffix in key names.
fn short_name(kind: AlgorithmKind) -> &'static str {
    match kind {
        AlgorithmKind::TokenBucket => "tb",
        AlgorithmKind::Gcra => "gcra",
        AlgorithmKind::FixedWindow => "fw",
        AlgorithmKind::SlidingWindowCounter => "swc",
        AlgorithmKind::SlidingWindowLog => "swl",
    }
}

fn is_verbatim(b: u8) -> bool {
    b.is_ascii_graphic() && !matches!(b, b'{' | b'}' | b'%')
}

const HEX: &[u8; 16] = b"0123456789ABCDEF";
const HEX_LOWER: &[u8; 16] = b"0123456789abcdef";

#[expect(clippy::indexing_slicing, reason = "a nibble (b >> 4, b & 15) is below 16, each table's length")]
fn push_tag(out: &mut Vec<u8>, user_key: &[u8]) {
    let escaped_len: usize = user_key.iter().map(|&b| if is_verbatim(b) { 1 } else { 3 }).sum();
    if escaped_len <= MAX_VERBATIM_KEY {
        out.push(b'=');
        for &b in user_key {
            if is_verbatim(b) {
                out.push(b);
            } else {
                out.extend_from_slice(&[b'%', HEX[(b >> 4) as usize], HEX[(b & 15) as usize]]);
            }
        }
    } else {
        out.push(b'#');
        for b in Sha256::digest(user_key) {
            out.extend_from_slice(&[HEX_LOWER[(b >> 4) as usize], HEX_LOWER[(b & 15) as usize]]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    fn tag_of(key: &[u8]) -> Vec<u8> {
        let full = KeyBuilder::new("p").unwrap().key(key, AlgorithmKind::Gcra);
        let open = full.iter().position(|&b| b == b'{').unwrap();
        let close = full.iter().position(|&b| b == b'}').unwrap();
        assert!(close > open + 1, "empty tag for {key:?}");
        assert_eq!(full.iter().filter(|&&b| b == b'{' || b == b'}').count(), 2, "{full:?}");
        full[open + 1..close].to_vec()
    }

    #[test]
    fn hostile_keys_get_distinct_well_formed_tags() {
        let mut keys: Vec<Vec<u8>> = vec![
            b"".to_vec(),
            b" ".to_vec(),
            b"{".to_vec(),
            b"}".to_vec(),
            b"}{".to_vec(),
            b"{a}".to_vec(),
            b"%7B".to_vec(),
            b"%".to_vec(),
            b"=".to_vec(),
            b"#".to_vec(),
            b"=x".to_vec(),
            b"x".to_vec(),
            b"a}:gcra".to_vec(),
            "ünïcödé".as_bytes().to_vec(),
            vec![0, 1, 2, 255],
            vec![b'a'; MAX_VERBATIM_KEY],
            vec![b'a'; MAX_VERBATIM_KEY + 1],
            vec![b' '; MAX_VERBATIM_KEY / 3],
            vec![b' '; MAX_VERBATIM_KEY / 3 + 1],
            vec![b'z'; 1 << 20],
        ];
        keys.extend((0..=255u8).map(|b| vec![b]));
        let tags: HashSet<Vec<u8>> = keys.iter().map(|k| tag_of(k)).collect();
        let distinct: HashSet<&Vec<u8>> = keys.iter().collect();
        assert_eq!(tags.len(), distinct.len());
        for key in &keys {
            assert!(tag_of(key).len() <= MAX_VERBATIM_KEY + 1);
        }
    }

    #[test]
    fn verbatim_limit_is_on_the_escaped_length() {
        assert_eq!(tag_of(&[b'a'; MAX_VERBATIM_KEY])[0], b'=');
        assert_eq!(tag_of(&[b'a'; MAX_VERBATIM_KEY + 1])[0], b'#');
        assert_eq!(tag_of(&[b' '; MAX_VERBATIM_KEY / 3 + 1])[0], b'#');
        assert_eq!(tag_of(&[b'a'; MAX_VERBATIM_KEY + 1]).len(), 65);
    }

    #[test]
    fn prefixes_are_checked() {
        assert_eq!(KeyBuilder::new("a{b"), Err(PrefixError::Brace));
        assert_eq!(KeyBuilder::new("a}b"), Err(PrefixError::Brace));
        assert_eq!(
            KeyBuilder::new(&"p".repeat(MAX_PREFIX + 1)),
            Err(PrefixError::TooLong { len: MAX_PREFIX + 1 })
        );
        assert!(KeyBuilder::new("").is_ok());
    }

    #[test]
    fn composite_keys_share_the_tag_not_the_key() {
        let keys = KeyBuilder::new("p").unwrap();
        assert_eq!(keys.limits_key(b"u", 2, AlgorithmKind::Gcra), b"p:{=u}:limits:2:gcra");
        assert_ne!(keys.limits_key(b"u", 0, AlgorithmKind::Gcra), keys.key(b"u", AlgorithmKind::Gcra));
    }

    #[test]
    fn algorithms_do_not_share_keys() {
        let keys = KeyBuilder::new("p").unwrap();
        let names: HashSet<Vec<u8>> = AlgorithmKind::ALL.iter().map(|&k| keys.key(b"k", k)).collect();
        assert_eq!(names.len(), 5);
    }
}
