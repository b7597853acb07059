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
            // In the library's words for every refused variable.
            Self::Unknown(v) => {
                kpccl_posix::Error::Config { var: BACKEND_ENV, value: v.clone(), expected: EXPECTED }.fmt(f)
            }
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
    match choice()? {
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

/// The words `KPCCL_ASCEND` takes, and how a refusal names them.
const CHOICES: [(&str, Choice); 3] = [("acl", Choice::Acl), ("sim", Choice::Sim), ("auto", Choice::Auto)];
const EXPECTED: &str = "acl, sim or auto";

/// `KPCCL_ASCEND`'s value, read by the reader of every word-valued
/// `KPCCL_*` variable ([`kpccl_posix::env_choice`]): unset or empty is the
/// default, and anything else (spaces around a word, a value that is not
/// UTF-8) is refused rather than taken as unset.
fn choice() -> Result<Choice, BackendError> {
    match kpccl_posix::env_choice(BACKEND_ENV, &CHOICES, EXPECTED) {
        Ok(choice) => Ok(choice.unwrap_or(Choice::Auto)),
        Err(kpccl_posix::Error::Config { value, .. }) => Err(BackendError::Unknown(value)),
        // The reader refuses only values; should it fail otherwise, its words are kept.
        Err(other) => Err(BackendError::Unknown(other.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use std::ffi::OsStr;
    use std::os::unix::ffi::OsStrExt;

    use super::*;

    /// Set in the child that reads the choice.
    const CHILD_ENV: &str = "KPCCL_TEST_BACKEND_CHOICE_CHILD";
    const TEST: &str = "backend::tests::the_choice_is_read_as_the_library_reads_its_variables";

    /// What `choice()` makes of `KPCCL_ASCEND=value` (`None`: unset), read
    /// in a child of this test binary: this process's environment is left
    /// alone, as its other tests read it, some through C (`dlopen`).
    fn choice_with(value: Option<&OsStr>) -> String {
        let mut child = kpccl_posix::launch::runner::test_alone(TEST);
        child.arg("--nocapture").env(CHILD_ENV, "1");
        match value {
            Some(v) => child.env(BACKEND_ENV, v),
            None => child.env_remove(BACKEND_ENV),
        };
        let out = child.output().expect("run the child");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "the child failed ({value:?}): {}\n{stdout}", out.status);
        // On the harness's line of the test, after its name.
        let said = stdout.lines().find_map(|l| l.split_once("choice: ").map(|(_, said)| said));
        said.unwrap_or_else(|| panic!("the child said nothing ({value:?}):\n{stdout}")).to_owned()
    }

    /// Read as every word-valued `KPCCL_*` variable is (unset or empty: the
    /// default; a word as it is, spaces included; bytes that are not UTF-8
    /// refused): `" sim "` was taken as `sim`, where `KPCCL_LAYOUT=" aligned "`
    /// is refused.
    #[test]
    fn the_choice_is_read_as_the_library_reads_its_variables() {
        if std::env::var_os(CHILD_ENV).is_some() {
            let said = choice().map_or_else(|e| format!("refused: {e}"), |c| format!("{c:?}"));
            println!("choice: {said}");
            return;
        }
        assert_eq!(choice_with(None), "Auto");
        assert_eq!(choice_with(Some(OsStr::new(""))), "Auto");
        assert_eq!(choice_with(Some(OsStr::new("auto"))), "Auto");
        assert_eq!(choice_with(Some(OsStr::new("sim"))), "Sim");
        assert_eq!(choice_with(Some(OsStr::new("acl"))), "Acl");
        let refused = [
            (OsStr::new(" sim "), " sim "),
            (OsStr::new("Sim"), "Sim"),
            (OsStr::new("npu"), "npu"),
            // Shown as the library shows every such value: U+FFFD for the byte.
            (OsStr::from_bytes(b"sim\xff"), "sim\u{fffd}"),
        ];
        for (value, shown) in refused {
            let want = format!("refused: KPCCL_ASCEND={shown:?} is invalid: expected acl, sim or auto");
            assert_eq!(choice_with(Some(value)), want);
        }
    }
}
