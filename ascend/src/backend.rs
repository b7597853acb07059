//! Which device runtime a window uses: `KPCCL_ASCEND=acl|sim|auto`.

use std::fmt;
use std::sync::Arc;

use crate::acl::{AclBackend, LoadError};
use crate::runtime::AclRuntime;
use crate::sim::HostSim;

/// A device runtime shared by the windows of a process.
pub type Runtime = Arc<dyn AclRuntime + Send + Sync>;

/// The variable that chooses the runtime.
pub const BACKEND_ENV: &str = "KPCCL_ASCEND";

/// Why no runtime could be chosen.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum BackendError {
    /// `KPCCL_ASCEND` holds something else than `acl`, `sim` or `auto`.
    Unknown(String),
    /// `KPCCL_ASCEND=acl`, and `libascendcl.so` does not load.
    Load(LoadError),
    /// `auto`: no real runtime loads.
    Missing(LoadError),
    /// `auto`: the library found is the kpccl simulator (at this path), not CANN's.
    SimulatorOnly(String),
}

const HINT: &str = "set KPCCL_ASCEND=sim to use the host simulator";

impl fmt::Display for BackendError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Unknown(v) => write!(f, "{BACKEND_ENV}={v:?} is invalid: expected acl, sim or auto"),
            Self::Load(e) => write!(f, "{BACKEND_ENV}=acl: {e}"),
            Self::Missing(e) => write!(f, "no Ascend runtime ({e}); {HINT}"),
            Self::SimulatorOnly(lib) => write!(
                f,
                "no Ascend runtime: {lib} is the kpccl simulator library; {HINT} (or KPCCL_ASCEND=acl to go through it)"
            ),
        }
    }
}

impl std::error::Error for BackendError {}

/// The runtime `KPCCL_ASCEND` names (default `auto`):
/// - `sim`: the host simulator, in process;
/// - `acl`: whatever `libascendcl.so` loads, the simulator library included (it is a drop-in);
/// - `auto`: CANN's `libascendcl.so` if it loads, else an error that says how to
///   choose the simulator: a machine without NPUs never silently simulates them.
pub fn from_env() -> Result<Runtime, BackendError> {
    match choice(std::env::var_os(BACKEND_ENV).as_deref())? {
        Choice::Sim => Ok(Arc::new(HostSim::new())),
        Choice::Acl => AclBackend::load().map(|b| Arc::new(b) as Runtime).map_err(BackendError::Load),
        Choice::Auto => match AclBackend::load() {
            Ok(b) if b.api().is_simulator() => Err(BackendError::SimulatorOnly(b.api().library().to_owned())),
            Ok(b) => Ok(Arc::new(b)),
            Err(e) => Err(BackendError::Missing(e)),
        },
    }
}

/// What `KPCCL_ASCEND` asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Choice {
    Sim,
    Acl,
    Auto,
}

/// `KPCCL_ASCEND`'s value read as the `KPCCL_*` variables are: unset or
/// empty is the default, spaces around are dropped, and anything else (a
/// value that is not UTF-8 included) is refused rather than taken as unset.
fn choice(value: Option<&std::ffi::OsStr>) -> Result<Choice, BackendError> {
    let value = value.map(|v| v.to_string_lossy()).unwrap_or_default();
    match value.trim() {
        "sim" => Ok(Choice::Sim),
        "acl" => Ok(Choice::Acl),
        "" | "auto" => Ok(Choice::Auto),
        _ => Err(BackendError::Unknown(value.into_owned())),
    }
}

#[cfg(test)]
mod tests {
    use std::ffi::OsStr;
    use std::os::unix::ffi::OsStrExt;

    use super::*;

    /// Read as every `KPCCL_*` variable is: a value that is not UTF-8 was
    /// taken as unset (`auto`), and `" sim"` was refused.
    #[test]
    fn the_choice_is_read_as_the_library_reads_its_variables() {
        assert_eq!(choice(None).unwrap(), Choice::Auto);
        assert_eq!(choice(Some(OsStr::new(""))).unwrap(), Choice::Auto);
        assert_eq!(choice(Some(OsStr::new(" sim "))).unwrap(), Choice::Sim);
        assert_eq!(choice(Some(OsStr::new("acl"))).unwrap(), Choice::Acl);
        let e = choice(Some(OsStr::from_bytes(b"sim\xff"))).unwrap_err();
        assert!(matches!(e, BackendError::Unknown(_)), "{e:?}");
        let e = choice(Some(OsStr::new("npu"))).unwrap_err();
        assert_eq!(e.to_string(), "KPCCL_ASCEND=\"npu\" is invalid: expected acl, sim or auto");
    }
}
