//! LimitKey: whom one check is counted against.

use std::fmt;

use ipnet::IpNet;

/// Whom a check is counted against: a client network, an API key, a user, everyone, or a pair
/// of these (IP + username on a login route).
///
/// Every [`Limit`](crate::Limit) has its own table, so keys of different limits never share a
/// bucket. Within one limit, keys of different kinds never compare equal (an API key `"1.2.3.4"`
/// is not the IP 1.2.3.4).
///
/// [`Display`](fmt::Display) writes a stable, injective text form for shared stores (Redis key
/// names): `ip:203.0.113.7/32`, `ip:2001:db8:1:2::/64`, `key:abc`, `user:alice`, `global`,
/// `ip:203.0.113.7/32|user:alice`. Text is percent-escaped (`%`, `|`, `:` and every byte outside
/// visible ASCII), so two different keys never write the same text.
///
/// ```
/// use kova_tower::LimitKey;
/// let ip = LimitKey::ip("2001:db8:1:2:3:4:5:6".parse()?, 64);
/// assert_eq!(ip.to_string(), "ip:2001:db8:1:2::/64");
/// let login = LimitKey::pair(LimitKey::ip("203.0.113.7".parse()?, 32), LimitKey::user("al|ce"));
/// assert_eq!(login.to_string(), "ip:203.0.113.7/32|user:al%7Cce");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum LimitKey {
    /// One key for every request: a global limit.
    Global,
    /// A client network: an IPv4 or IPv6 address truncated to a prefix (IPv6 to /64 by default).
    Ip(IpNet),
    /// A text key of a kind: `"key"` (API key), `"user"` (authenticated user), or a kind named by
    /// a custom extractor.
    Text {
        /// The kind of key, written before the text.
        kind: &'static str,
        /// The key itself.
        value: Box<str>,
    },
    /// Two keys counted together, e.g. client IP and username on a login route.
    Pair(Box<(LimitKey, LimitKey)>),
}

impl LimitKey {
    /// The network of `ip` with `prefix_len` bits kept (prefixes longer than the address are cut
    /// to its length). IPv4-mapped IPv6 addresses (`::ffff:a.b.c.d`) count as IPv4.
    pub fn ip(ip: std::net::IpAddr, prefix_len: u8) -> Self {
        LimitKey::Ip(crate::client_ip::mask(ip, prefix_len, prefix_len))
    }

    /// An API key.
    pub fn api_key(value: &str) -> Self {
        LimitKey::Text { kind: "key", value: value.into() }
    }

    /// An authenticated user.
    pub fn user(value: &str) -> Self {
        LimitKey::Text { kind: "user", value: value.into() }
    }

    /// A text key of the kind `kind`.
    pub fn text(kind: &'static str, value: &str) -> Self {
        LimitKey::Text { kind, value: value.into() }
    }

    /// Two keys counted together.
    pub fn pair(first: LimitKey, second: LimitKey) -> Self {
        LimitKey::Pair(Box::new((first, second)))
    }
}

impl fmt::Display for LimitKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LimitKey::Global => f.write_str("global"),
            LimitKey::Ip(net) => write!(f, "ip:{net}"),
            LimitKey::Text { kind, value } => {
                write_escaped(f, kind)?;
                f.write_str(":")?;
                write_escaped(f, value)
            }
            LimitKey::Pair(pair) => write!(f, "{}|{}", pair.0, pair.1),
        }
    }
}

/// Writes `text` with `%`, `|`, `:` and every byte outside visible ASCII as `%XX`.
fn write_escaped(f: &mut fmt::Formatter<'_>, text: &str) -> fmt::Result {
    for &byte in text.as_bytes() {
        if byte.is_ascii_graphic() && !matches!(byte, b'%' | b'|' | b':') {
            fmt::Write::write_char(f, char::from(byte))?;
        } else {
            write!(f, "%{byte:02X}")?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_forms_are_injective_across_kinds_and_pairs() {
        let keys = [
            LimitKey::Global,
            LimitKey::api_key("global"),
            LimitKey::user("a|user:b"),
            LimitKey::pair(LimitKey::user("a"), LimitKey::user("b")),
            LimitKey::user("a:b"),
            LimitKey::text("a", "b"),
            LimitKey::user("a b%"),
        ];
        let texts: Vec<String> = keys.iter().map(ToString::to_string).collect();
        assert_eq!(
            texts,
            [
                "global",
                "key:global",
                "user:a%7Cuser%3Ab",
                "user:a|user:b",
                "user:a%3Ab",
                "a:b",
                "user:a%20b%25"
            ]
        );
        for (i, a) in texts.iter().enumerate() {
            for b in &texts[i + 1..] {
                assert_ne!(a, b);
            }
        }
    }

    #[test]
    fn ip_keys_are_truncated_networks() {
        let a = LimitKey::ip("2001:db8:1:2:aaaa::1".parse().unwrap(), 64);
        let b = LimitKey::ip("2001:db8:1:2:bbbb::2".parse().unwrap(), 64);
        let c = LimitKey::ip("2001:db8:1:3::1".parse().unwrap(), 64);
        assert_eq!(a, b);
        assert_ne!(a, c);
        assert_eq!(LimitKey::ip("::ffff:192.0.2.1".parse().unwrap(), 64).to_string(), "ip:192.0.2.1/32");
    }
}
