//! A host simulator of the ACL IPC calls (`docs/ascend-ipc.md` §5): "device" memory is shared
//! memory, keys and whitelists live in a per-user registry shared by the processes of
//! the machine, and every call returns the codes the hardware does.
//!
//! Strict mode (`ASCEND_SIM_STRICT=1`, or [`HostSim::strict`]) refuses with 507022
//! what the hardware accepts and punishes later: the exporter closing or freeing
//! memory that importers still map.
//!
//! The chip model (`ASCEND_SIM_CHIP`, [`Chip`]) selects the per-product rules;
//! the copy rules of memory imported from another device hold on every model
//! (`docs/ascend-ipc.md`, "Rules of the reference page"). Streams run their copies
//! when synchronised. `ASCEND_SIM_COPY_LOG=<file>` appends a line per synchronous
//! copy that touches imported memory, and [`sync_import_copies`] counts them in
//! this process: the proof that a code path makes none.

mod chip;
mod copylog;
mod key;
#[allow(unsafe_code)]
mod mem;
mod procinfo;
#[allow(unsafe_code)]
mod registry;
#[allow(unsafe_code)]
mod state;
#[allow(unsafe_code)]
mod stream;

pub use chip::{CHIP_ENV, Chip};
pub use copylog::{COPY_LOG_ENV, sync_import_copies};
pub use registry::{LOCK_TIMEOUT_ENV, sweep};
pub use state::{Held, held, take_largest_malloc};

/// The simulated runtime. All instances of a process share its state, as the real
/// runtime's process-wide context does.
#[derive(Debug, Clone, Copy)]
pub struct HostSim {
    strict: bool,
    chip: Chip,
}

impl HostSim {
    /// The simulator, strict if `ASCEND_SIM_STRICT` is set to `1`, playing the chip
    /// `ASCEND_SIM_CHIP` names.
    pub fn new() -> Self {
        Self { strict: std::env::var("ASCEND_SIM_STRICT").is_ok_and(|v| v == "1"), chip: Chip::from_env() }
    }

    /// The simulator in strict mode, on an A2 chip.
    pub fn strict() -> Self {
        Self { strict: true, chip: Chip::A2 }
    }

    /// The simulator in faithful mode (what the hardware does), on an A2 chip.
    pub fn faithful() -> Self {
        Self { strict: false, chip: Chip::A2 }
    }

    /// The same simulator playing `chip`.
    pub fn with_chip(self, chip: Chip) -> Self {
        Self { chip, ..self }
    }

    /// The chip model.
    pub fn chip(&self) -> Chip {
        self.chip
    }

    /// Whether misuse is reported at once.
    pub fn is_strict(&self) -> bool {
        self.strict
    }
}

impl Default for HostSim {
    fn default() -> Self {
        Self::new()
    }
}

#[allow(unsafe_code)]
mod imp;

/// The variable that sets the number of simulated devices (default 8).
pub const DEVICES_ENV: &str = "ASCEND_SIM_DEVICES";

/// Number of simulated devices: `ASCEND_SIM_DEVICES`, default 8, at most
/// 65536 (the devices a context handle tells apart); another value is an
/// error (in the library's words for a bad `KPCCL_*` value), never the
/// default silently simulating another machine.
pub fn device_count() -> Result<i32, kpccl_posix::Error> {
    const EXPECTED: &str = "a device count (a whole number from 0 to 65536)";
    match kpccl_posix::env_parsed::<i32>(DEVICES_ENV, EXPECTED)? {
        None => Ok(8),
        Some(n) if (0..=1 << 16).contains(&n) => Ok(n),
        Some(n) => Err(kpccl_posix::Error::Config { var: DEVICES_ENV, value: n.to_string(), expected: EXPECTED }),
    }
}
