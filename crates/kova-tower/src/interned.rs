//! Header values that every response of a layer carries unchanged (`RateLimit-Policy`), kept as
//! `'static` text so that cloning one per response writes nothing shared.
//!
//! A `HeaderValue` built at run time holds a reference-counted `Bytes`: each clone and each drop
//! is an atomic write to one counter, so every worker thread of a server would write the same
//! cache line on every response, and the threads would queue for it. A value over `'static`
//! bytes is cloned by copying a pointer. The texts are leaked, once each: a process holds at
//! most [`MAX_TEXTS`] of them, and past that a value keeps its counted bytes.

use std::collections::BTreeSet;
use std::sync::{Mutex, PoisonError};

use bytes::Bytes;
use http::HeaderValue;

/// The most distinct texts a process leaks (a layer is built once at start-up, or on each
/// configuration reload: a few texts per layer).
pub(crate) const MAX_TEXTS: usize = 4096;

/// The texts leaked so far.
static TEXTS: Mutex<BTreeSet<&'static [u8]>> = Mutex::new(BTreeSet::new());

/// `value` over `'static` bytes (the same text), or `value` itself once [`MAX_TEXTS`] texts are
/// held.
pub(crate) fn interned(value: HeaderValue) -> HeaderValue {
    // A panic while the set was locked left it whole (an insert either happened or not).
    let mut texts = TEXTS.lock().unwrap_or_else(PoisonError::into_inner);
    intern_in(&mut texts, value, MAX_TEXTS)
}

/// [`interned`] over the set `texts`, holding at most `max` texts.
fn intern_in(texts: &mut BTreeSet<&'static [u8]>, value: HeaderValue, max: usize) -> HeaderValue {
    let text = match texts.get(value.as_bytes()) {
        Some(&text) => text,
        None if texts.len() < max => {
            let text: &'static [u8] = Box::leak(value.as_bytes().into());
            texts.insert(text);
            text
        }
        None => return value,
    };
    // The bytes are `value`'s, so valid header text: the fallback is never taken.
    HeaderValue::from_maybe_shared(Bytes::from_static(text)).unwrap_or(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_texts_share_one_static_copy_up_to_the_bound() {
        let mut texts = BTreeSet::new();
        let policy = |text: &str| HeaderValue::from_str(text).unwrap();
        let first = intern_in(&mut texts, policy("\"ip\";q=100;w=60"), 2);
        let again = intern_in(&mut texts, policy("\"ip\";q=100;w=60"), 2);
        assert_eq!(first, "\"ip\";q=100;w=60");
        assert_eq!(first.as_bytes().as_ptr(), again.as_bytes().as_ptr(), "one copy per text");
        let other = intern_in(&mut texts, policy("\"key\";q=5;w=1"), 2);
        assert_eq!(other, "\"key\";q=5;w=1");
        assert_eq!(texts.len(), 2);
        // Past the bound a value keeps its own bytes, and nothing more is leaked.
        let past = policy("\"user\";q=9;w=3600");
        let past_bytes = past.as_bytes().as_ptr();
        let kept = intern_in(&mut texts, past, 2);
        assert_eq!(kept, "\"user\";q=9;w=3600");
        assert_eq!(kept.as_bytes().as_ptr(), past_bytes);
        assert_eq!(texts.len(), 2);
    }

    #[test]
    fn an_interned_value_is_static_bytes() {
        let value = interned(HeaderValue::from_static("\"ip\";q=1;w=1"));
        assert_eq!(value, "\"ip\";q=1;w=1");
        let twice = interned(HeaderValue::from_str("\"ip\";q=1;w=1").unwrap());
        assert_eq!(value.as_bytes().as_ptr(), twice.as_bytes().as_ptr());
    }
}
