//! The CPUs this thread may run on, on a machine of any size: rustix's
//! `sched_getaffinity` passes a fixed 1024-CPU set, which the kernel refuses
//! (`EINVAL`) when it has more possible CPUs, and the mask was then unknown.
//! Here the set grows until the kernel's fits, as glibc's `CPU_ALLOC` lets
//! a program do.

use std::io;

use kpccl_core::{CPU_WORDS, CpuMask};

/// The largest set tried, in 64-bit words: 2^20 CPUs (Linux allows at most
/// 2^13 today, `CONFIG_NR_CPUS`).
const MAX_WORDS: usize = 1 << 14;

// A kernel CPU set is an array of `unsigned long`: `u64` words hold it bit
// for bit only where that is 64 bits, as on the targets this crate builds for.
const _: () = assert!(size_of::<libc::c_ulong>() == size_of::<u64>());

/// The CPUs this thread may run on, CPUs from 1024 up folded onto the
/// 1024 bits of a [`CpuMask`] (CPU `c` as `c % 1024`): the mask's count can
/// then only fall short, which makes waits hand the CPU over rather than
/// spin, and a thread bound to CPUs above 1023 still has a mask. Unknown if
/// the kernel will not say.
pub(crate) fn affinity() -> CpuMask {
    cpu_set().map_or(CpuMask::UNKNOWN, |set| fold(&set))
}

/// See [`crate::cpu_set`].
pub(crate) fn cpu_set() -> io::Result<Vec<u64>> {
    grow_until_fits(get)
}

/// This thread's affinity into `set` (`sched_getaffinity(0, ..)`).
fn get(set: &mut [u64]) -> io::Result<()> {
    let bytes = size_of_val(set);
    // SAFETY: `set` is writable for `bytes` bytes, the size passed; the
    // kernel writes at most that many, and a CPU set of any length is an
    // array of `unsigned long` (`u64` here: the assert above).
    #[allow(unsafe_code)]
    let rc = unsafe { libc::sched_getaffinity(0, bytes, set.as_mut_ptr().cast::<libc::cpu_set_t>()) };
    if rc == 0 { Ok(()) } else { Err(io::Error::last_os_error()) }
}

/// Calls `get` with a set of [`CPU_WORDS`] words (1024 CPUs), doubled while
/// the kernel says it is too small for its possible CPUs (`EINVAL`), up to
/// [`MAX_WORDS`]: the set it filled, or the error it gave otherwise, or one
/// naming the largest size refused.
fn grow_until_fits(mut get: impl FnMut(&mut [u64]) -> io::Result<()>) -> io::Result<Vec<u64>> {
    let mut words = CPU_WORDS;
    loop {
        let mut set = vec![0u64; words];
        match get(&mut set) {
            Ok(()) => return Ok(set),
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) && words < MAX_WORDS => words *= 2,
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
                let cpus = words * 64;
                return Err(io::Error::new(e.kind(), format!("the kernel refused a set of {cpus} CPUs: {e}")));
            }
            Err(e) => return Err(e),
        }
    }
}

/// `set` folded onto a [`CpuMask`]: word `i` or-ed into word `i % CPU_WORDS`.
fn fold(set: &[u64]) -> CpuMask {
    let mut mask = [0u64; CPU_WORDS];
    for (i, w) in set.iter().enumerate() {
        mask[i % CPU_WORDS] |= w;
    }
    CpuMask(mask)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A kernel of `cpus` possible CPUs that lets this thread run on `allowed`:
    /// `EINVAL` for a set too small for its CPUs, as Linux answers.
    fn kernel(cpus: usize, allowed: &[usize]) -> impl FnMut(&mut [u64]) -> io::Result<()> + '_ {
        move |set: &mut [u64]| {
            if set.len() * 64 < cpus {
                return Err(io::Error::from_raw_os_error(libc::EINVAL));
            }
            set.fill(0);
            for &c in allowed {
                set[c / 64] |= 1 << (c % 64);
            }
            Ok(())
        }
    }

    #[test]
    fn the_set_grows_until_the_kernels_cpus_fit() {
        let mut sizes = Vec::new();
        let mut k = kernel(4096, &[3, 1500, 4095]);
        let set = grow_until_fits(|s| {
            sizes.push(s.len());
            k(s)
        })
        .expect("4096 CPUs fit");
        assert_eq!(sizes, [16, 32, 64], "1024, 2048, then 4096 CPUs");
        assert_eq!(set.len(), 64);
        assert_eq!((set[0], set[1500 / 64], set[63]), (1 << 3, 1 << (1500 % 64), 1 << 63));
    }

    #[test]
    fn cpus_from_1024_up_fold_onto_the_mask() {
        let set = grow_until_fits(kernel(2048, &[1, 1025, 2047])).unwrap();
        let mask = fold(&set);
        // 1025 shares 1's bit: two CPUs counted as one, never more than there are.
        assert_eq!((mask.0[0], mask.0[15], mask.count()), (1 << 1, 1 << 63, 2));
        // Bound above 1023 only: still a mask, not an unknown one.
        assert_ne!(fold(&grow_until_fits(kernel(2048, &[1500])).unwrap()), CpuMask::UNKNOWN);
    }

    #[test]
    fn another_error_or_a_set_that_never_fits_is_an_error_naming_it() {
        let denied = grow_until_fits(|_| Err(io::Error::from_raw_os_error(libc::EPERM))).unwrap_err();
        assert_eq!(denied.raw_os_error(), Some(libc::EPERM));
        let mut calls = 0;
        let never = grow_until_fits(|_| {
            calls += 1;
            Err(io::Error::from_raw_os_error(libc::EINVAL))
        })
        .unwrap_err();
        assert_eq!(calls, 11, "16 to 16384 words, doubling");
        assert!(never.to_string().starts_with("the kernel refused a set of 1048576 CPUs: "), "{never}");
    }

    #[test]
    fn this_threads_affinity_is_known() {
        let mask = affinity();
        assert!(mask.count() >= 1, "{mask:?}");
        let fixed = rustix::thread::sched_getaffinity(None).expect("at most 1024 CPUs here");
        assert_eq!(mask.count(), fixed.count());
    }
}
