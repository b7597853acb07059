//! What can go wrong with a device window, and the ACL call that did it.

use std::fmt;

use kpccl_core::error::CollectiveError;
use kpccl_posix::ErrorKind;

use crate::backend::BackendError;
use crate::runtime::AclError;

/// An ACL call a device window makes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Call {
    /// `aclInit`.
    Init,
    /// `aclrtSetDevice`.
    SetDevice,
    /// `aclrtDeviceGetBareTgid`.
    GetBareTgid,
    /// `aclrtMalloc`.
    Malloc,
    /// `aclrtIpcMemGetExportKey`.
    GetExportKey,
    /// `aclrtIpcMemSetImportPid`.
    SetImportPid,
    /// `aclrtDeviceCanAccessPeer`.
    CanAccessPeer,
    /// `aclrtIpcMemImportByKey`.
    ImportByKey,
    /// `aclrtMemcpy`.
    Memcpy,
    /// `aclrtSynchronizeDevice`.
    Synchronize,
    /// `aclrtIpcMemClose`.
    Close,
    /// `aclrtFree`.
    Free,
    /// `aclrtCreateStream`.
    CreateStream,
    /// `aclrtMemcpyAsync`.
    MemcpyAsync,
    /// `aclrtSynchronizeStream`.
    SynchronizeStream,
    /// `aclrtDestroyStream`.
    DestroyStream,
    /// `aclrtGetCurrentContext`.
    GetContext,
    /// `aclrtSetCurrentContext`.
    SetContext,
    /// `aclrtResetDevice`.
    ResetDevice,
}

// The codes a creation record carries.
kpccl_core::codes!(Call: u32 {
    Init = 1,
    SetDevice = 2,
    GetBareTgid = 3,
    Malloc = 4,
    GetExportKey = 5,
    SetImportPid = 6,
    CanAccessPeer = 7,
    ImportByKey = 8,
    Memcpy = 9,
    Synchronize = 10,
    Close = 11,
    Free = 12,
    CreateStream = 13,
    MemcpyAsync = 14,
    SynchronizeStream = 15,
    DestroyStream = 16,
    GetContext = 17,
    SetContext = 18,
    ResetDevice = 19,
});

impl Call {
    /// The ACL function's name.
    pub fn name(self) -> &'static str {
        match self {
            Self::Init => "aclInit",
            Self::SetDevice => "aclrtSetDevice",
            Self::GetBareTgid => "aclrtDeviceGetBareTgid",
            Self::Malloc => "aclrtMalloc",
            Self::GetExportKey => "aclrtIpcMemGetExportKey",
            Self::SetImportPid => "aclrtIpcMemSetImportPid",
            Self::CanAccessPeer => "aclrtDeviceCanAccessPeer",
            Self::ImportByKey => "aclrtIpcMemImportByKey",
            Self::Memcpy => "aclrtMemcpy",
            Self::Synchronize => "aclrtSynchronizeDevice",
            Self::Close => "aclrtIpcMemClose",
            Self::Free => "aclrtFree",
            Self::CreateStream => "aclrtCreateStream",
            Self::MemcpyAsync => "aclrtMemcpyAsync",
            Self::SynchronizeStream => "aclrtSynchronizeStream",
            Self::DestroyStream => "aclrtDestroyStream",
            Self::GetContext => "aclrtGetCurrentContext",
            Self::SetContext => "aclrtSetCurrentContext",
            Self::ResetDevice => "aclrtResetDevice",
        }
    }
}

/// Why one rank failed a device window's creation; what it tells the others.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Failure {
    /// An ACL call failed; `peer` is the rank whose segment it concerned, if another.
    Acl {
        /// The call.
        call: Call,
        /// Its `aclError`.
        code: i32,
        /// The rank whose segment was imported, for imports.
        peer: Option<u32>,
    },
    /// The rank has no device runtime (see `KPCCL_ASCEND`).
    NoRuntime,
    /// The rank refused its own arguments.
    Argument,
    /// The rank's out-of-band call failed with this code.
    Oob(i32),
    /// The rank's device cannot reach the device of rank `peer`.
    NoPeerAccess {
        /// The rank whose segment is out of reach.
        peer: u32,
    },
    /// A record the protocol does not know (another version).
    Unknown,
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Self::Acl { call, code, peer } => {
                write!(f, "{} failed: {}", call.name(), AclError::new(code))?;
                match peer {
                    Some(p) => write!(f, ", for rank {p}'s segment"),
                    None => Ok(()),
                }
            }
            Self::NoRuntime => write!(f, "no Ascend runtime (KPCCL_ASCEND)"),
            Self::Argument => write!(f, "invalid arguments (its own error says which)"),
            Self::Oob(code) => write!(f, "out-of-band collective failed (code {code})"),
            Self::NoPeerAccess { peer } => write!(f, "its device cannot access the device of rank {peer}"),
            Self::Unknown => write!(f, "an unknown failure"),
        }
    }
}

/// What the ranks of a device window's creation can disagree on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Setting {
    /// The protocol stage (a rank runs another step or another version).
    Stage,
    /// The rank count. (A wrong rank number is no disagreement with rank 0
    /// but a [`CollectiveError::RankClaim`], told as the processes said it.)
    RankCount,
    /// Whether imports validate the importer's PID.
    PidValidation,
}

impl fmt::Display for Setting {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Stage => "protocol stage",
            Self::RankCount => "rank count",
            Self::PidValidation => "PID validation setting",
        })
    }
}

/// What is wrong with a creation record that keeps to the protocol's form
/// but not to its rules: a peer of another build, or a corrupted out-of-band
/// exchange. Acting on it would copy to an address no import backs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum RecordFlaw {
    /// A segment of more bytes than an address space can map (`isize::MAX`).
    SizeTooLarge {
        /// The size announced.
        size: u64,
    },
    /// A segment of `size` bytes, and no export key for it.
    NoKey {
        /// The size announced.
        size: u64,
    },
    /// An export key for an empty segment.
    KeyWithoutSegment,
    /// An export key without a NUL in its 65 bytes.
    UnterminatedKey,
}

impl fmt::Display for RecordFlaw {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Self::SizeTooLarge { size } => {
                write!(f, "announced a device segment of {size} bytes, more than an address space can map")
            }
            Self::NoKey { size } => write!(f, "announced a device segment of {size} bytes but sent no export key"),
            Self::KeyWithoutSegment => write!(f, "sent an export key for an empty device segment"),
            Self::UnterminatedKey => write!(f, "sent an export key without a NUL in its 65 bytes"),
        }
    }
}

/// How a device window's creation failed across its ranks: this rank
/// (`Local`), another (`Peer`), a disagreement with rank 0 (`Mismatch`), or a
/// wrong rank number (`RankClaim`) — the shape and wording of host
/// collectives, over device failures.
pub type Collective = CollectiveError<Failure, Setting>;

/// A device window's error.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// The host part (fence slots, collectives, fences) failed.
    Host(kpccl_posix::Error),
    /// This process has no device runtime.
    Backend(BackendError),
    /// The device part of the creation failed on this rank or another, or
    /// the ranks disagree.
    Collective(Collective),
    /// An access fell outside a rank's segment.
    OutOfBounds {
        /// The rank whose segment was accessed.
        rank: u32,
        /// The first byte accessed.
        offset: usize,
        /// Bytes accessed.
        len: usize,
        /// The segment's length.
        size: usize,
    },
    /// The communicator spans `nnodes` nodes: device memory is shared
    /// between the processes of one node, and device windows do not span
    /// nodes yet (every rank refuses alike, none waits).
    MultiNode {
        /// The communicator's node count.
        nnodes: u32,
    },
    /// This rank's device number is negative (every rank fails: the others
    /// learn that this one refused its arguments).
    NegativeDevice {
        /// The device given.
        device: i32,
    },
    /// This rank's segment size is more than an address space can map
    /// (`isize::MAX` bytes; every rank fails, as for a negative device).
    SizeTooLarge {
        /// The size given.
        size: u64,
    },
    /// Rank `rank`'s creation record breaks the protocol's rules (every rank
    /// reads the same table, so every rank refuses it alike).
    BadRecord {
        /// The rank that sent it.
        rank: u32,
        /// What is wrong with it.
        flaw: RecordFlaw,
    },
    /// Two ranks run in one process: device memory is shared between
    /// processes (ACL imports another process's export; a process does not
    /// import its own), so every rank refuses alike, none waits.
    SharedProcess {
        /// The two ranks, the lower first.
        ranks: [u32; 2],
        /// Their process, as the device runtime names it (its bare tgid).
        tgid: i32,
    },
}

impl Error {
    /// This rank failed with `failure`.
    pub fn local(failure: Failure) -> Self {
        Self::Collective(Collective::Local(failure))
    }

    /// The failure behind the error, this rank's or the peer's, if there is one.
    pub fn failure(&self) -> Option<Failure> {
        match self {
            Self::Collective(Collective::Local(f) | Collective::Peer { failure: f, .. }) => Some(*f),
            _ => None,
        }
    }

    /// The class of the error, in the host API's classes: what C's
    /// `kpccl_last_error_code` reports and Python's exception class follows.
    /// A bad argument or setting (this rank's or, in a collective, another's)
    /// is [`ErrorKind::InvalidArgument`]; a failing ACL call or a missing
    /// runtime [`ErrorKind::DeviceRuntime`].
    pub fn kind(&self) -> ErrorKind {
        if let Some(failure) = self.failure() {
            return match failure {
                Failure::Argument => ErrorKind::InvalidArgument,
                Failure::Oob(_) => ErrorKind::OutOfBand,
                Failure::Unknown => ErrorKind::Internal,
                Failure::Acl { .. } | Failure::NoRuntime | Failure::NoPeerAccess { .. } => ErrorKind::DeviceRuntime,
            };
        }
        match self {
            Self::Host(e) => e.kind(),
            Self::Collective(_)
            | Self::OutOfBounds { .. }
            | Self::MultiNode { .. }
            | Self::SharedProcess { .. }
            | Self::NegativeDevice { .. }
            | Self::SizeTooLarge { .. }
            // A peer's record that breaks the rules: as a host record that disagrees.
            | Self::BadRecord { .. }
            // A `KPCCL_ASCEND` word that names no runtime: an invalid variable,
            // as `KPCCL_ASCEND_PID_VALIDATION`'s (a host `Config` error) is.
            | Self::Backend(BackendError::Unknown(_)) => ErrorKind::InvalidArgument,
            Self::Backend(_) => ErrorKind::DeviceRuntime,
        }
    }

    /// The ACL code behind the error, this rank's or the peer's, if there is one.
    pub fn acl_code(&self) -> Option<i32> {
        match self.failure()? {
            Failure::Acl { code, .. } => Some(code),
            _ => None,
        }
    }

    pub(crate) fn acl(call: Call, e: AclError) -> Self {
        Self::local(Failure::Acl { call, code: e.code(), peer: None })
    }

    /// `self`, a creation's error, naming the rank whose loss explains it when
    /// an out-of-band collective failed and the launcher said which rank left
    /// (as host windows do): "rank 2 died during device window creation …",
    /// not "out-of-band collective failed (code -5)".
    pub(crate) fn naming_lost_rank(self) -> Self {
        let oob = |code| kpccl_core::Failure::Oob(kpccl_core::OobError { code });
        let cause = match self {
            Self::Collective(Collective::Local(Failure::Oob(code))) => CollectiveError::Local(oob(code)),
            Self::Collective(Collective::Peer { rank, failure: Failure::Oob(code) }) => {
                CollectiveError::Peer { rank, failure: oob(code) }
            }
            _ => return self,
        };
        match kpccl_posix::launch::last_departure() {
            Some(departure) => {
                Self::Host(kpccl_posix::Error::RankLost { during: "device window creation", departure, cause })
            }
            None => self,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Host(e) => e.fmt(f),
            Self::Backend(e) => e.fmt(f),
            Self::Collective(e) => e.fmt(f),
            Self::OutOfBounds { rank, offset, len, size } => {
                write!(f, "{len} bytes at {offset} are outside rank {rank}'s device segment of {size} bytes")
            }
            Self::NegativeDevice { device } => write!(f, "device {device} is invalid: devices are numbered from 0"),
            Self::SizeTooLarge { size } => {
                write!(f, "a device segment of {size} bytes is more than an address space can map")
            }
            Self::MultiNode { nnodes } => write!(
                f,
                "the communicator spans {nnodes} nodes: device windows need a communicator of one node \
                 (device memory does not cross nodes)"
            ),
            Self::BadRecord { rank, flaw } => write!(
                f,
                "device window creation: rank {rank} {flaw} (a peer of another build, or a corrupted \
                 out-of-band exchange)"
            ),
            Self::SharedProcess { ranks: [a, b], tgid } => write!(
                f,
                "ranks {a} and {b} run in one process (tgid {tgid}): a device window needs each rank in a \
                 process of its own"
            ),
        }
    }
}

impl std::error::Error for Error {}

impl From<kpccl_posix::Error> for Error {
    fn from(e: kpccl_posix::Error) -> Self {
        Self::Host(e)
    }
}

impl From<BackendError> for Error {
    fn from(e: BackendError) -> Self {
        Self::Backend(e)
    }
}

impl From<Collective> for Error {
    fn from(e: Collective) -> Self {
        Self::Collective(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each failure a creation record can carry has the class its cause has,
    /// on the rank that failed and on the peers that learnt of it.
    #[test]
    fn a_creation_failure_has_its_causes_class_on_every_rank() {
        let acl = Failure::Acl { call: Call::ImportByKey, code: 507899, peer: Some(1) };
        for (failure, kind) in [
            (acl, ErrorKind::DeviceRuntime),
            (Failure::NoRuntime, ErrorKind::DeviceRuntime),
            (Failure::NoPeerAccess { peer: 1 }, ErrorKind::DeviceRuntime),
            (Failure::Argument, ErrorKind::InvalidArgument),
            (Failure::Oob(-5), ErrorKind::OutOfBand),
            (Failure::Unknown, ErrorKind::Internal),
        ] {
            assert_eq!(Error::local(failure).kind(), kind, "{failure:?} on this rank");
            assert_eq!(Error::Collective(Collective::Peer { rank: 2, failure }).kind(), kind, "{failure:?} on a peer");
        }
    }

    /// Rules a rank or its peer broke are bad arguments; a runtime that is
    /// not there is the device runtime's failure.
    #[test]
    fn broken_rules_are_invalid_arguments_and_a_missing_runtime_is_the_runtimes() {
        let flaw = RecordFlaw::NoKey { size: 4096 };
        for e in [
            Error::BadRecord { rank: 1, flaw },
            Error::NegativeDevice { device: -1 },
            Error::OutOfBounds { rank: 0, offset: 8, len: 8, size: 8 },
            Error::Backend(BackendError::Unknown("bogus".into())),
        ] {
            assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
        }
        let missing = Error::Backend(BackendError::SimulatorOnly("libascendcl.so".into()));
        assert_eq!(missing.kind(), ErrorKind::DeviceRuntime);
    }
}
