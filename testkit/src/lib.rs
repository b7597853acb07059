//! What the tests of kpccl share, in one place instead of a copy per test
//! (or a source file included by path): out-of-band doubles ([`FailingOob`], [`Solo`], [`Tampering`]),
//! scratch directories removed on drop ([`ScratchDir`]), a window's sync
//! area on the heap for fences between threads ([`heap`], [`ThreadEnv`]) or
//! polled by one thread ([`ManualEnv`]), a resource limit lowered for a
//! test ([`LoweredLimit`]), forked children ([`in_forked_child`]), the
//! in-process platform with a hook on the segments it maps ([`Hooked`]), and, with feature
//! `acl`, the conformance suite of the ACL IPC calls (module `acl`).
//!
//! The in-process platform whose ranks are threads is not here: it is
//! `kpccl_core::threads` (feature `threads`), the reference for embedders.
#![deny(unsafe_code)]
// Test support: std throughout (the `*_instead_of_core` lints guard the no_std core).
#![allow(clippy::std_instead_of_core, clippy::alloc_instead_of_core)]

#[cfg(feature = "acl")]
#[allow(unsafe_code)] // device copies through the calls under test; forked processes and pipes
pub mod acl;
mod dir;
pub mod heap;
#[cfg(not(loom))]
mod hooked;
mod manual_env;
mod oob;
mod process;
#[cfg(not(loom))]
mod thread_env;

pub use dir::{ScratchDir, entries};
#[cfg(not(loom))]
pub use hooked::{Hooked, Mapped};
pub use manual_env::ManualEnv;
pub use oob::{FailingOob, INJECTED, Solo, Tampering, When};
pub use process::{LoweredLimit, in_forked_child, lowest_free_descriptor, wait_or_kill};
/// The limits a [`LoweredLimit`] lowers.
pub use rustix::process::Resource;
#[cfg(not(loom))]
pub use thread_env::ThreadEnv;
