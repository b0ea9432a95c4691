//! How an algorithm's state is stored: the cell types of the algorithms, and the sealed
//! [`CellStorage`] that tells a keyed table whether a cell sits inline in the key's word or
//! boxed behind it. Needed only to name a cell type, or to write an [`Algorithm`](crate::Algorithm)
//! of your own; checking a limit never names them.

pub use crate::algorithm::{AnyCell, BoxedCell, CellStorage, InlineWord, LogCell};
