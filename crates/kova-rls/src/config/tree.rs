//! The descriptor tree of a domain and envoyproxy/ratelimit's matching rule over it.

use std::collections::HashMap;
use std::sync::Arc;

use super::Rule;

/// The nodes at one depth of the tree, by key.
#[derive(Debug, Default)]
pub(crate) struct Level {
    pub(crate) keys: HashMap<String, KeyNodes>,
}

/// The nodes of one key at one depth: by exact value, by value prefix (a value ending in `*`),
/// and the key's node without a value.
#[derive(Debug, Default)]
pub(crate) struct KeyNodes {
    pub(crate) exact: HashMap<String, Node>,
    pub(crate) prefixes: Vec<(String, Node)>,
    pub(crate) any: Option<Box<Node>>,
}

/// One descriptor node.
#[derive(Debug)]
pub(crate) struct Node {
    pub(crate) rule: Option<Arc<Rule>>,
    pub(crate) children: Level,
    pub(crate) line: u64,
}

impl Level {
    /// Every rule at or below this level, in no particular order.
    pub(crate) fn rules<'a>(&'a self, out: &mut Vec<&'a Arc<Rule>>) {
        for nodes in self.keys.values() {
            let named = nodes.exact.values().chain(nodes.prefixes.iter().map(|(_, node)| node));
            for node in named.chain(nodes.any.as_deref()) {
                out.extend(node.rule.as_ref());
                node.children.rules(out);
            }
        }
    }

    /// The node an entry leads to: the key with this exact value, else the first prefix (in the
    /// file's order) the value starts with, else the key without a value.
    fn lookup(&self, key: &str, value: &str) -> Option<&Node> {
        let nodes = self.keys.get(key)?;
        if let Some(node) = nodes.exact.get(value) {
            return Some(node);
        }
        if let Some((_, node)) = nodes.prefixes.iter().find(|(prefix, _)| value.starts_with(prefix.as_str()))
        {
            return Some(node);
        }
        nodes.any.as_deref()
    }

    /// envoyproxy/ratelimit's rule: the entries walk down the tree in order; the rule is the one
    /// of the node the last entry reaches. An entry that finds no node, or a node without
    /// children before the last entry, means no rule.
    pub(crate) fn find<'a, I>(&self, entries: I) -> Option<&Arc<Rule>>
    where
        I: IntoIterator<Item = (&'a str, &'a str)>,
        I::IntoIter: ExactSizeIterator,
    {
        let entries = entries.into_iter();
        let last = entries.len().checked_sub(1)?;
        let mut level = self;
        for (i, (key, value)) in entries.enumerate() {
            let node = level.lookup(key, value)?;
            if i == last {
                return node.rule.as_ref();
            }
            level = &node.children;
        }
        None
    }
}
