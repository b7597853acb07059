//! Options of communicators and windows, and the `KPCCL_*` environment
//! variables that set their defaults (listed in [`ENVIRONMENT`](crate::ENVIRONMENT)).

use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

use kpccl_core::LayoutMode;
use kpccl_core::fence::Barrier;

use crate::Error;
use crate::log::Level;
use crate::platform::{DEFAULT_SHM_DIR, Reserve};

/// Communicator-wide defaults, normally read from the environment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    /// Directory for segments.
    pub shm_dir: PathBuf,
    /// Default layout mode of windows.
    pub layout: LayoutMode,
    /// Fence wait timeout; `None` waits until the peer arrives or dies.
    pub timeout: Option<Duration>,
    /// Spin count before yielding (`None`: chosen from ranks and CPUs).
    pub spins: Option<u32>,
    /// How long to keep yielding before sleeping (`None`: chosen from ranks and CPUs).
    pub yield_time: Option<Duration>,
    /// The window fence this rank asks for (`None`: chosen from ranks and CPUs).
    pub barrier: Option<Barrier>,
    /// When windows' memory is allocated.
    pub reserve: Reserve,
    /// Liveness check interval of a sleeping waiter (at least a millisecond
    /// is used: at 0 a sleeping wait would read `/proc` in a loop).
    pub liveness: Duration,
    /// Log level.
    pub log: Level,
    /// Whether windows keep counters of their calls (`KPCCL_STATS=1`).
    pub stats: bool,
    /// Whether windows may use light wake-ups (`KPCCL_LIGHT_WAKES`; see
    /// `kpccl_core::Platform::register_global_heavy_fence`).
    pub light_wakes: bool,
    /// The node this process says it runs on (`KPCCL_NODE_ID`), overriding
    /// the boot id, hostname and pid namespace, so that tests can simulate several nodes on
    /// one machine; each such node keeps its segments in a directory of its own.
    pub node_id: Option<String>,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            shm_dir: PathBuf::from(DEFAULT_SHM_DIR),
            layout: LayoutMode::Contiguous,
            timeout: None,
            spins: None,
            yield_time: None,
            barrier: None,
            reserve: Reserve::Eager,
            liveness: Duration::from_millis(50),
            log: Level::Warn,
            stats: false,
            light_wakes: false,
            node_id: None,
        }
    }
}

/// `name`'s value, if it is set and not empty. One that is not UTF-8 comes
/// lossily converted (its bytes as `U+FFFD`), for its parser to refuse: read
/// as unset, it dropped a timeout or a node's name without a word.
fn var(name: &'static str) -> Option<String> {
    std::env::var_os(name).map(|v| v.to_string_lossy().into_owned()).filter(|v| !v.is_empty())
}

/// Whether `name` is set to a value that is not UTF-8.
fn not_utf8(name: &'static str) -> bool {
    std::env::var_os(name).is_some_and(|v| v.to_str().is_none())
}

fn invalid(var: &'static str, value: String, expected: &'static str) -> Error {
    Error::Config { var, value, expected }
}

/// `name`'s value read as a `T`, if it is set: the one reading of the
/// `KPCCL_*` numbers, the launcher's client's and the Ascend simulator's
/// variables included (so all refuse alike, in the same words).
pub fn env_parsed<T: FromStr>(name: &'static str, expected: &'static str) -> Result<Option<T>, Error> {
    var(name).map(|v| v.trim().parse().map_err(|_| invalid(name, v, expected))).transpose()
}

/// `name`'s value in milliseconds, if it is set.
pub(crate) fn millis(name: &'static str) -> Result<Option<u64>, Error> {
    env_parsed(name, "milliseconds (a whole number from 0)")
}

/// The value `choices` gives `name`'s word, if it is set: the one reading
/// of the word-valued `KPCCL_*` variables, the Ascend backend's included
/// (so all refuse alike, in the same words). The word is taken as it is,
/// spaces included; an empty value is unset.
pub fn env_choice<T: Copy>(
    name: &'static str,
    choices: &[(&str, T)],
    expected: &'static str,
) -> Result<Option<T>, Error> {
    var(name)
        .map(|v| match choices.iter().find(|&&(word, _)| word == v) {
            Some(&(_, value)) => Ok(value),
            None => Err(invalid(name, v, expected)),
        })
        .transpose()
}

impl Config {
    /// The defaults, overridden by the `KPCCL_*` variables that are set.
    pub fn from_env() -> Result<Self, Error> {
        let mut c = Self::default();
        // A path, whatever its bytes.
        if let Some(dir) = std::env::var_os("KPCCL_SHM_DIR").filter(|d| !d.is_empty()) {
            c.shm_dir = PathBuf::from(dir);
        }
        let layouts = [("contiguous", LayoutMode::Contiguous), ("aligned", LayoutMode::Aligned)];
        if let Some(layout) = env_choice("KPCCL_LAYOUT", &layouts, "contiguous or aligned")? {
            c.layout = layout;
        }
        if let Some(ms) = millis("KPCCL_TIMEOUT_MS")? {
            c.timeout = (ms > 0).then(|| Duration::from_millis(ms));
        }
        if let Some(spins) = env_parsed("KPCCL_SPIN", "a spin count (a whole number from 0 to 4294967295)")? {
            c.spins = Some(spins);
        }
        if let Some(us) = env_parsed("KPCCL_YIELD_US", "microseconds (a whole number from 0)")? {
            c.yield_time = Some(Duration::from_micros(us));
        }
        let barriers = [("auto", None), ("dissemination", Some(Barrier::Dissemination)), ("flat", Some(Barrier::Flat))];
        if let Some(barrier) = env_choice("KPCCL_BARRIER", &barriers, "auto, dissemination or flat")? {
            c.barrier = barrier;
        }
        let reserves = [("eager", Reserve::Eager), ("lazy", Reserve::Lazy)];
        if let Some(reserve) = env_choice("KPCCL_RESERVE", &reserves, "eager or lazy")? {
            c.reserve = reserve;
        }
        if let Some(ms) = millis("KPCCL_LIVENESS_MS")? {
            c.liveness = Duration::from_millis(ms.max(1));
        }
        if let Some(stats) = env_flag("KPCCL_STATS")? {
            c.stats = stats;
        }
        if let Some(light) = env_flag("KPCCL_LIGHT_WAKES")? {
            c.light_wakes = light;
        }
        if let Some(v) = var("KPCCL_NODE_ID") {
            // Not UTF-8: two names would read alike once converted.
            if v.len() > 255 || v.contains('\0') || not_utf8("KPCCL_NODE_ID") {
                return Err(invalid("KPCCL_NODE_ID", v, "a node name of at most 255 bytes of UTF-8"));
            }
            c.node_id = Some(v);
        }
        if let Some(log) = log_level()? {
            c.log = log;
        }
        Ok(c)
    }
}

/// `name`'s value as a switch, if it is set: `0` (off) or `1` (on); any
/// other value is refused, never read as off.
pub fn env_flag(name: &'static str) -> Result<Option<bool>, Error> {
    env_choice(name, &[("0", false), ("1", true)], "0 or 1")
}

/// `KPCCL_LOG`'s level, if it is set: also read alone, so that a refused
/// other variable is reported (or not) at the level asked for.
pub(crate) fn log_level() -> Result<Option<Level>, Error> {
    env_parsed("KPCCL_LOG", "off, error, warn, info or debug")
}
