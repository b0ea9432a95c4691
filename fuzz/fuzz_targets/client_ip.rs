//! Target 5, client IP and forwarding headers (crates/kova-tower/src/client_ip.rs): arbitrary
//! peers, trusted-proxy lists and `X-Forwarded-For` / `Forwarded` header lines.
//!
//! - The entry and element parsers never panic; an address they accept round-trips through its
//!   text form.
//! - `client_ip` never panics and agrees with a model of the rule, written independently: an
//!   untrusted peer is the client; else walk the header's entries from the right while the hop is
//!   trusted; the first untrusted hop is the client, the leftmost if all are trusted; an
//!   unparsable entry reached on that walk, an `unknown` node, or no entry at all is an error.
//! - `mask` never panics, and its network contains the address.
//!
//! Catches: a client able to choose its own key (taking an entry left of an untrusted hop, or
//! the leftmost entry on its own word), a malformed entry on the client's side spoiling what
//! the proxies appended, panics on odd bytes, ports, brackets, quotes or zones.
#![no_main]

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use arbitrary::Arbitrary;
use http::{HeaderMap, HeaderValue};
use ipnet::IpNet;
use kova_tower::client_ip::{
    client_ip, mask, parse_forwarded_element, parse_x_forwarded_for_entry, ForwardedHeader, Node,
    TrustedProxies,
};
use libfuzzer_sys::fuzz_target;

#[derive(Debug, Arbitrary)]
enum Addr {
    V4([u8; 4]),
    V6([u16; 8]),
    /// An IPv4-mapped IPv6 address.
    Mapped([u8; 4]),
}

impl Addr {
    fn ip(&self) -> IpAddr {
        match *self {
            Addr::V4(o) => IpAddr::V4(Ipv4Addr::from(o)),
            Addr::V6(s) => IpAddr::V6(Ipv6Addr::from(s)),
            Addr::Mapped(o) => IpAddr::V6(Ipv4Addr::from(o).to_ipv6_mapped()),
        }
    }
}

#[derive(Debug, Arbitrary)]
enum Entry {
    /// A well-formed address, written in one of the accepted forms.
    Addr(Addr, u8, u16),
    /// Anything.
    Raw(String),
}

#[derive(Debug, Arbitrary)]
struct Input {
    peer: Addr,
    trusted: Vec<(Addr, u8)>,
    forwarded: bool,
    /// Header lines, each a list of entries.
    lines: Vec<Vec<Entry>>,
    raw_line: Vec<u8>,
    v4_prefix: u8,
    v6_prefix: u8,
}

fn write_entry(entry: &Entry, forwarded: bool) -> String {
    match entry {
        Entry::Raw(text) => text.clone(),
        Entry::Addr(addr, form, port) => {
            let ip = addr.ip();
            let text = match (form % 3, ip) {
                (0, _) => ip.to_string(),
                (1, IpAddr::V4(v4)) => format!("{v4}:{port}"),
                (1, IpAddr::V6(v6)) => format!("[{v6}]:{port}"),
                (_, IpAddr::V4(v4)) => format!(" {v4} "),
                (_, IpAddr::V6(v6)) => format!("[{v6}]"),
            };
            if forwarded {
                format!("for=\"{text}\";proto=https")
            } else {
                text
            }
        }
    }
}

/// The rule, independently: what `client_ip` must answer (`None`: an error).
fn model(peer: IpAddr, lines: &[String], trusted: &[IpNet], forwarded: bool) -> Option<IpAddr> {
    let is_trusted = |ip: IpAddr| trusted.iter().any(|net| net.contains(&ip));
    let mut hop = peer.to_canonical();
    if !is_trusted(hop) {
        return Some(hop);
    }
    let mut seen = false;
    for line in lines.iter().rev() {
        for element in line.split(',').rev() {
            if element.trim().is_empty() {
                continue;
            }
            seen = true;
            let ip = if forwarded {
                match parse_forwarded_element(element) {
                    Ok(Some(Node::Ip(ip))) => ip,
                    _ => return None,
                }
            } else {
                parse_x_forwarded_for_entry(element).ok()?
            };
            hop = ip.to_canonical();
            if !is_trusted(hop) {
                return Some(hop);
            }
        }
    }
    seen.then_some(hop)
}

fuzz_target!(|input: Input| {
    // The parsers alone, on raw text.
    if let Ok(text) = std::str::from_utf8(&input.raw_line) {
        if let Ok(ip) = parse_x_forwarded_for_entry(text) {
            assert_eq!(parse_x_forwarded_for_entry(&ip.to_string()), Ok(ip));
        }
        if let Ok(Some(Node::Ip(ip))) = parse_forwarded_element(text) {
            let written = if ip.is_ipv6() { format!("for=\"[{ip}]\"") } else { format!("for={ip}") };
            assert_eq!(parse_forwarded_element(&written), Ok(Some(Node::Ip(ip))));
        }
    }

    let peer = input.peer.ip();
    let net = mask(peer, input.v4_prefix, input.v6_prefix);
    assert!(net.contains(&peer.to_canonical()), "{net} does not contain {peer}");

    let nets: Vec<IpNet> = input
        .trusted
        .iter()
        .take(8)
        .filter_map(|(addr, prefix)| {
            let ip = addr.ip().to_canonical();
            let max = if ip.is_ipv4() { 32 } else { 128 };
            IpNet::new(ip, prefix % (max + 1)).ok()
        })
        .collect();
    let header = if input.forwarded { ForwardedHeader::Forwarded } else { ForwardedHeader::XForwardedFor };
    let trusted = TrustedProxies::new(nets.clone()).with_header(header);

    let mut headers = HeaderMap::new();
    let mut lines = Vec::new();
    for entries in input.lines.iter().take(4) {
        let line: Vec<String> = entries.iter().take(8).map(|e| write_entry(e, input.forwarded)).collect();
        let line = line.join(",");
        // Header values are visible ASCII and spaces; skip lines `http` refuses.
        let Ok(value) = HeaderValue::from_str(&line) else { continue };
        headers.append(header.name(), value);
        lines.push(line);
    }
    let got = client_ip(peer, &headers, &trusted);
    let expected = model(peer, &lines, &nets, input.forwarded);
    assert_eq!(
        got.as_ref().ok().copied(),
        expected,
        "peer {peer}, trusted {nets:?}, {header:?}: {lines:?} -> {got:?}"
    );
});
