//! Which proxies are trusted to say who the client is, and which header they write.

use std::fmt;
use std::net::IpAddr;

use http::header::{HeaderName, FORWARDED};
use ipnet::IpNet;

/// `X-Forwarded-For` (not in `http::header`).
pub const X_FORWARDED_FOR: HeaderName = HeaderName::from_static("x-forwarded-for");

/// Which forwarding header the trusted proxies write.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum ForwardedHeader {
    /// `X-Forwarded-For: client, proxy1, proxy2` (nginx, HAProxy, most load balancers).
    #[default]
    XForwardedFor,
    /// `Forwarded: for=client, for=proxy1` (RFC 7239), the `for` parameter of each element.
    Forwarded,
}

impl ForwardedHeader {
    /// The header's name.
    pub fn name(self) -> HeaderName {
        match self {
            ForwardedHeader::XForwardedFor => X_FORWARDED_FOR,
            ForwardedHeader::Forwarded => FORWARDED,
        }
    }
}

/// The proxies whose forwarding headers are believed, and which header they write.
///
/// Empty by default: then the client is always the peer.
///
/// ```
/// use kova_tower::client_ip::{ForwardedHeader, TrustedProxies};
/// let trusted = TrustedProxies::parse("10.0.0.0/8, 192.168.1.10, fd00::/8")?
///     .with_header(ForwardedHeader::Forwarded);
/// assert!(trusted.contains("10.1.2.3".parse()?));
/// assert!(trusted.contains("::ffff:10.1.2.3".parse()?));
/// assert!(!trusted.contains("192.168.1.11".parse()?));
/// assert!(TrustedProxies::parse("10.0.0.0/33").is_err());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TrustedProxies {
    nets: Vec<IpNet>,
    header: ForwardedHeader,
}

/// A trusted-proxy list that did not parse.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TrustedProxiesError {
    entry: String,
}

impl fmt::Display for TrustedProxiesError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "trusted proxy {:?} is neither an IP address nor a network like 10.0.0.0/8", self.entry)
    }
}

impl std::error::Error for TrustedProxiesError {}

impl TrustedProxies {
    /// No trusted proxy: forwarding headers are never read.
    pub fn none() -> Self {
        Self::default()
    }

    /// These networks, writing `X-Forwarded-For`.
    pub fn new(nets: impl IntoIterator<Item = IpNet>) -> Self {
        let nets = nets.into_iter().map(|net| canonical_net(net).trunc()).collect();
        TrustedProxies { nets, header: ForwardedHeader::XForwardedFor }
    }

    /// Parses a comma- or whitespace-separated list of addresses and networks
    /// (`"10.0.0.0/8, 127.0.0.1, fd00::/8"`).
    pub fn parse(list: &str) -> Result<Self, TrustedProxiesError> {
        let mut nets = Vec::new();
        for entry in list.split(|c: char| c == ',' || c.is_whitespace()).filter(|e| !e.is_empty()) {
            let net = entry
                .parse::<IpNet>()
                .or_else(|_| entry.parse::<IpAddr>().map(IpNet::from))
                .map_err(|_| TrustedProxiesError { entry: entry.to_owned() })?;
            nets.push(net);
        }
        Ok(Self::new(nets))
    }

    /// The same proxies, writing `header` instead.
    pub fn with_header(self, header: ForwardedHeader) -> Self {
        TrustedProxies { header, ..self }
    }

    /// The header the proxies write.
    pub fn header(&self) -> ForwardedHeader {
        self.header
    }

    /// Whether no proxy is trusted.
    pub fn is_empty(&self) -> bool {
        self.nets.is_empty()
    }

    /// Whether `ip` is a trusted proxy (IPv4-mapped IPv6 addresses count as IPv4).
    pub fn contains(&self, ip: IpAddr) -> bool {
        let ip = ip.to_canonical();
        self.nets.iter().any(|net| net.contains(&ip))
    }
}

fn canonical_net(net: IpNet) -> IpNet {
    match net {
        IpNet::V6(v6) if v6.prefix_len() >= 96 => match v6.addr().to_ipv4_mapped() {
            Some(v4) => IpNet::new(IpAddr::V4(v4), v6.prefix_len() - 96).unwrap_or(net),
            None => net,
        },
        _ => net,
    }
}
