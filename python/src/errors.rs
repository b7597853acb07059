//! Library errors as Python exceptions: bad arguments are `ValueError`, the
//! rest `kpccl.Error` and its subclasses `PeerDeadError` and `TimeoutError`
//! (defined in `kpccl/_errors.py`, so that the latter can also derive from
//! the built-in `TimeoutError`).
//!
//! The subclass is the Rust API's class of the error ([`ErrorKind`], which
//! the C API's `kpccl_last_error_code` reports too), not a table of its own:
//! only `ValueError` is Python's, a finer cut of
//! [`ErrorKind::InvalidArgument`] (this rank's own argument; another rank's
//! is a library failure here).

use kpccl_core::{CollectiveError, Failure, FenceError, LayoutError};
use kpccl_posix::{Error as HostError, ErrorKind};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

/// Which exception an error is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// `ValueError`: the caller's argument.
    Value,
    /// `kpccl.Error`.
    Library,
    /// `kpccl.PeerDeadError`, about a rank if known.
    PeerDead(Option<u32>),
    /// `kpccl.TimeoutError`, about a rank if known.
    Timeout(Option<u32>),
}

/// The exception for `kind` with `message`.
pub(crate) fn raise(kind: Kind, message: String) -> PyErr {
    let (class, rank) = match kind {
        Kind::Value => return PyValueError::new_err(message),
        Kind::Library => ("Error", None),
        Kind::PeerDead(r) => ("PeerDeadError", r),
        Kind::Timeout(r) => ("TimeoutError", r),
    };
    Python::attach(|py| {
        let made = py
            .import("kpccl._errors")
            .and_then(|m| m.getattr(class))
            .and_then(|c| if rank.is_some() { c.call1((&message, rank)) } else { c.call1((&message,)) });
        match made {
            Ok(exc) => PyErr::from_value(exc),
            Err(e) => e,
        }
    })
}

/// A `kpccl.Error` with `message`.
pub(crate) fn library(message: impl Into<String>) -> PyErr {
    raise(Kind::Library, message.into())
}

/// A `ValueError` with `message`.
pub(crate) fn value(message: impl Into<String>) -> PyErr {
    PyValueError::new_err(message.into())
}

/// The exception of the Rust API's class `kind`, about `rank` if known.
fn of_kind(kind: ErrorKind, rank: Option<u32>) -> Kind {
    match kind {
        ErrorKind::DeadPeer => Kind::PeerDead(rank),
        ErrorKind::Timeout => Kind::Timeout(rank),
        _ => Kind::Library,
    }
}

/// The rank a failed wait is about: the one to look at.
fn fence_rank(e: &FenceError) -> Option<u32> {
    match *e {
        FenceError::Timeout { peer: rank }
        | FenceError::PeerDead { rank }
        | FenceError::PeerLeft { rank, .. }
        | FenceError::Aborted { rank } => Some(rank),
        // Another rank timed out on `waited_for`: the rank to look at.
        FenceError::GaveUp { waited_for, .. } => Some(waited_for),
        _ => None,
    }
}

/// The rank a host-side error is about, if it knows it. (A launcher's
/// code names the rank it failed on, not the one at fault.)
fn culprit(e: &HostError) -> Option<u32> {
    match e {
        HostError::Fence(f)
        | HostError::Collective(
            CollectiveError::Local(Failure::Fence(f)) | CollectiveError::Peer { failure: Failure::Fence(f), .. },
        ) => fence_rank(f),
        HostError::RankLost { departure, .. } => Some(departure.rank),
        _ => None,
    }
}

/// Whether `e` is this rank's own bad argument (`ValueError`).
fn own_argument(e: &HostError) -> bool {
    matches!(
        e,
        HostError::OutOfBounds { .. }
            | HostError::OtherNode { .. }
            | HostError::Config { .. }
            | HostError::Fence(FenceError::InvalidRank { .. })
            | HostError::Collective(CollectiveError::Local(
                Failure::Argument(_) | Failure::Fence(FenceError::InvalidRank { .. })
            ))
    )
}

/// Which exception a host-side error is: [`own_argument`] or its [`ErrorKind`].
pub(crate) fn host_kind(e: &HostError) -> Kind {
    if own_argument(e) { Kind::Value } else { of_kind(e.kind(), culprit(e)) }
}

/// Which exception a failed window creation is on rank `me`: as
/// [`host_kind`], but a window too large for this rank's own request is this
/// rank's argument (`ValueError`, as a size past `isize` is); the others'
/// failure for it is a library one there.
pub(crate) fn creation_kind(e: &HostError, me: u32) -> Kind {
    match e {
        HostError::Collective(CollectiveError::Layout(LayoutError::TooLarge { rank, .. })) if *rank == me => {
            Kind::Value
        }
        _ => host_kind(e),
    }
}

/// A host-side error as its exception.
pub(crate) fn host(e: HostError) -> PyErr {
    raise(host_kind(&e), e.to_string())
}

/// Which exception a device-window error is: [`host_kind`] for its host
/// part, `ValueError` for this rank's own bad argument, else its
/// [`ErrorKind`] (which C's error code reports too).
pub(crate) fn device_kind(e: &kpccl_ascend::window::Error) -> Kind {
    use kpccl_ascend::window::Error as D;
    match e {
        D::Host(h) => host_kind(h),
        D::OutOfBounds { .. } | D::NegativeDevice { .. } | D::SizeTooLarge { .. } => Kind::Value,
        // A `KPCCL_ASCEND` word that names no runtime: a refused `KPCCL_*`
        // variable, as `KPCCL_ASCEND_PID_VALIDATION`'s is (`Config`).
        D::Backend(kpccl_ascend::BackendError::Unknown(_)) => Kind::Value,
        _ => of_kind(e.kind(), None),
    }
}

/// A device-window error as its exception.
pub(crate) fn device(e: kpccl_ascend::window::Error) -> PyErr {
    raise(device_kind(&e), e.to_string())
}
