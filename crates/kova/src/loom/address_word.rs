//! An atomic 64-bit word that holds either plain bits (a state, a marker) or the address of a
//! heap allocation, keeping that address's provenance: a keyed table's line word, which is an
//! inline cell's state for a word algorithm and a boxed cell's address otherwise
//! (`keyed/line/cell.rs`).
//!
//! On 64-bit targets outside loom the word is an `AtomicPtr<u8>`: an address stored into it is
//! a pointer, so what a later load hands back still carries the allocation's provenance (strict
//! provenance: no integer is ever turned back into a pointer, and Miri checks every access
//! through it). Plain bits are stored as pointers without provenance. Under loom, whose atomics
//! have no pointer of 64 bits beside `AtomicU64`, and on targets whose pointers are narrower,
//! the word is an `AtomicU64` and an address is exposed on the way in and taken back on the way
//! out (`expose_provenance` / `with_exposed_provenance`).

pub(crate) use imp::{AddressWord, AtomicAddressWord};

#[cfg(all(not(kova_loom), target_pointer_width = "64"))]
mod imp {
    use std::ptr;

    use super::super::atomic::{AtomicPtr, AtomicU64, Ordering};

    // `as_u64` views the word as an `AtomicU64`: the two must have one size and alignment.
    const _: () = assert!(
        std::mem::size_of::<AtomicPtr<u8>>() == std::mem::size_of::<AtomicU64>()
            && std::mem::align_of::<AtomicPtr<u8>>() == std::mem::align_of::<AtomicU64>()
    );

    /// What an [`AtomicAddressWord`] held: its bits and, for an address, its provenance.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub(crate) struct AddressWord(*mut u8);

    impl AddressWord {
        /// Plain bits: no address.
        #[inline(always)]
        pub(crate) fn from_bits(bits: u64) -> Self {
            AddressWord(ptr::without_provenance_mut(bits as usize))
        }

        /// The address of `pointer`'s allocation, with its provenance.
        #[inline(always)]
        pub(crate) fn from_ptr<T>(pointer: *mut T) -> Self {
            AddressWord(pointer.cast())
        }

        /// The word's bits (an address as its integer).
        #[inline(always)]
        pub(crate) fn bits(self) -> u64 {
            self.0.addr() as u64
        }

        /// The address as a pointer, with the provenance it was stored with.
        #[inline(always)]
        pub(crate) fn as_ptr<T>(self) -> *mut T {
            self.0.cast()
        }
    }

    /// The atomic word (module docs).
    #[derive(Debug)]
    #[repr(transparent)]
    pub(crate) struct AtomicAddressWord(AtomicPtr<u8>);

    impl AtomicAddressWord {
        pub(crate) fn new(bits: u64) -> Self {
            AtomicAddressWord(AtomicPtr::new(AddressWord::from_bits(bits).0))
        }

        /// The bits the word holds.
        #[inline(always)]
        pub(crate) fn load(&self, order: Ordering) -> u64 {
            self.load_word(order).bits()
        }

        /// What the word holds, an address with its provenance.
        #[inline(always)]
        pub(crate) fn load_word(&self, order: Ordering) -> AddressWord {
            AddressWord(self.0.load(order))
        }

        /// Stores plain bits.
        #[inline(always)]
        pub(crate) fn store(&self, bits: u64, order: Ordering) {
            self.store_word(AddressWord::from_bits(bits), order);
        }

        /// Stores `word`, an address keeping its provenance.
        #[inline(always)]
        pub(crate) fn store_word(&self, word: AddressWord, order: Ordering) {
            self.0.store(word.0, order);
        }

        /// Stores plain bits, handing back what the word held.
        #[inline(always)]
        pub(crate) fn swap(&self, bits: u64, order: Ordering) -> AddressWord {
            AddressWord(self.0.swap(AddressWord::from_bits(bits).0, order))
        }

        /// The word as an `AtomicU64`, for a state kept in the word itself (an inline cell).
        #[inline(always)]
        pub(crate) fn as_u64(&self) -> &AtomicU64 {
            // SAFETY: the pointer is to this live, aligned word (same size and alignment as an
            // `AtomicU64`, asserted above) and borrowed for no longer than `&self`. Every access
            // to the word is atomic and of 8 bytes, through either type, which the memory model
            // allows to mix; an integer load of an address only drops its provenance.
            unsafe { AtomicU64::from_ptr(self.0.as_ptr().cast()) }
        }
    }
}

#[cfg(not(all(not(kova_loom), target_pointer_width = "64")))]
mod imp {
    use super::super::atomic::{AtomicU64, Ordering};

    /// What an [`AtomicAddressWord`] held: its bits (an address exposed).
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub(crate) struct AddressWord(u64);

    impl AddressWord {
        /// Plain bits: no address.
        #[inline(always)]
        pub(crate) fn from_bits(bits: u64) -> Self {
            AddressWord(bits)
        }

        /// The address of `pointer`'s allocation, its provenance exposed.
        #[inline(always)]
        pub(crate) fn from_ptr<T>(pointer: *mut T) -> Self {
            AddressWord(pointer.expose_provenance() as u64)
        }

        /// The word's bits.
        #[inline(always)]
        pub(crate) fn bits(self) -> u64 {
            self.0
        }

        /// The address as a pointer, with the provenance [`from_ptr`](Self::from_ptr) exposed.
        #[inline(always)]
        pub(crate) fn as_ptr<T>(self) -> *mut T {
            std::ptr::with_exposed_provenance_mut(self.0 as usize)
        }
    }

    /// The atomic word (module docs).
    #[derive(Debug)]
    pub(crate) struct AtomicAddressWord(AtomicU64);

    impl AtomicAddressWord {
        pub(crate) fn new(bits: u64) -> Self {
            AtomicAddressWord(AtomicU64::new(bits))
        }

        /// The bits the word holds.
        #[inline(always)]
        pub(crate) fn load(&self, order: Ordering) -> u64 {
            self.0.load(order)
        }

        /// What the word holds.
        #[inline(always)]
        pub(crate) fn load_word(&self, order: Ordering) -> AddressWord {
            AddressWord(self.0.load(order))
        }

        /// Stores plain bits.
        #[inline(always)]
        pub(crate) fn store(&self, bits: u64, order: Ordering) {
            self.0.store(bits, order);
        }

        /// Stores `word`.
        #[inline(always)]
        pub(crate) fn store_word(&self, word: AddressWord, order: Ordering) {
            self.0.store(word.0, order);
        }

        /// Stores plain bits, handing back what the word held.
        #[inline(always)]
        pub(crate) fn swap(&self, bits: u64, order: Ordering) -> AddressWord {
            AddressWord(self.0.swap(bits, order))
        }

        /// The word as an `AtomicU64`, for a state kept in the word itself (an inline cell).
        #[inline(always)]
        pub(crate) fn as_u64(&self) -> &AtomicU64 {
            &self.0
        }

        /// Loom's record of a write to the word (a freed array's lines, `line/array.rs`).
        #[cfg(kova_loom)]
        pub(crate) fn with_mut(&mut self) {
            self.0.with_mut(|_| ());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::loom::atomic::Ordering;

    /// Bits round-trip; an address stored as a word is reached again through a later load, and
    /// the word's `AtomicU64` view reads the same bits.
    #[test]
    fn bits_and_addresses_round_trip() {
        let word = AtomicAddressWord::new(7);
        assert_eq!(word.load(Ordering::Relaxed), 7);
        assert_eq!(word.as_u64().load(Ordering::Relaxed), 7);
        word.as_u64().store(u64::MAX, Ordering::Relaxed);
        assert_eq!(word.load(Ordering::Relaxed), u64::MAX);
        let boxed = Box::into_raw(Box::new(41_u32));
        word.store_word(AddressWord::from_ptr(boxed), Ordering::Relaxed);
        assert_eq!(word.load(Ordering::Relaxed), boxed.addr() as u64);
        let back = word.swap(3, Ordering::Relaxed).as_ptr::<u32>();
        // SAFETY: the box made above, reached through the address the word kept; freed once.
        unsafe {
            *back += 1;
            assert_eq!(*Box::from_raw(back), 42);
        }
        assert_eq!(word.load_word(Ordering::Relaxed), AddressWord::from_bits(3));
    }
}
