//! A minimal stderr logger with a process-wide level (`KPCCL_LOG`).

use std::str::FromStr;
use std::sync::atomic::{AtomicU8, Ordering};

/// How much to log.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    /// Nothing.
    Off,
    /// Failures.
    Error,
    /// Failures and suspicious conditions.
    Warn,
    /// Also window creation and teardown.
    Info,
    /// Everything.
    Debug,
}

impl FromStr for Level {
    type Err = ();
    fn from_str(s: &str) -> Result<Self, ()> {
        Ok(match s.trim().to_ascii_lowercase().as_str() {
            "off" | "0" => Self::Off,
            "error" | "1" => Self::Error,
            "warn" | "2" => Self::Warn,
            "info" | "3" => Self::Info,
            "debug" | "4" => Self::Debug,
            _ => return Err(()),
        })
    }
}

// Relaxed: an independent setting; no other memory depends on it.
#[allow(clippy::disallowed_types)]
static LEVEL: AtomicU8 = AtomicU8::new(Level::Warn as u8);

/// Sets the process-wide level.
pub fn set_level(level: Level) {
    // Relaxed: see `LEVEL`.
    LEVEL.store(level as u8, Ordering::Relaxed);
}

/// Whether `level` is logged.
pub fn enabled(level: Level) -> bool {
    // Relaxed: see `LEVEL`.
    level != Level::Off && level as u8 <= LEVEL.load(Ordering::Relaxed)
}

/// Writes `message` to stderr if `level` is enabled.
pub fn log(level: Level, message: std::fmt::Arguments<'_>) {
    if enabled(level) {
        stderr_line(format_args!("{level:?}: {message}"));
    }
}

/// Writes `kpccl[PID] message` to stderr whatever the level (what was asked
/// for, such as `KPCCL_STATS`). One write per line: `eprintln!` writes the
/// pieces one by one, and ranks sharing a stderr (mpirun, kpccl-run)
/// interleaved them mid-line.
pub fn stderr_line(message: std::fmt::Arguments<'_>) {
    let line = format!("kpccl[{}] {message}\n", std::process::id());
    let _ = std::io::Write::write_all(&mut std::io::stderr().lock(), line.as_bytes());
}
