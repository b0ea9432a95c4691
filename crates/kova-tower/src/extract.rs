//! Key extraction: from a request to the [`LimitKey`] it is counted against.

use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use http::header::HeaderName;
use http::request::Parts;
use http::StatusCode;

use crate::client_ip::{self, ClientIpError, TrustedProxies};
use crate::LimitKey;

/// The longest API key (in bytes) accepted as a key.
pub const MAX_HEADER_KEY_LEN: usize = 256;

/// Finds the key a request is counted against.
///
/// Implemented for closures `Fn(&Parts) -> Result<LimitKey, KeyError>`; the built-in extractors
/// are made by [`Key`]'s constructors.
pub trait KeyExtractor: Send + Sync + 'static {
    /// The request's key, or why there is none.
    fn extract(&self, parts: &Parts) -> Result<LimitKey, KeyError>;
}

impl<F> KeyExtractor for F
where
    F: Fn(&Parts) -> Result<LimitKey, KeyError> + Send + Sync + 'static,
{
    fn extract(&self, parts: &Parts) -> Result<LimitKey, KeyError> {
        self(parts)
    }
}

/// Why no key was found for a request.
///
/// With [`MissingKeyPolicy::Reject`](crate::MissingKeyPolicy::Reject) (the default) the request is
/// answered with [`status`](Self::status) and a problem+json body naming the cause; there is never
/// a shared "unknown" bucket unless the configuration asks for one with [`Key::or`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum KeyError {
    /// The request carries no peer address: the server was not started with connection info
    /// (axum: `into_make_service_with_connect_info::<SocketAddr>()`; otherwise insert a
    /// [`PeerAddr`] extension).
    NoPeerAddress,
    /// The client address could not be told from the forwarding headers.
    ClientIp(ClientIpError),
    /// A header the key is read from is absent.
    MissingHeader(HeaderName),
    /// A header the key is read from is empty, repeated, too long or not visible ASCII.
    MalformedHeader(HeaderName),
    /// A request extension the key is read from (for example the authenticated user) is absent.
    MissingExtension(&'static str),
    /// A custom extractor's reason.
    Other(Box<str>),
}

impl KeyError {
    /// The status of the error response: 500 when the server lacks what it needs (peer address,
    /// an extension another layer should have set), 400 when the request lacks it.
    pub fn status(&self) -> StatusCode {
        match self {
            KeyError::NoPeerAddress | KeyError::MissingExtension(_) => StatusCode::INTERNAL_SERVER_ERROR,
            _ => StatusCode::BAD_REQUEST,
        }
    }
}

impl fmt::Display for KeyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KeyError::NoPeerAddress => f.write_str("the server does not know the client's address"),
            KeyError::ClientIp(e) => fmt::Display::fmt(e, f),
            KeyError::MissingHeader(name) => write!(f, "the request has no {name} header"),
            KeyError::MalformedHeader(name) => {
                write!(f, "the {name} header must appear once, with 1 to {MAX_HEADER_KEY_LEN} visible ASCII characters")
            }
            KeyError::MissingExtension(what) => write!(f, "the request has no {what} extension"),
            KeyError::Other(reason) => f.write_str(reason),
        }
    }
}

impl std::error::Error for KeyError {}

impl From<ClientIpError> for KeyError {
    fn from(e: ClientIpError) -> Self {
        KeyError::ClientIp(e)
    }
}

/// The connection's remote address, as a request extension.
///
/// The IP keys read it first, then (with the `axum` feature) axum's `ConnectInfo<SocketAddr>`.
/// With plain hyper, insert it when serving each connection; tests can insert any address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PeerAddr(pub SocketAddr);

/// The peer IP of a request: a [`PeerAddr`] extension, else axum's `ConnectInfo<SocketAddr>`.
pub fn peer_ip(parts: &Parts) -> Option<IpAddr> {
    if let Some(PeerAddr(addr)) = parts.extensions.get::<PeerAddr>() {
        return Some(addr.ip());
    }
    #[cfg(feature = "axum")]
    if let Some(axum::extract::ConnectInfo(addr)) =
        parts.extensions.get::<axum::extract::ConnectInfo<SocketAddr>>()
    {
        return Some(addr.ip());
    }
    None
}

/// A key extractor, cheap to clone (shared).
///
/// ```
/// use kova_tower::client_ip::TrustedProxies;
/// use kova_tower::Key;
/// // Per user when authenticated, per client network otherwise.
/// #[derive(Clone)]
/// struct UserId(String);
/// impl std::fmt::Display for UserId {
///     fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result { f.write_str(&self.0) }
/// }
/// let key = Key::user::<UserId>().or(Key::client_ip(TrustedProxies::parse("10.0.0.0/8")?));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
pub struct Key(Arc<dyn KeyExtractor>);

impl fmt::Debug for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Key(..)")
    }
}

impl Key {
    /// Any extractor (a closure `Fn(&Parts) -> Result<LimitKey, KeyError>` or a type).
    pub fn from_extractor(extractor: impl KeyExtractor) -> Self {
        Key(Arc::new(extractor))
    }

    /// Any closure: `Key::from_fn(|parts| ...)`.
    pub fn from_fn<F>(f: F) -> Self
    where
        F: Fn(&Parts) -> Result<LimitKey, KeyError> + Send + Sync + 'static,
    {
        Key(Arc::new(f))
    }

    /// The peer address of the connection, IPv6 by /64 (see [`IpKey`]). Behind a proxy every
    /// client would share the proxy's bucket: use [`client_ip`](Self::client_ip) there.
    pub fn peer_ip() -> IpKey {
        IpKey::new(TrustedProxies::none())
    }

    /// The client address: the peer, or, when the peer is one of `trusted`, the rightmost
    /// forwarded address that is not (see [`client_ip`](crate::client_ip::client_ip)).
    pub fn client_ip(trusted: TrustedProxies) -> IpKey {
        IpKey::new(trusted)
    }

    /// The value of header `name` (an API key), as [`LimitKey::api_key`]. The header must appear
    /// once, with 1 to [`MAX_HEADER_KEY_LEN`] visible ASCII characters (spaces inside allowed).
    pub fn header(name: HeaderName) -> Self {
        Self::header_as("key", name)
    }

    /// The value of header `name` as a text key of kind `kind` (e.g. `"user"` for a username
    /// header on a login route), with the same rules as [`header`](Self::header).
    pub fn header_as(kind: &'static str, name: HeaderName) -> Self {
        Key::from_fn(move |parts: &Parts| {
            let mut values = parts.headers.get_all(&name).iter();
            let value = values.next().ok_or_else(|| KeyError::MissingHeader(name.clone()))?;
            let text = std::str::from_utf8(value.as_bytes()).map(str::trim).unwrap_or_default();
            let valid = values.next().is_none()
                && !text.is_empty()
                && text.len() <= MAX_HEADER_KEY_LEN
                && text.bytes().all(|b| b.is_ascii_graphic() || b == b' ');
            if !valid {
                return Err(KeyError::MalformedHeader(name.clone()));
            }
            Ok(LimitKey::text(kind, text))
        })
    }

    /// The authenticated user: a request extension of type `T` (set by the authentication layer
    /// that runs before this one), written with its `Display`, as [`LimitKey::user`].
    pub fn user<T: fmt::Display + Send + Sync + 'static>() -> Self {
        Key::from_fn(|parts: &Parts| match parts.extensions.get::<T>() {
            Some(user) => Ok(LimitKey::user(&user.to_string())),
            None => Err(KeyError::MissingExtension(std::any::type_name::<T>())),
        })
    }

    /// One key for every request: a global limit.
    pub fn global() -> Self {
        Key::from_fn(|_: &Parts| Ok(LimitKey::Global))
    }

    /// This key, or when it cannot be found, `fallback`'s (the error is `fallback`'s when both
    /// fail). "User when authenticated, else IP" is `Key::user::<U>().or(Key::client_ip(..))`.
    pub fn or(self, fallback: impl Into<Key>) -> Self {
        let fallback = fallback.into();
        Key::from_fn(move |parts: &Parts| self.extract(parts).or_else(|_| fallback.extract(parts)))
    }

    /// Both keys, counted together ([`LimitKey::Pair`]): IP + username on a login route. Fails
    /// when either fails.
    pub fn and(self, other: impl Into<Key>) -> Self {
        let other = other.into();
        Key::from_fn(move |parts: &Parts| Ok(LimitKey::pair(self.extract(parts)?, other.extract(parts)?)))
    }

    /// The request's key.
    pub fn extract(&self, parts: &Parts) -> Result<LimitKey, KeyError> {
        self.0.extract(parts)
    }
}

/// The client network as a key: the peer address or, through trusted proxies, the forwarded
/// client address; IPv4 by /32 and IPv6 by /64 unless configured, so that one host cannot rotate
/// through the addresses of its own /64.
///
/// ```
/// use kova_tower::Key;
/// let key = Key::peer_ip().ipv6_prefix(56).ipv4_prefix(24);
/// ```
#[derive(Debug, Clone)]
pub struct IpKey {
    trusted: TrustedProxies,
    v4_prefix: u8,
    v6_prefix: u8,
}

impl IpKey {
    fn new(trusted: TrustedProxies) -> Self {
        IpKey { trusted, v4_prefix: 32, v6_prefix: 64 }
    }

    /// Keys IPv6 clients by their first `len` bits (default 64; above 128 means 128).
    pub fn ipv6_prefix(self, len: u8) -> Self {
        IpKey { v6_prefix: len.min(128), ..self }
    }

    /// Keys IPv4 clients by their first `len` bits (default 32; above 32 means 32).
    pub fn ipv4_prefix(self, len: u8) -> Self {
        IpKey { v4_prefix: len.min(32), ..self }
    }

    /// This key, or `fallback`'s when it cannot be found (see [`Key::or`]).
    pub fn or(self, fallback: impl Into<Key>) -> Key {
        Key::from(self).or(fallback)
    }

    /// This key and `other`'s, counted together (see [`Key::and`]).
    pub fn and(self, other: impl Into<Key>) -> Key {
        Key::from(self).and(other)
    }
}

impl KeyExtractor for IpKey {
    fn extract(&self, parts: &Parts) -> Result<LimitKey, KeyError> {
        let peer = peer_ip(parts).ok_or(KeyError::NoPeerAddress)?;
        // With no proxy trusted the peer is the client: no header to look at.
        let client = if self.trusted.is_empty() {
            peer.to_canonical()
        } else {
            client_ip::client_ip(peer, &parts.headers, &self.trusted)?
        };
        Ok(LimitKey::Ip(client_ip::mask(client, self.v4_prefix, self.v6_prefix)))
    }
}

impl From<IpKey> for Key {
    fn from(key: IpKey) -> Self {
        Key::from_extractor(key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts(build: impl FnOnce(http::request::Builder) -> http::request::Builder) -> Parts {
        build(http::Request::builder()).body(()).unwrap().into_parts().0
    }

    #[test]
    fn header_keys_are_validated() {
        let key = Key::header(HeaderName::from_static("x-api-key"));
        let name = HeaderName::from_static("x-api-key");
        assert_eq!(key.extract(&parts(|b| b.header("x-api-key", " abc "))), Ok(LimitKey::api_key("abc")));
        assert_eq!(key.extract(&parts(|b| b)), Err(KeyError::MissingHeader(name.clone())));
        assert_eq!(
            key.extract(&parts(|b| b.header("x-api-key", ""))),
            Err(KeyError::MalformedHeader(name.clone()))
        );
        assert_eq!(
            key.extract(&parts(|b| b.header("x-api-key", "a").header("x-api-key", "b"))),
            Err(KeyError::MalformedHeader(name.clone()))
        );
        let long = "k".repeat(MAX_HEADER_KEY_LEN + 1);
        assert_eq!(
            key.extract(&parts(|b| b.header("x-api-key", long))),
            Err(KeyError::MalformedHeader(name.clone()))
        );
        let latin1 = http::HeaderValue::from_bytes(b"caf\xe9").unwrap();
        assert_eq!(
            key.extract(&parts(|b| b.header("x-api-key", latin1))),
            Err(KeyError::MalformedHeader(name))
        );
    }

    #[test]
    fn ip_keys_need_a_peer_and_mask_ipv6() {
        let key = Key::from(Key::peer_ip());
        assert_eq!(key.extract(&parts(|b| b)), Err(KeyError::NoPeerAddress));
        let peer = PeerAddr("[2001:db8:1:2:3:4:5:6]:443".parse().unwrap());
        assert_eq!(
            key.extract(&parts(|b| b.extension(peer))),
            Ok(LimitKey::Ip("2001:db8:1:2::/64".parse().unwrap()))
        );
        assert_eq!(KeyError::NoPeerAddress.status(), StatusCode::INTERNAL_SERVER_ERROR);
    }

    #[test]
    fn or_falls_back_and_and_pairs() {
        #[derive(Clone)]
        struct User(&'static str);
        impl fmt::Display for User {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.0)
            }
        }
        let peer = PeerAddr("192.0.2.1:1".parse().unwrap());
        let key = Key::user::<User>().or(Key::peer_ip());
        assert_eq!(
            key.extract(&parts(|b| b.extension(peer))),
            Ok(LimitKey::ip("192.0.2.1".parse().unwrap(), 32))
        );
        assert_eq!(
            key.extract(&parts(|b| b.extension(peer).extension(User("ann")))),
            Ok(LimitKey::user("ann"))
        );
        let login = Key::peer_ip().and(Key::header_as("user", HeaderName::from_static("x-username")));
        assert_eq!(
            login.extract(&parts(|b| b.extension(peer).header("x-username", "ann"))),
            Ok(LimitKey::pair(LimitKey::ip("192.0.2.1".parse().unwrap(), 32), LimitKey::user("ann")))
        );
        assert_eq!(
            login.extract(&parts(|b| b.extension(peer))),
            Err(KeyError::MissingHeader(HeaderName::from_static("x-username")))
        );
    }
}
