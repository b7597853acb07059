//! The panic boundary: no unwind ever crosses into C (rustls-ffi's
//! `ffi_panic_boundary!`). The workspace keeps `panic = "unwind"`, or there
//! would be nothing to catch.

use core::ffi::c_int;
use std::any::Any;

use crate::KPCCL_ERROR;
use crate::error::{self, Error};

/// The body of entry point `$name`: `$body` is a block evaluating to
/// `Result<(), Error>`, run under `catch_unwind`. `Ok` gives `KPCCL_OK`; an
/// error or a panic becomes the thread's last error and `KPCCL_ERROR`.
///
/// The error is turned into its code inside the guarded closure, so that
/// what crosses `catch_unwind` is a `c_int`: a fence's success path then
/// moves no `Error`-sized result through the stack (it did, and the C
/// fences paid for it: the instructions between two fences of a ping-pong
/// count twice, once on each side of the hand-off).
macro_rules! ffi_boundary {
    ($name:literal, $body:block) => {{
        let code = ::std::panic::catch_unwind(::std::panic::AssertUnwindSafe(|| -> ::core::ffi::c_int {
            $crate::log::init();
            let body = || -> ::core::result::Result<(), $crate::error::Error> { $body };
            match body() {
                Ok(()) => $crate::KPCCL_OK,
                Err(e) => $crate::panic::failed($name, &e),
            }
        }));
        code.unwrap_or_else(|payload| $crate::panic::panicked($name, payload.as_ref()))
    }};
}

/// Records entry point `name`'s error as the thread's last one.
#[cold]
#[inline(never)]
pub(crate) fn failed(name: &'static str, e: &Error) -> c_int {
    error::record(name, e);
    KPCCL_ERROR
}

/// Records entry point `name`'s panic (`payload`) as the thread's last error.
#[cold]
#[inline(never)]
pub(crate) fn panicked(name: &'static str, payload: &(dyn Any + Send)) -> c_int {
    let e = Error::Panic(message(payload));
    // Recording the error must not unwind into C either (a panic while
    // recording an error comes here through the entry point's guard).
    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| error::record(name, &e)));
    KPCCL_ERROR
}

fn message(payload: &(dyn Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "a panic without a message".to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn panics() -> c_int {
        ffi_boundary!("panics", {
            let v: Vec<u8> = Vec::new();
            let _ = v[usize::from(v.is_empty())];
            Ok(())
        })
    }

    #[test]
    fn a_panic_becomes_an_error() {
        assert_eq!(panics(), KPCCL_ERROR);
        let text = error::last();
        assert!(text.starts_with("panics: internal error (a panic):"), "{text}");
    }
}
