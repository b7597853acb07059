//! The log level of the C library: `KPCCL_LOG`, read at the first call.

use std::sync::Once;

pub(crate) use kpccl_posix::log::{Level, log};

/// Reads `KPCCL_LOG` once per process, so that even calls made before any
/// communicator exists (e.g. `kpccl_error`) log at the level asked for.
/// Communicator creation reads it again with the rest of the configuration.
pub(crate) fn init() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let Some(value) = std::env::var("KPCCL_LOG").ok().filter(|v| !v.is_empty()) else { return };
        match value.parse::<Level>() {
            Ok(level) => kpccl_posix::log::set_level(level),
            Err(()) => log(
                Level::Warn,
                format_args!("KPCCL_LOG={value:?} is invalid: expected off, error, warn, info or debug"),
            ),
        }
    });
}
