//! Writing the report into a README between two markers, never by hand.

use std::fmt;

/// The line that opens the generated section.
pub const START_MARKER: &str = "<!-- kova-bench:start -->";
/// The line that closes it.
pub const END_MARKER: &str = "<!-- kova-bench:end -->";

/// Why the README could not be updated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MarkerError {
    /// The start marker is missing.
    MissingStart,
    /// The end marker is missing after the start marker.
    MissingEnd,
    /// A marker appears more than once: which part to replace would be a guess.
    Duplicate(&'static str),
}

impl fmt::Display for MarkerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MarkerError::MissingStart => write!(f, "the README has no `{START_MARKER}` marker"),
            MarkerError::MissingEnd => {
                write!(f, "the README has no `{END_MARKER}` marker after `{START_MARKER}`")
            }
            MarkerError::Duplicate(m) => write!(f, "the README has more than one `{m}` marker"),
        }
    }
}

impl std::error::Error for MarkerError {}

/// Replaces what lies between the markers with `body` (the markers stay, each on its own line).
///
/// ```
/// use kova_bench::readme::replace_between_markers;
/// let readme = "# kova\n<!-- kova-bench:start -->\nold\n<!-- kova-bench:end -->\nrest\n";
/// let new = replace_between_markers(readme, "new table")?;
/// assert_eq!(new, "# kova\n<!-- kova-bench:start -->\nnew table\n<!-- kova-bench:end -->\nrest\n");
/// # Ok::<(), kova_bench::readme::MarkerError>(())
/// ```
pub fn replace_between_markers(text: &str, body: &str) -> Result<String, MarkerError> {
    let start = text.find(START_MARKER).ok_or(MarkerError::MissingStart)?;
    if text[start + START_MARKER.len()..].contains(START_MARKER) {
        return Err(MarkerError::Duplicate(START_MARKER));
    }
    let after_start = start + START_MARKER.len();
    let end = text[after_start..].find(END_MARKER).map(|i| i + after_start).ok_or(MarkerError::MissingEnd)?;
    if text[end + END_MARKER.len()..].contains(END_MARKER) || text[..start].contains(END_MARKER) {
        return Err(MarkerError::Duplicate(END_MARKER));
    }
    let body = body.trim_matches('\n');
    let mut out = String::with_capacity(text.len() + body.len());
    out.push_str(&text[..after_start]);
    out.push('\n');
    if !body.is_empty() {
        out.push_str(body);
        out.push('\n');
    }
    out.push_str(&text[end..]);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replaces_and_is_idempotent() {
        let readme = "intro\n\n<!-- kova-bench:start -->\n| old | table |\n\nmore old\n<!-- kova-bench:end -->\n\n## Next\n";
        let once =
            replace_between_markers(readme, "\n| new |\n\n![chart](docs/bench/throughput.svg)\n").unwrap();
        assert_eq!(
            once,
            "intro\n\n<!-- kova-bench:start -->\n| new |\n\n![chart](docs/bench/throughput.svg)\n<!-- kova-bench:end -->\n\n## Next\n"
        );
        let twice = replace_between_markers(&once, "| new |\n\n![chart](docs/bench/throughput.svg)").unwrap();
        assert_eq!(once, twice);
    }

    #[test]
    fn adjacent_markers_and_empty_body() {
        let readme = "a <!-- kova-bench:start --><!-- kova-bench:end --> b";
        assert_eq!(
            replace_between_markers(readme, "x").unwrap(),
            "a <!-- kova-bench:start -->\nx\n<!-- kova-bench:end --> b"
        );
        assert_eq!(
            replace_between_markers(readme, "").unwrap(),
            "a <!-- kova-bench:start -->\n<!-- kova-bench:end --> b"
        );
    }

    #[test]
    fn marker_errors() {
        assert_eq!(replace_between_markers("no markers", "x"), Err(MarkerError::MissingStart));
        assert_eq!(
            replace_between_markers("<!-- kova-bench:start --> only", "x"),
            Err(MarkerError::MissingEnd)
        );
        // End before start is not a section.
        assert_eq!(
            replace_between_markers("<!-- kova-bench:end --> <!-- kova-bench:start -->", "x"),
            Err(MarkerError::MissingEnd)
        );
        let doubled = "<!-- kova-bench:start -->a<!-- kova-bench:end --><!-- kova-bench:start -->b<!-- kova-bench:end -->";
        assert_eq!(replace_between_markers(doubled, "x"), Err(MarkerError::Duplicate(START_MARKER)));
    }
}
