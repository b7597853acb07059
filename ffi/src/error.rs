//! Why an entry point failed: the error type, and the thread-local text of
//! the last failure that C reads through `kpccl_last_error`.

use core::cell::RefCell;
use core::ffi::{CStr, c_char, c_int};
use core::fmt;
use std::ffi::CString;

use kpccl_core::error::ArgError;
use kpccl_core::{CollectiveError, Failure};

use crate::handle::{Kind, Refusal};
use crate::log::{self, Level};

/// What an integer argument's valid range is, as an error message says it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RangeOf {
    /// A rank of a window.
    WindowRanks,
    /// A rank of a communicator being made.
    CommRanks,
    /// A local rank of a communicator being made: a rank of the caller's
    /// node, whose rank count is not known yet (at most the communicator's).
    LocalRanks,
    /// A communicator's rank count.
    RankCount,
    /// Room for the ranks of this node.
    NodeRanks,
}

/// What went wrong in one call.
#[derive(Debug)]
pub(crate) enum Error {
    /// A pointer argument is NULL.
    Null(&'static str),
    /// A pointer argument is not aligned for its type.
    Misaligned(&'static str),
    /// A handle argument is not a live, idle handle of the right kind.
    Handle {
        /// The argument.
        arg: &'static str,
        /// What it should be.
        kind: Kind,
        /// Its value.
        addr: usize,
        /// What it is instead.
        why: Refusal,
    },
    /// No handle could be made for a new object.
    NoHandle {
        /// What it would have been.
        kind: Kind,
        /// Why not.
        why: &'static str,
    },
    /// Memory a call needs could not be allocated (a low `ulimit -v`).
    NoMemory {
        /// How much.
        bytes: usize,
        /// What for.
        what: &'static str,
    },
    /// An integer argument is outside `min..end`.
    Range {
        /// The argument.
        arg: &'static str,
        /// Its value.
        value: i64,
        /// What the range is: says it in the message.
        of: RangeOf,
        /// The smallest valid value.
        min: i64,
        /// One past the largest valid value.
        end: i64,
    },
    /// An argument is invalid for another reason.
    Invalid {
        /// The argument.
        arg: &'static str,
        /// Why.
        why: &'static str,
    },
    /// More ranks answered the out-of-band allgather than `nranks` says.
    GroupLarger {
        /// The rank count given.
        nranks: u32,
        /// How many ranks answered, at least.
        at_least: usize,
    },
    /// Fewer ranks answered the out-of-band allgather than `nranks` says.
    GroupSmaller {
        /// The rank count given.
        nranks: u32,
        /// How many ranks answered.
        answered: usize,
    },
    /// Another rank's argument was invalid, so the collective failed on every rank.
    PeerArgument {
        /// The rank whose argument was invalid.
        rank: u32,
    },
    /// The Rust API failed.
    Api(kpccl_posix::Error),
    /// A device window failed (ACL errors carry their code in the text).
    #[cfg(feature = "ascend")]
    Device(kpccl_ascend::window::Error),
    /// A device window was asked of a library built without the Ascend backend.
    #[cfg(not(feature = "ascend"))]
    NoAscend,
    /// The launcher cannot be reached or refused this process.
    Launcher(String),
    /// A launcher variable (`KPCCL_RUN_SOCKET`, `KPCCL_RANK`, …) is malformed:
    /// the caller's setting, not a failure of the launcher.
    LauncherSetting(String),
    /// `kpccl_run_oob` in a process `kpccl-run` did not start.
    NoLauncher,
    /// A panic was caught at the boundary (a bug in the library).
    Panic(String),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Null(arg) => write!(f, "`{arg}` is NULL"),
            Self::Misaligned(arg) => write!(f, "`{arg}` is not aligned for its type"),
            Self::Handle { arg, kind, addr, why } => {
                let kind = kind.name();
                match why {
                    Refusal::Stale => write!(f, "{kind} {addr:#x} (`{arg}`) was freed (stale handle)"),
                    Refusal::Foreign => write!(f, "`{arg}` = {addr:#x} is not a {kind} (never made by kpccl)"),
                    Refusal::Kind(k) => write!(f, "`{arg}` = {addr:#x} is a {}, not a {kind}", k.name()),
                    Refusal::OwnerOnly => write!(
                        f,
                        "{kind} {addr:#x} (`{arg}`) can be used only by the thread that made it: the \
                         system refuses the membarrier call that lets another thread take it over"
                    ),
                    Refusal::Forked(pid) => write!(
                        f,
                        "{kind} {addr:#x} (`{arg}`) was made by the parent process (pid {pid}); a forked child \
                         cannot use it (make the child's own communicator and windows)"
                    ),
                    Refusal::Busy => write!(
                        f,
                        "{kind} {addr:#x} (`{arg}`) is in use by another thread (a call that needs it alone \
                         is running there: a fence, signal or wait, an allocation on it, or its free; make one \
                         thread use it at a time)"
                    ),
                }
            }
            Self::NoHandle { kind, why } => write!(f, "cannot make a {}: {why}", kind.name()),
            Self::NoMemory { bytes, what } => write!(f, "cannot allocate {bytes} bytes for {what}"),
            Self::Range { arg, value, of, min, end } => {
                write!(f, "{arg} {value} is out of range: ")?;
                let max = end - 1;
                match of {
                    RangeOf::WindowRanks => write!(f, "this window has ranks {min} to {max}"),
                    RangeOf::CommRanks => write!(f, "the communicator has ranks {min} to {max}"),
                    RangeOf::LocalRanks => write!(
                        f,
                        "it numbers the caller among the ranks of its node, {min} to that node's rank count - 1 \
                         (at most nranks - 1 = {max}), or is KPCCL_LOCAL_RANK_AUTO (-1) to number the node's \
                         ranks in rank order"
                    ),
                    RangeOf::RankCount => write!(f, "a communicator has {min} to {max} ranks"),
                    RangeOf::NodeRanks if *min == 1 => f.write_str("this node has 1 rank, so at least 1 is needed"),
                    RangeOf::NodeRanks => write!(f, "this node has {min} ranks, so at least {min} are needed"),
                }
            }
            Self::Invalid { arg, why } => write!(f, "`{arg}` is invalid: {why}"),
            Self::GroupLarger { nranks, at_least } => write!(
                f,
                "nranks is {nranks}, but at least {at_least} ranks answered the out-of-band allgather: \
                 every rank must pass the size of the callbacks' group (the size of the MPI communicator)"
            ),
            Self::GroupSmaller { nranks, answered } => write!(
                f,
                "nranks is {nranks}, but only {answered} rank{} answered the out-of-band allgather: every rank \
                 must pass the size of the callbacks' group (the size of the MPI communicator)",
                if *answered == 1 { "" } else { "s" }
            ),
            Self::PeerArgument { rank } => write!(
                f,
                "rank {rank} refused its part (it passed an invalid argument, or could not have a \
                 handle), so the collective failed on every rank (rank {rank}'s kpccl_last_error says why)"
            ),
            Self::Api(e) => e.fmt(f),
            #[cfg(feature = "ascend")]
            Self::Device(e) => e.fmt(f),
            #[cfg(not(feature = "ascend"))]
            Self::NoAscend => {
                f.write_str("this libkpccl was built without the Ascend backend (cargo feature `ascend`)")
            }
            Self::Launcher(e) => write!(f, "the launcher: {e}"),
            Self::LauncherSetting(e) => f.write_str(e),
            Self::NoLauncher => {
                f.write_str("not started by kpccl-run (KPCCL_RUN_SOCKET is not set): run `kpccl-run -n N -- ./prog`")
            }
            Self::Panic(m) => write!(f, "internal error (a panic): {m}"),
        }
    }
}

impl From<kpccl_posix::Error> for Error {
    /// Names a peer's refused request for what it is: an invalid argument
    /// over there (or no handle left), explained in that rank's own last error.
    fn from(e: kpccl_posix::Error) -> Self {
        if let kpccl_posix::Error::Collective(CollectiveError::Peer {
            rank,
            failure: Failure::Argument(ArgError::Caller),
        }) = &e
        {
            return Self::PeerArgument { rank: *rank };
        }
        Self::Api(e)
    }
}

#[cfg(feature = "ascend")]
impl From<kpccl_ascend::window::Error> for Error {
    fn from(e: kpccl_ascend::window::Error) -> Self {
        match e {
            kpccl_ascend::window::Error::Host(e) => e.into(),
            e => Self::Device(e),
        }
    }
}

thread_local! {
    static LAST: RefCell<CString> = RefCell::new(CString::default());
}

/// Records `e` as this thread's last error and logs it.
pub(crate) fn record(name: &'static str, e: &Error) {
    let text = format!("{name}: {e}");
    // Creation failures were logged by the Rust API already, as were the
    // variables a communicator's creation refused and the node identity it
    // could not read (a device window's refusal of a variable is not).
    let logged = matches!(
        e,
        Error::Api(
            kpccl_posix::Error::Collective(_)
                | kpccl_posix::Error::RankLost { .. }
                | kpccl_posix::Error::Launcher { .. }
                | kpccl_posix::Error::SegmentDir(_)
                | kpccl_posix::Error::Platform { .. }
        )
    ) || (name == "kpccl_shm_comm_create"
        && matches!(e, Error::Api(kpccl_posix::Error::Config { .. } | kpccl_posix::Error::NodeIdentity { .. })));
    if !logged {
        // Another rank's bad argument is logged there, once, not on every rank.
        let level = if matches!(e, Error::PeerArgument { .. }) { Level::Debug } else { Level::Error };
        log::log(level, format_args!("{text}"));
    }
    crate::error_code::remember(e);
    keep(&text);
}

/// Makes `text` this thread's last error text.
fn keep(text: &str) {
    let c = CString::new(text.replace('\0', " ")).unwrap_or_default();
    let _ = LAST.try_with(|last| *last.borrow_mut() = c);
}

/// This thread's last error, as Rust text (for tests).
#[cfg(test)]
pub(crate) fn last() -> String {
    LAST.with(|l| l.borrow().to_string_lossy().into_owned())
}

/// The text of this thread's last failure: which function failed and why,
/// or `""` if nothing failed yet. Never `NULL`.
///
/// The text stays valid until the next failing call on the same thread;
/// copy it to keep it. A successful call does not clear it.
#[unsafe(no_mangle)]
pub extern "C" fn kpccl_last_error() -> *const c_char {
    static EMPTY: &CStr = c"";
    LAST.try_with(|l| l.borrow().as_ptr()).unwrap_or(EMPTY.as_ptr())
}

/// Logs `msg` at the error level (on stderr, unless `KPCCL_LOG=off`). The
/// header's `kpccl_error(fmt, ...)` formats its arguments and calls this.
///
/// # Safety
/// `msg` is `NULL` (an error) or a NUL-terminated string.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn kpccl_log_error(msg: *const c_char) -> c_int {
    ffi_boundary!("kpccl_log_error", {
        if msg.is_null() {
            return Err(Error::Null("msg"));
        }
        // SAFETY: not NULL, and the caller promises a NUL-terminated string.
        let text = unsafe { CStr::from_ptr(msg) };
        log::log(Level::Error, format_args!("{}", text.to_string_lossy()));
        Ok(())
    })
}

/// Records `msg` as this thread's last failure, of class `code` (a
/// `kpccl_error_code_t` other than `KPCCL_ERR_NONE`), and logs it at the
/// error level, so that `kpccl_last_error()` and `kpccl_last_error_code()`
/// report it as they report a failed call. For code that fails on the
/// library's behalf before calling it, such as `kpccl_mpi.h`'s
/// `kpccl_shm_comm_create_mpi` given `MPI_COMM_NULL`. Returns `KPCCL_OK`;
/// `KPCCL_ERROR` (and records why) when `msg` is `NULL` or `code` is not a
/// failure's class.
///
/// # Safety
/// `msg` is `NULL` (an error) or a NUL-terminated string.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn kpccl_record_error(code: c_int, msg: *const c_char) -> c_int {
    ffi_boundary!("kpccl_record_error", {
        let Some(class) = crate::error_code::failure_class(code) else {
            return Err(Error::Invalid { arg: "code", why: "not the kpccl_error_code_t of a failure (1 to 9)" });
        };
        if msg.is_null() {
            return Err(Error::Null("msg"));
        }
        // SAFETY: not NULL, and the caller promises a NUL-terminated string.
        let text = unsafe { CStr::from_ptr(msg) }.to_string_lossy();
        log::log(Level::Error, format_args!("{text}"));
        crate::error_code::set(class);
        keep(&text);
        Ok(())
    })
}
