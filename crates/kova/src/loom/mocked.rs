//! loom's types, under `--cfg kova_loom`. Loom's mutex, because a std mutex held across a loom
//! switch point would block loom's single OS thread; its `UnsafeCell`, whose accesses loom
//! tracks (a slot reused while a check still reads it is a causality violation).

pub(crate) use ::loom::cell::UnsafeCell;
pub(crate) use ::loom::sync::{atomic, Arc, Mutex, MutexGuard};
pub(crate) use ::loom::thread_local;
