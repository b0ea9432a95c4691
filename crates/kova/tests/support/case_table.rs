//! A table of named test cases: each runs on its own, a panic is its case's failure, and the
//! table fails naming every case that failed (so a failure is never anonymous).

/// A named case.
pub type Case = (&'static str, fn());

/// Runs every case; fails naming each case that panicked or failed its assertion.
pub fn run(cases: &[Case]) {
    let failed: Vec<String> = cases
        .iter()
        .filter_map(|&(name, case)| {
            let payload = std::panic::catch_unwind(case).err()?;
            let why = payload
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            Some(format!("{name}: {why}"))
        })
        .collect();
    assert!(failed.is_empty(), "{} of {} cases failed:\n{}", failed.len(), cases.len(), failed.join("\n"));
}
