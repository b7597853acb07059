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
            Self::Unknown(v) => write!(f, "{BACKEND_ENV}={v:?}: expected acl, sim or auto"),
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
    let choice = std::env::var(BACKEND_ENV).unwrap_or_default();
    match choice.as_str() {
        "sim" => Ok(Arc::new(HostSim::new())),
        "acl" => AclBackend::load().map(|b| Arc::new(b) as Runtime).map_err(BackendError::Load),
        "" | "auto" => match AclBackend::load() {
            Ok(b) if b.api().is_simulator() => Err(BackendError::SimulatorOnly(b.api().library().to_owned())),
            Ok(b) => Ok(Arc::new(b)),
            Err(e) => Err(BackendError::Missing(e)),
        },
        other => Err(BackendError::Unknown(other.to_owned())),
    }
}
