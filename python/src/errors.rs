//! Library errors as Python exceptions: bad arguments are `ValueError`, the
//! rest `kpccl.Error` and its subclasses `PeerDeadError` and `TimeoutError`
//! (defined in `kpccl/_errors.py`, so that the latter can also derive from
//! the built-in `TimeoutError`).

use kpccl_core::{CollectiveError, Failure, FenceError, LayoutError};
use kpccl_posix::Error as HostError;
use kpccl_posix::launch::{Ending, code};
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

fn fence_kind(e: &FenceError) -> Kind {
    match *e {
        FenceError::Timeout { peer } => Kind::Timeout(Some(peer)),
        // Another rank timed out on `waited_for`: the rank to look at.
        FenceError::GaveUp { waited_for, .. } => Kind::Timeout(Some(waited_for)),
        FenceError::PeerDead { rank } => Kind::PeerDead(Some(rank)),
        FenceError::InvalidRank { .. } => Kind::Value,
        _ => Kind::Library,
    }
}

fn failure_kind(f: &Failure) -> Kind {
    match f {
        Failure::Argument(_) => Kind::Value,
        Failure::Fence(e) => fence_kind(e),
        Failure::Oob(o) if o.code == code::TIMEOUT || o.code == code::UNRESPONSIVE => Kind::Timeout(None),
        Failure::Oob(o) if o.code == code::RANK_LOST => Kind::PeerDead(None),
        _ => Kind::Library,
    }
}

/// Which exception a host-side error is.
pub(crate) fn host_kind(e: &HostError) -> Kind {
    match e {
        HostError::Fence(f) => fence_kind(f),
        HostError::OutOfBounds { .. } | HostError::OtherNode { .. } | HostError::Config { .. } => Kind::Value,
        // This rank's own argument: a peer's bad argument is a library failure here.
        HostError::Collective(CollectiveError::Local(f)) => failure_kind(f),
        HostError::Collective(CollectiveError::Peer { failure: Failure::Fence(f), .. }) => fence_kind(f),
        HostError::RankLost { departure, .. } => match departure.ending {
            Ending::Unresponsive(_) => Kind::Timeout(Some(departure.rank)),
            _ => Kind::PeerDead(Some(departure.rank)),
        },
        HostError::Launcher { code: c, rank } if *c == code::TIMEOUT || *c == code::UNRESPONSIVE => {
            Kind::Timeout(*rank)
        }
        _ => Kind::Library,
    }
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

/// Which exception a device-window error is.
pub(crate) fn device_kind(e: &kpccl_ascend::window::Error) -> Kind {
    use kpccl_ascend::window::Error as D;
    match e {
        D::Host(h) => host_kind(h),
        D::OutOfBounds { .. } | D::NegativeDevice { .. } | D::SizeTooLarge { .. } => Kind::Value,
        _ => Kind::Library,
    }
}

/// A device-window error as its exception.
pub(crate) fn device(e: kpccl_ascend::window::Error) -> PyErr {
    raise(device_kind(&e), e.to_string())
}
