//! Partition keys (`pk`): a keyed digest of a client's limit key, so a response can say which
//! partition it was counted in without revealing the client IP or API key it was counted by.

use std::fmt;

use hmac::{Hmac, Mac};
use sha2::Sha256;

use crate::LimitKey;

/// Bytes of a digest that are published: 128 bits of HMAC-SHA256, enough that two clients
/// never share a `pk` by chance.
pub const PARTITION_KEY_LEN: usize = 16;
const _: () = assert!(PARTITION_KEY_LEN <= 32, "a partition key is cut from a 32-byte HMAC-SHA256");

/// Makes the `pk` of a request: HMAC-SHA256 under a secret, over the limit's name and the
/// client's [`LimitKey`], cut to [`PARTITION_KEY_LEN`] bytes.
///
/// Without the secret, a `pk` cannot be linked back to its key, even for keys as guessable as an
/// IPv4 address. The same secret on every server gives a client the same `pk` whichever server
/// answers; [`random`](Self::random) is for one server. The limit's name is hashed too, so one
/// client's partitions in two limits cannot be told to be the same client.
///
/// ```
/// use kova_tower::{LimitKey, PartitionKeys};
/// let keys = PartitionKeys::with_secret([7; 32]);
/// let ip = LimitKey::ip("203.0.113.7".parse()?, 32);
/// let pk = keys.digest("ip", &ip);
/// assert_eq!(pk, keys.digest("ip", &ip));
/// assert_ne!(pk, keys.digest("other", &ip));
/// assert_ne!(pk, PartitionKeys::with_secret([8; 32]).digest("ip", &ip));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
pub struct PartitionKeys {
    mac: Hmac<Sha256>,
}

impl fmt::Debug for PartitionKeys {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The secret stays out of logs.
        f.debug_struct("PartitionKeys").finish_non_exhaustive()
    }
}

impl PartitionKeys {
    /// Digests under `secret` (share it between servers that should agree).
    pub fn with_secret(secret: [u8; 32]) -> Self {
        #[expect(
            clippy::expect_used,
            reason = "HMAC takes keys of any length: `new_from_slice` never fails for it"
        )]
        let mac = <Hmac<Sha256> as Mac>::new_from_slice(&secret).expect("HMAC takes keys of any length");
        PartitionKeys { mac }
    }

    /// Digests under a secret drawn from the operating system's random source.
    ///
    /// ```
    /// let keys = kova_tower::PartitionKeys::random()?;
    /// # Ok::<(), getrandom::Error>(())
    /// ```
    pub fn random() -> Result<Self, getrandom::Error> {
        let mut secret = [0; 32];
        getrandom::fill(&mut secret)?;
        Ok(Self::with_secret(secret))
    }

    /// The `pk` of `key` in the limit named `limit`.
    pub fn digest(&self, limit: &str, key: &LimitKey) -> [u8; PARTITION_KEY_LEN] {
        let mut mac = self.mac.clone();
        mac.update(limit.as_bytes());
        // A limit name never holds a NUL byte: the name and the key cannot run into each other.
        mac.update(&[0]);
        // `LimitKey`'s text form is injective: two keys never hash the same input.
        mac.update(key.to_string().as_bytes());
        let full: [u8; 32] = mac.finalize().into_bytes().into();
        let mut out = [0; PARTITION_KEY_LEN];
        for (out, byte) in out.iter_mut().zip(full) {
            *out = byte;
        }
        out
    }
}
