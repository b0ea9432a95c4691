//! kova's sketch ([`kova::sketch::Sketch`]) as a keyed subject: per-key GCRA in the same fixed
//! 64 KiB as pingora's `Rate` (its default memory), whatever the number of keys.

use kova::sketch::Sketch;
use kova::Quota;

use crate::subject::Subject;

/// The subject's name in the tables.
pub const SKETCH: &str = "kova_sketch";

/// A [`Sketch`] of the default memory and cells per key, on kova's coarse clock.
#[derive(Debug)]
pub struct KovaSketch(pub Sketch);

impl KovaSketch {
    /// A sketch limiting every key to `quota`.
    pub fn new(quota: Quota) -> Self {
        KovaSketch(Sketch::new(quota).expect("every scenario's quota fits GCRA"))
    }
}

impl Subject for KovaSketch {
    #[inline(always)]
    fn hit(&self, key: u64) -> bool {
        self.0.check(&key).is_allowed()
    }

    fn table_bytes(&self) -> Option<usize> {
        Some(self.0.memory_bytes())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_each_key_in_fixed_memory() {
        let sketch = KovaSketch::new(Quota::per_hour(2).unwrap());
        assert!(sketch.hit(1) && sketch.hit(1));
        assert!(!sketch.hit(1));
        assert_eq!(sketch.table_bytes(), Some(kova::sketch::DEFAULT_MEMORY_BYTES));
    }
}
