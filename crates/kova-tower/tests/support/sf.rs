//! The rate-limit fields as an independent RFC 9651 parser (the `sfv` crate) reads them, so that
//! tests check what a client sees, not the text the layer meant to write.

use sfv::{BareItem, ListEntry, Parser};

/// A parameter value.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Int(i64),
    Str(String),
    Bytes(Vec<u8>),
    Token(String),
    Other(String),
}

/// One list member: a policy name (a String item, as draft-11 requires) and its parameters in
/// order.
#[derive(Debug, Clone, PartialEq)]
pub struct Member {
    pub name: String,
    pub params: Vec<(String, Value)>,
}

impl Member {
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.params.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    /// An Integer parameter; panics (fails the test) if it is present with another type.
    pub fn int(&self, key: &str) -> Option<i64> {
        self.get(key).map(|v| match v {
            Value::Int(n) => *n,
            other => panic!("{key} of {:?} is not an Integer: {other:?}", self.name),
        })
    }

    pub fn bytes(&self, key: &str) -> Option<&[u8]> {
        self.get(key).map(|v| match v {
            Value::Bytes(b) => b.as_slice(),
            other => panic!("{key} of {:?} is not a Byte Sequence: {other:?}", self.name),
        })
    }

    pub fn string(&self, key: &str) -> Option<&str> {
        self.get(key).map(|v| match v {
            Value::Str(s) => s.as_str(),
            other => panic!("{key} of {:?} is not a String: {other:?}", self.name),
        })
    }
}

fn value(item: &BareItem) -> Value {
    match item {
        BareItem::Integer(n) => Value::Int(i64::from(*n)),
        BareItem::String(s) => Value::Str(s.as_str().to_owned()),
        BareItem::ByteSequence(b) => Value::Bytes(b.clone()),
        BareItem::Token(t) => Value::Token(t.as_str().to_owned()),
        other => Value::Other(format!("{other:?}")),
    }
}

/// Parses the field lines of one list field (combined with ", " as RFC 9651 section 4.2 says);
/// panics (fails the test) on anything that is not a list of String items.
pub fn parse_list(lines: &[&str]) -> Vec<Member> {
    let combined = lines.join(", ");
    let list: sfv::List = Parser::new(&combined)
        .parse()
        .unwrap_or_else(|e| panic!("{combined:?} is not an RFC 9651 list: {e}"));
    list.into_iter()
        .map(|entry| match entry {
            ListEntry::Item(item) => {
                let name = match &item.bare_item {
                    BareItem::String(s) => s.as_str().to_owned(),
                    other => panic!("a policy name must be a String, got {other:?} in {combined:?}"),
                };
                let params = item.params.iter().map(|(k, v)| (k.as_str().to_owned(), value(v))).collect();
                Member { name, params }
            }
            ListEntry::InnerList(inner) => panic!("an inner list in {combined:?}: {inner:?}"),
        })
        .collect()
}

/// Parses a field that holds one Integer (`Retry-After`'s delay-seconds has that syntax).
pub fn parse_integer(line: &str) -> i64 {
    let item: sfv::Item = Parser::new(line).parse().unwrap_or_else(|e| panic!("{line:?}: {e}"));
    assert!(item.params.is_empty(), "{line:?} has parameters");
    match item.bare_item {
        BareItem::Integer(n) => i64::from(n),
        other => panic!("{line:?} is not an Integer: {other:?}"),
    }
}
