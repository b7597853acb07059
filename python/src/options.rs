//! The options of `Comm.alloc`, checked before the collective: a rank whose
//! options are bad still takes part (refused), so that every rank fails
//! together instead of waiting for it.

use std::time::Duration;

use kpccl_core::fence::Barrier;
use kpccl_core::{LayoutMode, RankOutOfRange};
use kpccl_posix::{Reserve, WindowOptions};
use pyo3::exceptions::{PyOverflowError, PyTypeError};
use pyo3::prelude::*;
use pyo3::types::PyBytes;

/// Where a window's segments live.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Memory {
    /// POSIX shared memory.
    Host,
    /// Ascend device memory (or the host simulator's).
    Ascend,
}

/// `Comm.alloc`'s arguments, checked.
#[derive(Debug, Default)]
pub(crate) struct Alloc {
    pub(crate) size: usize,
    /// The host window's options (`timeout` also serves device windows;
    /// `spins` is never set from Python).
    pub(crate) window: WindowOptions,
    pub(crate) memory: Option<Memory>,
    pub(crate) device: Option<i32>,
    pub(crate) pid_validation: Option<bool>,
}

/// The raw arguments, as Python passed them.
#[derive(Debug)]
pub(crate) struct Raw<'py> {
    pub(crate) nbytes: Bound<'py, PyAny>,
    pub(crate) layout: Option<Bound<'py, PyAny>>,
    pub(crate) align: Option<Bound<'py, PyAny>>,
    pub(crate) reserve: Option<Bound<'py, PyAny>>,
    pub(crate) barrier: Option<Bound<'py, PyAny>>,
    pub(crate) timeout: Option<Bound<'py, PyAny>>,
    pub(crate) memory: Option<Bound<'py, PyAny>>,
    pub(crate) device: Option<Bound<'py, PyAny>>,
    pub(crate) pid_validation: Option<Bound<'py, PyAny>>,
}

fn word<T: Copy>(v: &Bound<'_, PyAny>, what: &str, choices: &[(&str, T)]) -> Result<T, String> {
    let names: Vec<&str> = choices.iter().map(|(n, _)| *n).collect();
    let bad = || format!("{what} must be one of {names:?}, not {v}");
    let s: String = v.extract().map_err(|_| bad())?;
    choices.iter().find(|(n, _)| *n == s).map(|(_, t)| *t).ok_or_else(bad)
}

/// An int argument, as read for a check.
enum Int {
    /// Its value.
    Fits(i128),
    /// An int past `i128` (Python's have no bound), as it is printed: out
    /// of range of anything a rank or size can be.
    Huge(String),
}

/// `v` as an [`Int`], or what is wrong with it ("`what` must be an int, not float").
fn int_of(v: &Bound<'_, PyAny>, what: &str) -> Result<Int, String> {
    match v.extract::<i128>() {
        Ok(n) => Ok(Int::Fits(n)),
        // An int too large to read is still an int: not "must be an int, not int".
        Err(e) if e.is_instance_of::<PyOverflowError>(v.py()) => Ok(Int::Huge(printed(v))),
        Err(_) => Err(format!("{what} must be an int, not {}", type_name(v))),
    }
}

/// The decimal digits of the int `v`, or its size where Python refuses to
/// print that many (past 4300 digits by default).
fn printed(v: &Bound<'_, PyAny>) -> String {
    v.str().map(|s| s.to_string()).unwrap_or_else(|_| {
        let bits = v.call_method0("bit_length").and_then(|b| b.extract::<u64>()).unwrap_or(0);
        format!("(an int of {bits} bits)")
    })
}

/// A non-negative integer that fits `T`.
pub(crate) fn count<T: TryFrom<u64>>(v: &Bound<'_, PyAny>, what: &str) -> Result<T, String> {
    let out_of_range = |n: &dyn std::fmt::Display| format!("{what} = {n} is out of range");
    match int_of(v, what)? {
        Int::Fits(n) => u64::try_from(n).ok().and_then(|n| T::try_from(n).ok()).ok_or_else(|| out_of_range(&n)),
        Int::Huge(digits) => Err(out_of_range(&digits)),
    }
}

/// A 32-bit signed integer (a device, a pid), refused naming the value:
/// "device_id = 1099511627776 is out of range: …", "pid must be an int, not str".
pub(crate) fn signed(v: &Bound<'_, PyAny>, what: &str) -> Result<i32, String> {
    let out_of_range =
        |n: &dyn std::fmt::Display| format!("{what} = {n} is out of range: {} to {}", i32::MIN, i32::MAX);
    match int_of(v, what)? {
        Int::Fits(n) => i32::try_from(n).map_err(|_| out_of_range(&n)),
        Int::Huge(digits) => Err(out_of_range(&digits)),
    }
}

/// A rank (or another index) in `0..end`, refused in the words the C API
/// uses: "rank 3 is out of range: this window has ranks 0 to 2" (`whose`:
/// "this window", "the communicator"), never Rust's half-open `0..3`, which
/// reads as if 3 were in it.
pub(crate) fn index(v: &Bound<'_, PyAny>, what: &str, end: u32, whose: &str) -> Result<u32, String> {
    match int_of(v, what)? {
        Int::Fits(n) => match u32::try_from(n) {
            Ok(i) if i < end => Ok(i),
            _ => Err(RankOutOfRange { what, value: n, whose, nranks: end }.to_string()),
        },
        Int::Huge(digits) => Err(RankOutOfRange { what, value: digits, whose, nranks: end }.to_string()),
    }
}

/// The bytes of `v`, an object with the buffer protocol (bytes, bytearray,
/// memoryview, a numpy array), copied; a `TypeError` saying "`what` a
/// bytes-like object …, not int" for anything else, which `bytes()` would
/// take all the same (an int `n` is `n` zero bytes, a list of ints those bytes).
pub(crate) fn bytes_like(v: &Bound<'_, PyAny>, what: &str) -> PyResult<Vec<u8>> {
    if let Ok(b) = v.cast::<PyBytes>() {
        return Ok(b.as_bytes().to_vec());
    }
    let view = v.py().import("builtins")?.getattr("memoryview")?.call1((v,)).map_err(|_| {
        PyTypeError::new_err(format!(
            "{what} a bytes-like object (bytes, bytearray, memoryview, a numpy array), not {}",
            type_name(v)
        ))
    })?;
    view.call_method0("tobytes")?.extract()
}

pub(crate) fn type_name(v: &Bound<'_, PyAny>) -> String {
    v.get_type().name().map_or_else(|_| "?".to_owned(), |n| n.to_string())
}

fn seconds(v: &Bound<'_, PyAny>) -> Result<Option<Duration>, String> {
    let too_long = |s: &dyn std::fmt::Display| {
        format!("timeout = {s} seconds is out of range: at most {} (0: never)", Duration::MAX.as_secs())
    };
    let s: f64 = v.extract().map_err(|e: PyErr| {
        // An int past a float's range is a number all the same.
        if e.is_instance_of::<PyOverflowError>(v.py()) {
            too_long(&printed(v))
        } else {
            format!("timeout must be a number of seconds, not {}", type_name(v))
        }
    })?;
    match s {
        0.0 => Ok(None),
        s if !s.is_finite() => Err(format!("timeout must be a finite number of seconds, not {s}")),
        s if s > 0.0 => Duration::try_from_secs_f64(s).map(Some).map_err(|_| too_long(&s)),
        s => Err(format!("timeout must be > 0 seconds (0: never), not {s}")),
    }
}

impl Raw<'_> {
    /// The checked options, or what is wrong with them.
    pub(crate) fn check(&self) -> Result<Alloc, String> {
        fn opt<'py>(v: &Option<Bound<'py, PyAny>>) -> Option<Bound<'py, PyAny>> {
            v.as_ref().filter(|v| !v.is_none()).cloned()
        }
        let mut a = Alloc { size: count(&self.nbytes, "nbytes")?, ..Alloc::default() };
        if let Some(v) = opt(&self.layout) {
            a.window.layout =
                Some(word(&v, "layout", &[("contiguous", LayoutMode::Contiguous), ("aligned", LayoutMode::Aligned)])?);
        }
        if let Some(v) = opt(&self.align) {
            let n: usize = count(&v, "align")?;
            if !n.is_power_of_two() {
                return Err(format!("align must be a power of two, not {n}"));
            }
            a.window.align = Some(n);
        }
        if let Some(v) = opt(&self.reserve) {
            a.window.reserve = Some(word(&v, "reserve", &[("eager", Reserve::Eager), ("lazy", Reserve::Lazy)])?);
        }
        if let Some(v) = opt(&self.barrier) {
            a.window.barrier =
                Some(word(&v, "barrier", &[("dissemination", Barrier::Dissemination), ("flat", Barrier::Flat)])?);
        }
        if let Some(v) = opt(&self.timeout) {
            a.window.timeout = Some(seconds(&v)?);
        }
        if let Some(v) = opt(&self.memory) {
            a.memory = Some(word(&v, "memory", &[("host", Memory::Host), ("ascend", Memory::Ascend)])?);
        }
        if let Some(v) = opt(&self.device) {
            let d: u32 = count(&v, "device")?;
            a.device = Some(i32::try_from(d).map_err(|_| format!("device = {d} is out of range"))?);
        }
        if let Some(v) = opt(&self.pid_validation) {
            a.pid_validation = Some(v.extract().map_err(|_| "pid_validation must be a bool".to_owned())?);
        }
        let ascend = a.memory == Some(Memory::Ascend);
        if !ascend && (a.device.is_some() || a.pid_validation.is_some()) {
            return Err("device and pid_validation are options of memory=\"ascend\" windows".to_owned());
        }
        let w = &a.window;
        if ascend && (w.layout.is_some() || w.align.is_some() || w.reserve.is_some() || w.barrier.is_some()) {
            return Err("layout, align, reserve and barrier are options of host windows".to_owned());
        }
        Ok(a)
    }
}

impl Raw<'_> {
    /// Whether the caller asked for device memory (whatever else is wrong).
    pub(crate) fn memory_is_ascend(&self) -> bool {
        self.memory.as_ref().and_then(|m| m.extract::<String>().ok()).is_some_and(|m| m == "ascend")
    }
}
