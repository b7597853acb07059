//! The static memory segments come from: a slice of pages in a `static`,
//! and a small table of named extents, first fit.

use core::ptr::NonNull;
use core::sync::atomic::{AtomicU64, Ordering::Relaxed};

use heapless::String;
use kpccl_core::error::{PlatformError, PlatformOp};
use spin::Mutex;

/// The page size of the arena (and of the windows made in it).
pub const PAGE: usize = 4096;
/// Segments (live or unlinked-but-mapped) an arena holds at once.
const SLOTS: usize = 8;
/// The longest segment name.
const NAME: usize = 96;

const EEXIST: i64 = 17;
const ENOENT: i64 = 2;
const ENOMEM: i64 = 12;
const ENAMETOOLONG: i64 = 36;

/// One page of arena memory. Atomics, so that memory reached through a
/// shared reference may be written by every rank (it is all interior
/// mutability; the windows' fences order the plain accesses).
#[repr(C, align(4096))]
#[derive(Debug)]
pub struct Page([AtomicU64; PAGE / 8]);

impl Page {
    /// A zeroed page, for `static` arrays: `[const { Page::new() }; N]`.
    #[must_use]
    pub const fn new() -> Self {
        Self([const { AtomicU64::new(0) }; PAGE / 8])
    }

    fn zero(&self) {
        // Relaxed: the segment reaches other ranks only through the
        // out-of-band collectives, whose barrier orders these stores.
        self.0.iter().for_each(|w| w.store(0, Relaxed));
    }
}

impl Default for Page {
    fn default() -> Self {
        Self::new()
    }
}

/// A segment's place in the arena.
#[derive(Debug)]
struct Slot {
    name: String<NAME>,
    first: usize,
    pages: usize,
    /// Still reachable by name (not unlinked).
    named: bool,
    /// Mappings (segments) still alive.
    maps: u32,
}

impl Slot {
    fn in_use(&self) -> bool {
        self.named || self.maps > 0
    }
}

/// Static memory carved into named segments, like a tiny `/dev/shm`: a name
/// exists until unlinked, its pages until the last mapping is dropped too.
#[derive(Debug)]
pub struct Arena {
    pages: &'static [Page],
    slots: Mutex<[Option<Slot>; SLOTS]>,
}

impl Arena {
    /// An arena over `pages` (a `static` array).
    #[must_use]
    pub const fn new(pages: &'static [Page]) -> Self {
        Self { pages, slots: Mutex::new([const { None }; SLOTS]) }
    }

    /// Creates segment `name` of `len` bytes (zeroed), mapped once.
    pub(crate) fn create(&self, name: &str, len: u64) -> Result<(usize, NonNull<u8>, usize), PlatformError> {
        let err = |code| PlatformError { op: PlatformOp::Create, code };
        let mut slots = self.slots.lock();
        if slots.iter().flatten().any(|s| s.named && s.name == name) {
            return Err(err(EEXIST));
        }
        let name = String::try_from(name).map_err(|_| err(ENAMETOOLONG))?;
        let pages = usize::try_from(len).map_err(|_| err(ENOMEM))?.div_ceil(PAGE).max(1);
        let first = self.first_fit(&*slots, pages).ok_or(err(ENOMEM))?;
        let index = slots.iter().position(Option::is_none).ok_or(err(ENOMEM))?;
        self.pages[first..first + pages].iter().for_each(Page::zero);
        slots[index] = Some(Slot { name, first, pages, named: true, maps: 1 });
        Ok((index, self.base(first, pages), pages * PAGE))
    }

    /// Maps segment `name` once more, if it is `len` bytes long.
    pub(crate) fn open(&self, name: &str, len: u64) -> Result<(usize, NonNull<u8>, usize), PlatformError> {
        let mut slots = self.slots.lock();
        let (index, slot) = slots
            .iter_mut()
            .enumerate()
            .find_map(|(i, s)| s.as_mut().filter(|s| s.named && s.name == name).map(|s| (i, s)))
            .ok_or(PlatformError { op: PlatformOp::Open, code: ENOENT })?;
        let have = (slot.pages * PAGE) as u64;
        if have != len {
            return Err(PlatformError { op: PlatformOp::Size, code: i64::try_from(have).unwrap_or(i64::MAX) });
        }
        slot.maps += 1;
        Ok((index, self.base(slot.first, slot.pages), slot.pages * PAGE))
    }

    /// Removes `name`; its pages go when its last mapping does.
    pub(crate) fn unlink(&self, name: &str) -> Result<(), PlatformError> {
        let mut slots = self.slots.lock();
        let entry = slots
            .iter_mut()
            .find(|s| s.as_ref().is_some_and(|s| s.named && s.name == name))
            .ok_or(PlatformError { op: PlatformOp::Unlink, code: ENOENT })?;
        if let Some(slot) = entry.as_mut() {
            slot.named = false;
        }
        if entry.as_ref().is_some_and(|s| !s.in_use()) {
            *entry = None;
        }
        Ok(())
    }

    /// Drops one mapping of slot `index`.
    pub(crate) fn unmap(&self, index: usize) {
        let mut slots = self.slots.lock();
        if let Some(slot) = slots[index].as_mut() {
            slot.maps = slot.maps.saturating_sub(1);
            if !slot.in_use() {
                slots[index] = None;
            }
        }
    }

    /// Segments still named or mapped (none, once every window is freed).
    pub fn in_use(&self) -> usize {
        self.slots.lock().iter().flatten().filter(|s| s.in_use()).count()
    }

    /// The first run of `pages` free pages.
    fn first_fit(&self, slots: &[Option<Slot>], pages: usize) -> Option<usize> {
        let taken = |p: usize| slots.iter().flatten().any(|s| (s.first..s.first + s.pages).contains(&p));
        (0..=self.pages.len().checked_sub(pages)?).find(|&start| !(start..start + pages).any(taken))
    }

    /// The address of pages `first..first + pages`, with the provenance of
    /// the whole run (taken from the sub-slice, not one page).
    fn base(&self, first: usize, pages: usize) -> NonNull<u8> {
        NonNull::from(&self.pages[first..first + pages]).cast::<u8>()
    }
}
