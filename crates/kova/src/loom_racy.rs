//! Deliberately racy variants for the loom models (owned by the loom-tests work).
