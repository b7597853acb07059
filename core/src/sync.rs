//! The only module that names atomics, fences and the spin hint.
//!
//! The types here wrap `core`'s atomics, or loom's under `cfg(loom)`, so the
//! fence and barrier algorithms are model-checked exactly as they are
//! compiled. `clippy.toml` forbids the `core` types and functions everywhere
//! else (the iceoryx2 discipline).
#![allow(clippy::disallowed_types, clippy::disallowed_methods)]

pub use core::sync::atomic::Ordering;

cfg_if::cfg_if! {
    if #[cfg(loom)] {
        use loom::sync::atomic as imp;
        use loom::hint as hint_imp;
    } else {
        use core::sync::atomic as imp;
        use core::hint as hint_imp;
    }
}

macro_rules! atomic {
    ($name:ident, $int:ty) => {
        #[doc = concat!("An atomic `", stringify!($int), "` (loom's under `cfg(loom)`).")]
        #[derive(Debug, Default)]
        #[repr(transparent)]
        pub struct $name(imp::$name);

        impl $name {
            /// A new atomic holding `v`.
            #[cfg(not(loom))]
            #[must_use]
            pub const fn new(v: $int) -> Self {
                Self(imp::$name::new(v))
            }

            /// A new atomic holding `v` (loom's constructor is not `const`).
            #[cfg(loom)]
            #[must_use]
            pub fn new(v: $int) -> Self {
                Self(imp::$name::new(v))
            }

            /// See the `core` method of the same name.
            #[inline]
            pub fn load(&self, order: Ordering) -> $int {
                self.0.load(order)
            }

            /// See the `core` method of the same name.
            #[inline]
            pub fn store(&self, v: $int, order: Ordering) {
                self.0.store(v, order)
            }

            /// See the `core` method of the same name.
            #[inline]
            pub fn fetch_add(&self, v: $int, order: Ordering) -> $int {
                self.0.fetch_add(v, order)
            }

            /// See the `core` method of the same name.
            #[inline]
            pub fn swap(&self, v: $int, order: Ordering) -> $int {
                self.0.swap(v, order)
            }

            /// See the `core` method of the same name.
            #[inline]
            pub fn compare_exchange(
                &self,
                current: $int,
                new: $int,
                success: Ordering,
                failure: Ordering,
            ) -> Result<$int, $int> {
                self.0.compare_exchange(current, new, success, failure)
            }

            /// The `core` atomic inside (for system-call wrappers that take
            /// one, e.g. rustix's futex calls).
            #[cfg(not(loom))]
            #[inline]
            #[must_use]
            #[allow(clippy::disallowed_types)] // the one place that hands out the `core` type
            pub fn as_core(&self) -> &core::sync::atomic::$name {
                &self.0
            }

            /// The address of the value (for a futex system call).
            #[cfg(not(loom))]
            #[inline]
            #[must_use]
            pub fn as_ptr(&self) -> *mut $int {
                self.0.as_ptr()
            }

            /// Views the integer at `ptr` as an atomic.
            ///
            /// # Safety
            /// As `core`'s `from_ptr`: `ptr` is aligned, valid for reads and
            /// writes for `'a`, and accessed only atomically meanwhile.
            #[cfg(not(loom))]
            #[allow(unsafe_code)]
            #[inline]
            pub unsafe fn from_ptr<'a>(ptr: *mut $int) -> &'a Self {
                // SAFETY: `Self` is `repr(transparent)` over the `core` atomic,
                // which has the layout of the integer; the caller upholds `from_ptr`'s contract.
                unsafe { &*ptr.cast::<Self>() }
            }
        }
    };
}

atomic!(AtomicU32, u32);
atomic!(AtomicU64, u64);

/// A memory fence (loom's under `cfg(loom)`).
#[inline]
pub fn fence(order: Ordering) {
    imp::fence(order);
}

/// The light half of an asymmetric fence: it only stops the compiler from
/// moving memory accesses across it; the heavy half (a process-wide barrier,
/// `membarrier`, run by another thread) makes it a full fence whenever the
/// two meet (see [`crate::bias`]). loom has no heavy half, so under loom
/// this is a sequentially consistent fence, and so is the heavy half in the
/// models.
#[inline]
pub fn asymmetric_light_fence() {
    cfg_if::cfg_if! {
        if #[cfg(loom)] {
            imp::fence(Ordering::SeqCst);
        } else {
            core::sync::atomic::compiler_fence(Ordering::SeqCst);
        }
    }
}

/// The CPU's spin-wait hint (`pause` on x86_64, `isb` on aarch64); a yield under loom.
#[inline]
pub fn spin_loop() {
    hint_imp::spin_loop();
}
