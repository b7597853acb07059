//! `kpccl_last_error_code`: the class of this thread's last failure, so
//! that C callers can tell failures apart without parsing text. The classes
//! are the Rust API's (`kpccl_posix::ErrorKind`).

use core::cell::Cell;
use core::ffi::c_int;

use kpccl_posix::ErrorKind;

use crate::error::Error;

/// The class of a failure (`kpccl_last_error_code`). New classes may be
/// added; treat an unknown value like `KPCCL_ERR_INTERNAL`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum kpccl_error_code_t {
    /// No call has failed on this thread yet.
    KPCCL_ERR_NONE = 0,
    /// A bad argument or setting, on this rank or, in a collective, another
    /// (its own `kpccl_last_error` says which): NULL or stale handles, ranks
    /// out of range, ranks that disagree, invalid `KPCCL_*` variables.
    KPCCL_ERR_INVALID_ARGUMENT = 1,
    /// A wait reached its deadline (`KPCCL_TIMEOUT_MS`, or the window's), on
    /// this rank or on one that then abandoned the window; or, under
    /// `kpccl-run`, a live rank did not reach a collective in time.
    KPCCL_ERR_TIMEOUT = 2,
    /// A peer process died, left, or abandoned the window.
    KPCCL_ERR_DEAD_PEER = 3,
    /// Out of memory, of handles, or of space in the segment directory.
    KPCCL_ERR_NO_SPACE = 4,
    /// Not allowed: another user's segment or directory, or its mode.
    KPCCL_ERR_PERMISSION = 5,
    /// The device runtime (ACL) failed, or there is none.
    KPCCL_ERR_DEVICE_RUNTIME = 6,
    /// The out-of-band callbacks (MPI, the launcher) failed.
    KPCCL_ERR_OUT_OF_BAND = 7,
    /// Another operating-system failure.
    KPCCL_ERR_SYSTEM = 8,
    /// A bug in the library (a caught panic), or a failure it cannot classify.
    KPCCL_ERR_INTERNAL = 9,
}

impl From<ErrorKind> for kpccl_error_code_t {
    fn from(kind: ErrorKind) -> Self {
        match kind {
            ErrorKind::InvalidArgument => Self::KPCCL_ERR_INVALID_ARGUMENT,
            ErrorKind::Timeout => Self::KPCCL_ERR_TIMEOUT,
            ErrorKind::DeadPeer => Self::KPCCL_ERR_DEAD_PEER,
            ErrorKind::NoSpace => Self::KPCCL_ERR_NO_SPACE,
            ErrorKind::Permission => Self::KPCCL_ERR_PERMISSION,
            ErrorKind::DeviceRuntime => Self::KPCCL_ERR_DEVICE_RUNTIME,
            ErrorKind::OutOfBand => Self::KPCCL_ERR_OUT_OF_BAND,
            ErrorKind::System => Self::KPCCL_ERR_SYSTEM,
            _ => Self::KPCCL_ERR_INTERNAL,
        }
    }
}

/// The class of a C API failure.
pub(crate) fn class(e: &Error) -> kpccl_error_code_t {
    use kpccl_error_code_t::*;
    match e {
        Error::Null(_)
        | Error::Misaligned(_)
        | Error::Handle { .. }
        | Error::Range { .. }
        | Error::Invalid { .. }
        | Error::GroupLarger { .. }
        | Error::GroupSmaller { .. }
        | Error::PeerArgument { .. }
        | Error::LauncherSetting(_) => KPCCL_ERR_INVALID_ARGUMENT,
        Error::NoHandle { .. } | Error::NoMemory { .. } => KPCCL_ERR_NO_SPACE,
        Error::Api(e) => e.kind().into(),
        #[cfg(feature = "ascend")]
        Error::Device(e) => e.kind().into(),
        // Like a build with the backend on a machine without a device runtime.
        #[cfg(not(feature = "ascend"))]
        Error::NoAscend => KPCCL_ERR_DEVICE_RUNTIME,
        // Python raises `kpccl.Error` for the same: no launcher is no argument's fault.
        Error::Launcher(_) | Error::NoLauncher => KPCCL_ERR_OUT_OF_BAND,
        Error::Panic(_) => KPCCL_ERR_INTERNAL,
    }
}

thread_local! {
    static LAST: Cell<kpccl_error_code_t> = const { Cell::new(kpccl_error_code_t::KPCCL_ERR_NONE) };
}

/// Records `e`'s class as this thread's last.
pub(crate) fn remember(e: &Error) {
    set(class(e));
}

/// Records `code` as this thread's last class.
pub(crate) fn set(code: kpccl_error_code_t) {
    let _ = LAST.try_with(|last| last.set(code));
}

/// The class of a failure numbered `code` as C numbers them; `None` for
/// `KPCCL_ERR_NONE` and for numbers that are no class.
pub(crate) fn failure_class(code: c_int) -> Option<kpccl_error_code_t> {
    use kpccl_error_code_t::*;
    [
        KPCCL_ERR_INVALID_ARGUMENT,
        KPCCL_ERR_TIMEOUT,
        KPCCL_ERR_DEAD_PEER,
        KPCCL_ERR_NO_SPACE,
        KPCCL_ERR_PERMISSION,
        KPCCL_ERR_DEVICE_RUNTIME,
        KPCCL_ERR_OUT_OF_BAND,
        KPCCL_ERR_SYSTEM,
        KPCCL_ERR_INTERNAL,
    ]
    .into_iter()
    .find(|c| *c as c_int == code)
}

/// The class of this thread's last failure (`KPCCL_ERR_NONE` if none yet),
/// to act on without parsing `kpccl_last_error()`. Like the text, it is set
/// by every failing call and kept by successful ones.
#[unsafe(no_mangle)]
pub extern "C" fn kpccl_last_error_code() -> kpccl_error_code_t {
    LAST.try_with(Cell::get).unwrap_or(kpccl_error_code_t::KPCCL_ERR_INTERNAL)
}

#[cfg(all(test, feature = "ascend"))]
mod tests {
    use kpccl_ascend::window::{Error as DeviceError, RecordFlaw};

    use super::*;

    /// A peer's device record that breaks the protocol is classed as a host
    /// record that disagrees (an invalid argument), not as a failure of the
    /// device runtime, which had no part in it.
    #[test]
    fn a_peers_bad_device_record_is_an_invalid_argument() {
        let e = DeviceError::BadRecord { rank: 1, flaw: RecordFlaw::NoKey { size: 4096 } };
        assert_eq!(class(&Error::Device(e)), kpccl_error_code_t::KPCCL_ERR_INVALID_ARGUMENT);
    }
}
