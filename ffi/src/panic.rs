//! The panic boundary: no unwind ever crosses into C (rustls-ffi's
//! `ffi_panic_boundary!`). The workspace keeps `panic = "unwind"`, or there
//! would be nothing to catch.

use core::ffi::c_int;
use std::any::Any;

use crate::error::{self, Error};
use crate::{KPCCL_ERROR, KPCCL_OK};

/// The body of entry point `$name`: `$body` is a block evaluating to
/// `Result<(), Error>`, run under `catch_unwind`. `Ok` gives `KPCCL_OK`; an
/// error or a panic becomes the thread's last error and `KPCCL_ERROR`.
macro_rules! ffi_boundary {
    ($name:literal, $body:block) => {{
        let result = ::std::panic::catch_unwind(::std::panic::AssertUnwindSafe(
            || -> ::core::result::Result<(), $crate::error::Error> {
                $crate::log::init();
                $body
            },
        ));
        $crate::panic::conclude($name, result)
    }};
}

/// Turns the outcome of an entry point's body into its return code.
#[inline]
pub(crate) fn conclude(name: &'static str, result: std::thread::Result<Result<(), Error>>) -> c_int {
    if matches!(result, Ok(Ok(()))) {
        // Nothing to drop: `Ok(())` owns nothing.
        core::mem::forget(result);
        return KPCCL_OK;
    }
    fail(name, result)
}

/// The error half of [`conclude`], out of the fences' way.
#[cold]
#[inline(never)]
fn fail(name: &'static str, result: std::thread::Result<Result<(), Error>>) -> c_int {
    let e = match result {
        Ok(Ok(())) => return KPCCL_OK,
        Ok(Err(e)) => e,
        Err(payload) => Error::Panic(message(payload.as_ref())),
    };
    // Recording the error must not unwind into C either.
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
