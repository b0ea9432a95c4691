//! Who the client is: the peer address, or the forwarding headers read through trusted proxies.
//!
//! Pure functions over plain values (no I/O, no allocation on the X-Forwarded-For path), public so
//! that fuzz targets and users' own code can call them.
//!
//! # The rule
//! A forwarding header is a list that each proxy appends to: the client writes whatever it likes
//! on the left, and each proxy adds the address of the hop it received the request from on the
//! right. Only the entries added by proxies we trust are worth anything, so [`client_ip`] walks
//! from the **right**: starting from the peer (the connection's remote address), while the
//! current hop is a trusted proxy it steps one entry to the left; the first hop that is not a
//! trusted proxy is the client. The leftmost entry is never taken on its own word (taking it, as
//! tower-governor's `SmartIp` does, lets any client pick its own key by sending
//! `X-Forwarded-For: <anything>`).
//!
//! Only the one header that the proxies are configured to write is read
//! ([`ForwardedHeader`]): if the proxies write `X-Forwarded-For` and pass a client's `Forwarded`
//! header through untouched, reading `Forwarded` too would let the client choose its address.
//!
//! ```
//! use std::net::IpAddr;
//! use http::HeaderMap;
//! use kova_tower::client_ip::{client_ip, TrustedProxies};
//!
//! let trusted = TrustedProxies::parse("10.0.0.0/8")?;
//! let mut headers = HeaderMap::new();
//! // The client wrote "1.1.1.1"; the proxy 10.0.0.2 appended the address it saw, 203.0.113.7.
//! headers.insert("x-forwarded-for", "1.1.1.1, 203.0.113.7".parse()?);
//! let via_proxy: IpAddr = "10.0.0.2".parse()?;
//! assert_eq!(client_ip(via_proxy, &headers, &trusted)?, "203.0.113.7".parse::<IpAddr>()?);
//! // The same header straight from an untrusted peer is ignored.
//! let direct: IpAddr = "198.51.100.9".parse()?;
//! assert_eq!(client_ip(direct, &headers, &trusted)?, direct);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::fmt;
use std::net::{IpAddr, SocketAddr};

use http::header::HeaderName;
use http::HeaderMap;
use ipnet::IpNet;

mod trusted;

pub use trusted::{ForwardedHeader, TrustedProxies, TrustedProxiesError, X_FORWARDED_FOR};

/// Why the client address could not be told.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ClientIpError {
    /// The peer is a trusted proxy but sent no forwarding header: it did not say whom it
    /// forwards for.
    MissingHeader {
        /// The header expected.
        header: HeaderName,
    },
    /// An entry that a trusted proxy wrote is not an address (`X-Forwarded-For` entries and
    /// `Forwarded` `for=` values are IPv4 or IPv6 addresses, optionally with a port).
    Malformed {
        /// The header read.
        header: HeaderName,
    },
    /// A trusted proxy forwarded for an unknown or obfuscated node (`for=unknown`,
    /// `for=_hidden`).
    Unknown {
        /// The header read.
        header: HeaderName,
    },
}

impl fmt::Display for ClientIpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ClientIpError::MissingHeader { header } => {
                write!(f, "the request came through a trusted proxy without a {header} header")
            }
            ClientIpError::Malformed { header } => {
                write!(f, "the {header} header written by a trusted proxy is not a list of addresses")
            }
            ClientIpError::Unknown { header } => {
                write!(f, "a trusted proxy forwarded for an unknown or hidden client ({header})")
            }
        }
    }
}

impl std::error::Error for ClientIpError {}

/// A forwarding-header entry that is not an address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MalformedAddress;

impl fmt::Display for MalformedAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("not an IP address (with an optional port)")
    }
}

impl std::error::Error for MalformedAddress {}

/// A `for=` node of a `Forwarded` element (RFC 7239 section 6).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Node {
    /// An address (any port dropped).
    Ip(IpAddr),
    /// `unknown` or an obfuscated identifier (`_hidden`).
    Unknown,
}

/// The client's address: `peer` itself unless `peer` is a trusted proxy, else the rightmost
/// address in the configured forwarding header that is not a trusted proxy.
///
/// Every address is canonicalised (IPv4-mapped IPv6 becomes IPv4). When every address in the
/// header is a trusted proxy, the leftmost one is the client (a request from inside the trusted
/// network). Several header lines count as one list, in order.
///
/// Only the entries written by trusted proxies are parsed: whatever the client wrote further
/// left, however malformed, is never looked at unless every hop to its right is trusted.
pub fn client_ip(
    peer: IpAddr,
    headers: &HeaderMap,
    trusted: &TrustedProxies,
) -> Result<IpAddr, ClientIpError> {
    let mut hop = peer.to_canonical();
    if !trusted.contains(hop) {
        return Ok(hop);
    }
    let name = trusted.header().name();
    let mut lines = headers.get_all(&name).iter().rev().peekable();
    if lines.peek().is_none() {
        return Err(ClientIpError::MissingHeader { header: name });
    }
    let malformed = || ClientIpError::Malformed { header: trusted.header().name() };
    let mut seen_any = false;
    for line in lines {
        // Split bytes, not text: a byte outside UTF-8 that the client wrote further left must not
        // spoil the entries the proxies appended on the right.
        for element in line.as_bytes().rsplit(|&byte| byte == b',') {
            let element = std::str::from_utf8(element).map_err(|_| malformed())?;
            if element.trim().is_empty() {
                continue;
            }
            let node = match trusted.header() {
                ForwardedHeader::XForwardedFor => parse_x_forwarded_for_entry(element).map(Node::Ip),
                // An element without `for` says nothing about the hop it stands for.
                ForwardedHeader::Forwarded => {
                    parse_forwarded_element(element).map(|node| node.unwrap_or(Node::Unknown))
                }
            };
            seen_any = true;
            match node {
                Ok(Node::Ip(ip)) => {
                    hop = ip.to_canonical();
                    if !trusted.contains(hop) {
                        return Ok(hop);
                    }
                }
                Ok(Node::Unknown) => return Err(ClientIpError::Unknown { header: name }),
                Err(MalformedAddress) => return Err(malformed()),
            }
        }
    }
    if seen_any {
        Ok(hop)
    } else {
        Err(ClientIpError::MissingHeader { header: name })
    }
}

/// Parses one `X-Forwarded-For` entry: `203.0.113.7`, `2001:db8::1`, `203.0.113.7:4711` or
/// `[2001:db8::1]:4711` (ports are dropped), surrounding whitespace ignored.
///
/// ```
/// use kova_tower::client_ip::parse_x_forwarded_for_entry;
/// assert_eq!(parse_x_forwarded_for_entry(" [2001:db8::1]:80 "), Ok("2001:db8::1".parse().unwrap()));
/// assert!(parse_x_forwarded_for_entry("unknown").is_err());
/// ```
pub fn parse_x_forwarded_for_entry(entry: &str) -> Result<IpAddr, MalformedAddress> {
    parse_address(entry.trim())
}

fn parse_address(text: &str) -> Result<IpAddr, MalformedAddress> {
    if let Ok(ip) = text.parse::<IpAddr>() {
        return Ok(ip);
    }
    if let Ok(socket) = text.parse::<SocketAddr>() {
        return Ok(socket.ip());
    }
    // "[2001:db8::1]" without a port.
    text.strip_prefix('[')
        .and_then(|rest| rest.strip_suffix(']'))
        .and_then(|inner| inner.parse::<std::net::Ipv6Addr>().ok())
        .map(IpAddr::V6)
        .ok_or(MalformedAddress)
}

/// Parses one element of a `Forwarded` header (the text between two commas): `Ok(Some(node))`
/// for its `for=` parameter, `Ok(None)` when it has none (or is empty), an error when it is
/// malformed.
///
/// Elements are split on every comma and pairs on every semicolon, quoted or not: a `for=` value
/// never holds either, and splitting this way means a client's unbalanced quote on the left of
/// the header cannot swallow the elements that the trusted proxies appended on the right.
///
/// ```
/// use kova_tower::client_ip::{parse_forwarded_element, Node};
/// assert_eq!(
///     parse_forwarded_element(r#" For="[2001:db8:cafe::17]:4711";proto=https"#),
///     Ok(Some(Node::Ip("2001:db8:cafe::17".parse().unwrap())))
/// );
/// assert_eq!(parse_forwarded_element("for=unknown"), Ok(Some(Node::Unknown)));
/// assert_eq!(parse_forwarded_element("proto=http"), Ok(None));
/// assert!(parse_forwarded_element("for=[::1").is_err());
/// ```
pub fn parse_forwarded_element(element: &str) -> Result<Option<Node>, MalformedAddress> {
    let mut found = None;
    for pair in element.split(';') {
        let pair = pair.trim();
        if pair.is_empty() {
            continue;
        }
        let (name, value) = pair.split_once('=').ok_or(MalformedAddress)?;
        if !name.trim().eq_ignore_ascii_case("for") {
            continue;
        }
        if found.is_some() {
            // Two `for` parameters in one element: RFC 7239 allows each parameter once.
            return Err(MalformedAddress);
        }
        found = Some(parse_forwarded_node(value.trim())?);
    }
    Ok(found)
}

/// Parses a `for=` value (quoted or not): an address with an optional port, `unknown`, or an
/// obfuscated identifier starting with `_`.
pub fn parse_forwarded_node(value: &str) -> Result<Node, MalformedAddress> {
    let value = match value.strip_prefix('"') {
        Some(rest) => rest.strip_suffix('"').ok_or(MalformedAddress)?,
        None => value,
    };
    if value.contains(['"', '\\']) {
        return Err(MalformedAddress);
    }
    // An obfuscated port ("[2001:db8::1]:_abc", "192.0.2.1:_p") still names the address.
    let without_port = strip_obfuscated_port(value);
    let head = without_port.split(':').next().unwrap_or_default();
    if head.eq_ignore_ascii_case("unknown") || head.starts_with('_') {
        return Ok(Node::Unknown);
    }
    parse_address(without_port).map(Node::Ip)
}

fn strip_obfuscated_port(value: &str) -> &str {
    match value.rfind(':') {
        Some(colon)
            if value[colon + 1..].starts_with('_')
                && (value.starts_with('[') || !value[..colon].contains(':')) =>
        {
            &value[..colon]
        }
        _ => value,
    }
}

/// The network `ip` belongs to at the given prefix lengths: `v4_prefix` bits of an IPv4 address,
/// `v6_prefix` bits of an IPv6 one (each cut to the address's length). IPv4-mapped IPv6
/// addresses count as IPv4.
///
/// ```
/// use kova_tower::client_ip::mask;
/// assert_eq!(mask("2001:db8:1:2:3:4:5:6".parse()?, 32, 64).to_string(), "2001:db8:1:2::/64");
/// assert_eq!(mask("203.0.113.77".parse()?, 24, 64).to_string(), "203.0.113.0/24");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn mask(ip: IpAddr, v4_prefix: u8, v6_prefix: u8) -> IpNet {
    let ip = ip.to_canonical();
    let (prefix, whole) = match ip {
        IpAddr::V4(_) => (v4_prefix.min(32), 32),
        IpAddr::V6(_) => (v6_prefix.min(128), 128),
    };
    // The whole address (every IPv4 key by default): nothing to cut, on every request.
    if prefix == whole {
        return IpNet::from(ip);
    }
    // The prefix is within the address's length, so `new` cannot fail; the fallback keeps the
    // whole address rather than panicking.
    IpNet::new(ip, prefix).map_or_else(|_| IpNet::from(ip), |net| net.trunc())
}

#[cfg(test)]
mod tests {
    use http::header::FORWARDED;

    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    fn headers(name: &str, lines: &[&str]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for line in lines {
            map.append(HeaderName::from_bytes(name.as_bytes()).unwrap(), line.parse().unwrap());
        }
        map
    }

    #[test]
    fn untrusted_peer_is_the_client_whatever_it_sends() {
        let trusted = TrustedProxies::parse("10.0.0.0/8").unwrap();
        let h = headers("x-forwarded-for", &["9.9.9.9"]);
        assert_eq!(client_ip(ip("1.2.3.4"), &h, &trusted), Ok(ip("1.2.3.4")));
        assert_eq!(client_ip(ip("1.2.3.4"), &h, &TrustedProxies::none()), Ok(ip("1.2.3.4")));
    }

    #[test]
    fn rightmost_untrusted_entry_wins_never_the_leftmost() {
        let trusted = TrustedProxies::parse("10.0.0.0/8, 192.168.0.1").unwrap();
        let h = headers("x-forwarded-for", &["6.6.6.6, 5.5.5.5", "203.0.113.7, 192.168.0.1, 10.0.0.3"]);
        assert_eq!(client_ip(ip("10.0.0.2"), &h, &trusted), Ok(ip("203.0.113.7")));
    }

    #[test]
    fn client_junk_left_of_the_client_is_never_parsed() {
        let trusted = TrustedProxies::parse("10.0.0.0/8").unwrap();
        let h = headers("x-forwarded-for", &["not an ip, \"[, 203.0.113.7"]);
        assert_eq!(client_ip(ip("10.0.0.2"), &h, &trusted), Ok(ip("203.0.113.7")));
        let h = headers("forwarded", &["for=\"[::1, for=203.0.113.7"]);
        let fwd = trusted.clone().with_header(ForwardedHeader::Forwarded);
        assert_eq!(client_ip(ip("10.0.0.2"), &h, &fwd), Ok(ip("203.0.113.7")));
    }

    #[test]
    fn all_trusted_chain_yields_the_leftmost_trusted_hop() {
        let trusted = TrustedProxies::parse("10.0.0.0/8").unwrap();
        let h = headers("x-forwarded-for", &["10.9.9.9, 10.0.0.3"]);
        assert_eq!(client_ip(ip("10.0.0.2"), &h, &trusted), Ok(ip("10.9.9.9")));
    }

    #[test]
    fn trusted_peer_without_header_or_with_garbage_is_an_error() {
        let trusted = TrustedProxies::parse("10.0.0.0/8").unwrap();
        let name = X_FORWARDED_FOR;
        assert_eq!(
            client_ip(ip("10.0.0.2"), &HeaderMap::new(), &trusted),
            Err(ClientIpError::MissingHeader { header: name.clone() })
        );
        let h = headers("x-forwarded-for", &[" , "]);
        assert_eq!(
            client_ip(ip("10.0.0.2"), &h, &trusted),
            Err(ClientIpError::MissingHeader { header: name.clone() })
        );
        let h = headers("x-forwarded-for", &["1.2.3.4, bogus"]);
        assert_eq!(client_ip(ip("10.0.0.2"), &h, &trusted), Err(ClientIpError::Malformed { header: name }));
    }

    #[test]
    fn forwarded_header_nodes() {
        let trusted = TrustedProxies::parse("10.0.0.0/8").unwrap().with_header(ForwardedHeader::Forwarded);
        let h = headers(
            "forwarded",
            &["for=1.1.1.1, for=\"[2001:db8::7]:443\";proto=https;by=10.0.0.1, for=10.0.0.9"],
        );
        assert_eq!(client_ip(ip("10.0.0.2"), &h, &trusted), Ok(ip("2001:db8::7")));
        let h = headers("forwarded", &["for=_hidden, for=10.0.0.9"]);
        assert_eq!(
            client_ip(ip("10.0.0.2"), &h, &trusted),
            Err(ClientIpError::Unknown { header: FORWARDED })
        );
        // X-Forwarded-For is not read when the proxies write Forwarded.
        let h = headers("x-forwarded-for", &["1.1.1.1"]);
        assert_eq!(
            client_ip(ip("10.0.0.2"), &h, &trusted),
            Err(ClientIpError::MissingHeader { header: FORWARDED })
        );
    }

    #[test]
    fn node_forms() {
        assert_eq!(parse_forwarded_node("192.0.2.43:47011"), Ok(Node::Ip(ip("192.0.2.43"))));
        assert_eq!(parse_forwarded_node("\"[2001:db8::1]\""), Ok(Node::Ip(ip("2001:db8::1"))));
        assert_eq!(parse_forwarded_node("\"[2001:db8::1]:_p1\""), Ok(Node::Ip(ip("2001:db8::1"))));
        assert_eq!(parse_forwarded_node("192.0.2.43:_p"), Ok(Node::Ip(ip("192.0.2.43"))));
        assert_eq!(parse_forwarded_node("UNKNOWN"), Ok(Node::Unknown));
        assert_eq!(parse_forwarded_node("\"unterminated"), Err(MalformedAddress));
        assert_eq!(parse_forwarded_node("2001:db8::1"), Ok(Node::Ip(ip("2001:db8::1"))));
        assert_eq!(parse_forwarded_element("for"), Err(MalformedAddress));
        assert_eq!(parse_forwarded_element("for=1.2.3.4;for=1.2.3.5"), Err(MalformedAddress));
        assert_eq!(parse_x_forwarded_for_entry("1.2.3.4:80"), Ok(ip("1.2.3.4")));
        assert_eq!(parse_x_forwarded_for_entry("fe80::1%eth0"), Err(MalformedAddress));
    }

    #[test]
    fn mapped_addresses_are_ipv4() {
        let trusted = TrustedProxies::parse("::ffff:10.0.0.0/104").unwrap();
        assert!(trusted.contains(ip("10.1.1.1")));
        let h = headers("x-forwarded-for", &["::ffff:203.0.113.7"]);
        assert_eq!(client_ip(ip("::ffff:10.0.0.2"), &h, &trusted), Ok(ip("203.0.113.7")));
        assert_eq!(mask(ip("::ffff:203.0.113.7"), 32, 64).to_string(), "203.0.113.7/32");
    }

    /// One X-Forwarded-For entry of the generated headers.
    #[derive(Debug, Clone)]
    enum Entry {
        Client(u8),
        Proxy(u8),
        /// Never an address (no digits, colons or brackets).
        Junk(String),
        Empty,
    }

    impl Entry {
        fn text(&self) -> String {
            match self {
                Entry::Client(n) => format!("203.0.113.{n}"),
                Entry::Proxy(n) => format!("10.0.0.{n}"),
                Entry::Junk(s) => s.clone(),
                Entry::Empty => String::new(),
            }
        }
    }

    fn entry() -> impl proptest::strategy::Strategy<Value = Entry> {
        use proptest::prelude::*;
        prop_oneof![
            any::<u8>().prop_map(Entry::Client),
            any::<u8>().prop_map(Entry::Proxy),
            "[a-z\" ;=_]{1,8}".prop_map(Entry::Junk),
            Just(Entry::Empty),
        ]
    }

    proptest::proptest! {
        /// Against a model: the peer unless trusted; else the rightmost non-proxy entry; an
        /// error only if junk is met before it; never anything left of the first non-proxy.
        #[test]
        fn rightmost_untrusted_against_a_model(
            lines in proptest::collection::vec(proptest::collection::vec(entry(), 0..5), 0..3),
            peer_trusted in proptest::bool::ANY,
        ) {
            let trusted = TrustedProxies::parse("10.0.0.0/8").unwrap();
            let peer = if peer_trusted { ip("10.9.9.9") } else { ip("198.51.100.1") };
            let mut headers = HeaderMap::new();
            for line in &lines {
                let text = line.iter().map(Entry::text).collect::<Vec<_>>().join(",");
                if let Ok(value) = text.parse() {
                    headers.append(X_FORWARDED_FOR, value);
                }
            }
            let got = client_ip(peer, &headers, &trusted);
            let expected = if !peer_trusted {
                Ok(peer)
            } else {
                let mut hop = None;
                let mut verdict = None;
                let present: Vec<String> = headers.get_all(X_FORWARDED_FOR).iter().map(|v| v.to_str().unwrap().to_owned()).collect();
                'walk: for line in present.iter().rev() {
                    for element in line.rsplit(',') {
                        let element = element.trim();
                        if element.is_empty() {
                            continue;
                        }
                        match element.parse::<IpAddr>() {
                            Ok(a) if trusted.contains(a) => hop = Some(a),
                            Ok(a) => { verdict = Some(Ok(a)); break 'walk; }
                            Err(_) => { verdict = Some(Err(ClientIpError::Malformed { header: X_FORWARDED_FOR })); break 'walk; }
                        }
                    }
                }
                match (verdict, hop) {
                    (Some(v), _) => v,
                    (None, Some(a)) => Ok(a),
                    (None, None) => Err(ClientIpError::MissingHeader { header: X_FORWARDED_FOR }),
                }
            };
            proptest::prop_assert_eq!(got, expected);
        }

        /// Any bytes in either header: an answer or an error, never a panic.
        #[test]
        fn arbitrary_headers_never_panic(
            lines in proptest::collection::vec(proptest::collection::vec(proptest::num::u8::ANY, 0..40), 0..3),
        ) {
            let trusted = TrustedProxies::parse("10.0.0.0/8, ::/0").unwrap();
            for header in [ForwardedHeader::XForwardedFor, ForwardedHeader::Forwarded] {
                let mut headers = HeaderMap::new();
                for line in &lines {
                    if let Ok(value) = http::HeaderValue::from_bytes(line) {
                        headers.append(header.name(), value);
                    }
                }
                let trusted = trusted.clone().with_header(header);
                if let Ok(found) = client_ip(ip("10.0.0.1"), &headers, &trusted) {
                    let _ = mask(found, 24, 64);
                }
            }
        }
    }
}
