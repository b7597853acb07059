//! Window attributes for `kpccl_shm_win_alloc_ex`.

use core::ffi::c_int;
use core::time::Duration;

use kpccl_core::LayoutMode;
use kpccl_core::fence::Barrier;
use kpccl_posix::Reserve;

use crate::error::Error;
use crate::handle;

/// How the data segments of a window are placed.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum kpccl_shm_layout_t {
    /// `KPCCL_LAYOUT` from the environment, else contiguous.
    KPCCL_SHM_LAYOUT_DEFAULT = 0,
    /// Rank r's segment directly after rank r-1's (like `MPI_Win_allocate_shared`).
    KPCCL_SHM_LAYOUT_CONTIGUOUS = 1,
    /// Every segment on its own pages, first touched by its owner (NUMA-local).
    KPCCL_SHM_LAYOUT_ALIGNED = 2,
}

/// Where a window's data segments live.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum kpccl_shm_memory_kind_t {
    /// Host memory (POSIX shared memory).
    KPCCL_SHM_MEMORY_HOST = 0,
    /// Ascend NPU memory on device `attr.device`: segments are exported and
    /// imported with the ACL IPC calls (`KPCCL_ASCEND=acl|sim|auto` picks the
    /// runtime; `attr.pid_validation` whether keys carry a PID whitelist);
    /// queries return device addresses.
    KPCCL_SHM_MEMORY_ASCEND = 1,
}

/// What `kpccl_shm_win_attr_init` writes into `version`; any other value
/// (an attribute struct never initialized) is refused.
pub const KPCCL_SHM_WIN_ATTR_VERSION: u32 = 0x4b50_0003;

/// Whether the export keys of a device window admit only the window's ranks.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum kpccl_shm_pid_validation_t {
    /// Off if `KPCCL_ASCEND_PID_VALIDATION=0`, else on.
    KPCCL_SHM_PID_VALIDATION_DEFAULT = 0,
    /// Keys carry a whitelist of the ranks' bare tgids: no other process can import them.
    KPCCL_SHM_PID_VALIDATION_ON = 1,
    /// Keys are exported with `ACL_RT_IPC_MEM_EXPORT_FLAG_DISABLE_PID_VALIDATION`:
    /// any process of the machine that learns a key can import it.
    KPCCL_SHM_PID_VALIDATION_OFF = 2,
}

/// When a window's memory is allocated.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum kpccl_shm_reserve_t {
    /// `KPCCL_RESERVE` from the environment, else eager.
    KPCCL_SHM_RESERVE_DEFAULT = 0,
    /// At creation: a window that does not fit is an error on every rank, never a `SIGBUS` later.
    KPCCL_SHM_RESERVE_EAGER = 1,
    /// At first touch, like `MPI_Win_allocate_shared`, after a free-space check at creation.
    KPCCL_SHM_RESERVE_LAZY = 2,
}

/// How the window-wide fence runs; the window runs flat if any rank asks for it.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum kpccl_shm_barrier_t {
    /// `KPCCL_BARRIER` from the environment, else flat when ranks outnumber CPUs.
    KPCCL_SHM_BARRIER_DEFAULT = 0,
    /// ⌈log2 n⌉ rounds of pairwise hand-offs: the fastest while every rank has a CPU.
    KPCCL_SHM_BARRIER_DISSEMINATION = 1,
    /// One shared counter, one hand-off per rank: for more ranks than CPUs.
    KPCCL_SHM_BARRIER_FLAT = 2,
}

/// Options of one window. Initialize with `kpccl_shm_win_attr_init`, then
/// change the fields you need. Every rank must give the same layout and
/// alignment (and memory kind, and PID validation); timeout and spin count
/// are per rank. A device window (`KPCCL_SHM_MEMORY_ASCEND`) takes only
/// `timeout_ms`, `device` and `pid_validation`: any other field changed from
/// its default (layout, alignment, spin count, reserve, barrier) fails the
/// allocation on every rank, naming the field.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct kpccl_shm_win_attr_t {
    /// Set by `kpccl_shm_win_attr_init`; do not change.
    pub version: u32,
    /// A `kpccl_shm_layout_t` (host memory only).
    pub layout: c_int,
    /// The alignment of every segment: a power of two up to the page size,
    /// or 0 for the default (64) (host memory only).
    pub alignment: usize,
    /// Fence waits give up after this many milliseconds; 0 = never (a dead
    /// peer still ends them); -1 = `KPCCL_TIMEOUT_MS`, else never.
    pub timeout_ms: i64,
    /// Polls with a spin hint before yielding; -1 = `KPCCL_SPIN`, else chosen
    /// from the rank and CPU counts (host memory only).
    pub spin_count: i64,
    /// A `kpccl_shm_memory_kind_t`.
    pub memory_kind: c_int,
    /// The device of device memory (`KPCCL_SHM_MEMORY_ASCEND`: this rank's
    /// device id; host memory: 0).
    pub device: c_int,
    /// A `kpccl_shm_reserve_t` (per rank; host memory only).
    pub reserve: c_int,
    /// A `kpccl_shm_barrier_t` (host memory only).
    pub barrier: c_int,
    /// A `kpccl_shm_pid_validation_t` (device memory only).
    pub pid_validation: c_int,
}

// `Options::from_value` reads the enum fields by number: the memory kind as
// 0 (host) or 1 (device), every other one as 0 (the default), 1 or 2 in
// declaration order. The C values must stay those.
const _: () = {
    use kpccl_shm_barrier_t::*;
    use kpccl_shm_layout_t::*;
    use kpccl_shm_memory_kind_t::*;
    use kpccl_shm_pid_validation_t::*;
    use kpccl_shm_reserve_t::*;
    const fn in_order(codes: [c_int; 3]) -> bool {
        codes[0] == 0 && codes[1] == 1 && codes[2] == 2
    }
    assert!(in_order([KPCCL_SHM_LAYOUT_DEFAULT as _, KPCCL_SHM_LAYOUT_CONTIGUOUS as _, KPCCL_SHM_LAYOUT_ALIGNED as _]));
    assert!(in_order([KPCCL_SHM_RESERVE_DEFAULT as _, KPCCL_SHM_RESERVE_EAGER as _, KPCCL_SHM_RESERVE_LAZY as _]));
    assert!(in_order([
        KPCCL_SHM_BARRIER_DEFAULT as _,
        KPCCL_SHM_BARRIER_DISSEMINATION as _,
        KPCCL_SHM_BARRIER_FLAT as _
    ]));
    assert!(in_order([
        KPCCL_SHM_PID_VALIDATION_DEFAULT as _,
        KPCCL_SHM_PID_VALIDATION_ON as _,
        KPCCL_SHM_PID_VALIDATION_OFF as _,
    ]));
    assert!(KPCCL_SHM_MEMORY_HOST as c_int == 0 && KPCCL_SHM_MEMORY_ASCEND as c_int == 1);
};

/// The defaults: layout and timeout from the environment, alignment 64, host memory.
const DEFAULT: kpccl_shm_win_attr_t = kpccl_shm_win_attr_t {
    version: KPCCL_SHM_WIN_ATTR_VERSION,
    layout: kpccl_shm_layout_t::KPCCL_SHM_LAYOUT_DEFAULT as c_int,
    alignment: 0,
    timeout_ms: -1,
    spin_count: -1,
    memory_kind: kpccl_shm_memory_kind_t::KPCCL_SHM_MEMORY_HOST as c_int,
    device: 0,
    reserve: kpccl_shm_reserve_t::KPCCL_SHM_RESERVE_DEFAULT as c_int,
    barrier: kpccl_shm_barrier_t::KPCCL_SHM_BARRIER_DEFAULT as c_int,
    pid_validation: kpccl_shm_pid_validation_t::KPCCL_SHM_PID_VALIDATION_DEFAULT as c_int,
};

/// Fills `attr` with the defaults.
///
/// # Safety
/// `attr` is `NULL` (an error) or valid for writes of a `kpccl_shm_win_attr_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn kpccl_shm_win_attr_init(attr: *mut kpccl_shm_win_attr_t) -> c_int {
    ffi_boundary!("kpccl_shm_win_attr_init", {
        let attr = handle::out(attr, "attr")?;
        // SAFETY: checked not NULL and aligned; writable by the caller's contract.
        unsafe { attr.as_ptr().write(DEFAULT) };
        Ok(())
    })
}

/// The window options an attribute struct asks for; `None` keeps the communicator's default.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Options {
    pub(crate) layout: Option<LayoutMode>,
    pub(crate) align: Option<usize>,
    pub(crate) timeout: Option<Option<Duration>>,
    pub(crate) spins: Option<u32>,
    /// `Some(device)` for Ascend device memory.
    pub(crate) device: Option<i32>,
    pub(crate) reserve: Option<Reserve>,
    pub(crate) barrier: Option<Barrier>,
    /// Whether device-window keys carry a PID whitelist.
    pub(crate) pid_validation: Option<bool>,
}

impl Options {
    /// The host window's part of the options.
    pub(crate) fn window(&self) -> kpccl_posix::WindowOptions {
        let Self { layout, align, timeout, spins, reserve, barrier, .. } = *self;
        kpccl_posix::WindowOptions { layout, align, timeout, spins, reserve, barrier }
    }
}

impl Options {
    /// Reads and checks `attr` (`NULL`: the defaults).
    ///
    /// # Safety
    /// `attr` is `NULL` or points to a readable `kpccl_shm_win_attr_t`.
    pub(crate) unsafe fn from_attr(attr: *const kpccl_shm_win_attr_t) -> Result<Self, Error> {
        if attr.is_null() {
            return Ok(Self::default());
        }
        if !attr.is_aligned() {
            return Err(Error::Misaligned("attr"));
        }
        // SAFETY: not NULL, aligned, readable by the caller's contract; all
        // fields are plain integers, valid for any bits.
        let a = unsafe { attr.read() };
        Self::from_value(&a)
    }

    fn from_value(a: &kpccl_shm_win_attr_t) -> Result<Self, Error> {
        fn invalid<T>(arg: &'static str, why: &'static str) -> Result<T, Error> {
            Err(Error::Invalid { arg, why })
        }
        /// An enum field: 0 keeps the default, 1 and 2 are `choices`.
        fn choice<T: Copy>(
            code: c_int,
            choices: [T; 2],
            arg: &'static str,
            why: &'static str,
        ) -> Result<Option<T>, Error> {
            match code {
                0 => Ok(None),
                1 => Ok(Some(choices[0])),
                2 => Ok(Some(choices[1])),
                _ => invalid(arg, why),
            }
        }
        if a.version != KPCCL_SHM_WIN_ATTR_VERSION {
            return invalid("attr", "not initialized with kpccl_shm_win_attr_init");
        }
        let layout = choice(
            a.layout,
            [LayoutMode::Contiguous, LayoutMode::Aligned],
            "attr->layout",
            "not a kpccl_shm_layout_t",
        )?;
        let device = match a.memory_kind {
            0 if a.device != 0 => return invalid("attr->device", "only for device memory; must be 0"),
            0 => None,
            1 if a.device < 0 => return invalid("attr->device", "negative"),
            1 => Some(a.device),
            _ => return invalid("attr->memory_kind", "not a kpccl_shm_memory_kind_t"),
        };
        let timeout = match a.timeout_ms {
            -1 => None,
            0 => Some(None),
            ms if ms > 0 => Some(Some(Duration::from_millis(ms.unsigned_abs()))),
            _ => return invalid("attr->timeout_ms", "negative (use -1 for the default, 0 for never)"),
        };
        let spins = match a.spin_count {
            -1 => None,
            n => Some(u32::try_from(n).or_else(|_| invalid("attr->spin_count", "not -1 or in 0..=4294967295"))?),
        };
        let reserve = choice(a.reserve, [Reserve::Eager, Reserve::Lazy], "attr->reserve", "not a kpccl_shm_reserve_t")?;
        let barrier =
            choice(a.barrier, [Barrier::Dissemination, Barrier::Flat], "attr->barrier", "not a kpccl_shm_barrier_t")?;
        let pid_validation =
            choice(a.pid_validation, [true, false], "attr->pid_validation", "not a kpccl_shm_pid_validation_t")?;
        if pid_validation.is_some() && device.is_none() {
            return invalid("attr->pid_validation", "only for device memory");
        }
        let align = (a.alignment != 0).then_some(a.alignment);
        // A device window places its segments itself and fences with the
        // defaults: a host-memory option it would silently ignore is refused.
        if device.is_some() {
            let host_only = "only for host memory: must be left at the default for KPCCL_SHM_MEMORY_ASCEND";
            let set = [
                ("attr->layout", layout.is_some()),
                ("attr->alignment", align.is_some()),
                ("attr->spin_count", spins.is_some()),
                ("attr->reserve", reserve.is_some()),
                ("attr->barrier", barrier.is_some()),
            ];
            if let Some((arg, _)) = set.into_iter().find(|(_, set)| *set) {
                return invalid(arg, host_only);
            }
        }
        Ok(Self { layout, align, timeout, spins, device, reserve, barrier, pid_validation })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_change_nothing() {
        assert_eq!(Options::from_value(&DEFAULT).unwrap(), Options::default());
    }

    #[test]
    fn fields_are_checked() {
        let bad = |f: fn(&mut kpccl_shm_win_attr_t)| {
            let mut a = DEFAULT;
            f(&mut a);
            Options::from_value(&a).is_err()
        };
        assert!(bad(|a| a.version = 0));
        assert!(bad(|a| a.layout = 3));
        assert!(bad(|a| a.memory_kind = 2));
        assert!(bad(|a| a.memory_kind = -1));
        assert!(bad(|a| (a.memory_kind, a.device) = (1, -1)));
        assert!(bad(|a| a.timeout_ms = -2));
        assert!(bad(|a| a.spin_count = 1 << 33));
        assert!(bad(|a| a.device = 1));
        assert!(bad(|a| a.reserve = 3));
        assert!(bad(|a| a.barrier = -1));
        assert!(bad(|a| a.pid_validation = 1), "PID validation is for device memory only");
        assert!(bad(|a| (a.memory_kind, a.pid_validation) = (1, 3)));
        assert!(!bad(|a| (a.memory_kind, a.pid_validation) = (1, 2)));
        assert!(!bad(|a| a.timeout_ms = 5));
        assert!(!bad(|a| (a.memory_kind, a.device) = (1, 3)));
        assert!(!bad(|a| (a.memory_kind, a.timeout_ms) = (1, 5)), "device windows time out too");
    }

    #[test]
    fn device_memory_refuses_host_only_options() {
        let device = |f: fn(&mut kpccl_shm_win_attr_t)| {
            let mut a = kpccl_shm_win_attr_t { memory_kind: 1, ..DEFAULT };
            f(&mut a);
            match Options::from_value(&a) {
                Err(Error::Invalid { arg, why }) => Some((arg, why)),
                _ => None,
            }
        };
        assert_eq!(device(|_| {}), None);
        let why = "only for host memory: must be left at the default for KPCCL_SHM_MEMORY_ASCEND";
        assert_eq!(device(|a| a.layout = 2), Some(("attr->layout", why)));
        assert_eq!(device(|a| a.alignment = 128), Some(("attr->alignment", why)));
        assert_eq!(device(|a| a.spin_count = 0), Some(("attr->spin_count", why)));
        assert_eq!(device(|a| a.reserve = 1), Some(("attr->reserve", why)));
        assert_eq!(device(|a| a.barrier = 2), Some(("attr->barrier", why)));
        // An invalid value is still named as such.
        assert_eq!(device(|a| a.layout = 7), Some(("attr->layout", "not a kpccl_shm_layout_t")));
    }

    #[test]
    fn options_are_read() {
        let a = kpccl_shm_win_attr_t {
            layout: 2,
            alignment: 4096,
            timeout_ms: 7,
            spin_count: 3,
            reserve: 2,
            barrier: 2,
            ..DEFAULT
        };
        let o = Options::from_value(&a).unwrap();
        assert_eq!((o.reserve, o.barrier), (Some(Reserve::Lazy), Some(Barrier::Flat)));
        assert_eq!(o.layout, Some(LayoutMode::Aligned));
        assert_eq!(o.align, Some(4096));
        assert_eq!(o.timeout, Some(Some(Duration::from_millis(7))));
        assert_eq!(o.spins, Some(3));
    }
}
