//! Test helpers over the reference thread platform (`kpccl_core::threads`):
//! ring orders and data patterns that a fence must carry across.
#![allow(dead_code)]

use std::string::String;

use kpccl_core::DataSegment;

/// The word `owner` writes at word `index` of its segment in `round`.
fn word(owner: u32, round: u32, index: usize) -> u64 {
    let x = (u64::from(owner) << 48) ^ (u64::from(round) << 32) ^ index as u64;
    (x ^ 0x5555_5555_5555_5555).wrapping_mul(0x9e37_79b9_7f4a_7c15)
}

/// The byte `owner` writes at `index` of its segment in `round`.
fn pattern(owner: u32, round: u32, index: usize) -> u8 {
    word(owner, round, index / 8).to_le_bytes()[index % 8]
}

/// The segment as words, then its tail as bytes.
#[allow(clippy::cast_ptr_alignment)] // asserted: segments are at least 64-aligned
fn parts(seg: &DataSegment) -> (*mut u64, usize, *mut u8, usize) {
    let words = seg.ptr.as_ptr().cast::<u64>();
    assert!(words.is_aligned());
    (words, seg.len / 8, seg.ptr.as_ptr().wrapping_add(seg.len / 8 * 8), seg.len % 8)
}

/// Fills `seg` with `owner`'s pattern of `round`: whole words, then the tail
/// bytes. Raw volatile stores: other ranks read the memory after a fence.
pub(crate) fn fill(seg: &DataSegment, owner: u32, round: u32) {
    let (words, n, tail, t) = parts(seg);
    for i in 0..n {
        // SAFETY: word `i < len / 8` lies inside the segment, aligned; this rank
        // owns the segment until its next fence.
        unsafe { words.wrapping_add(i).write_volatile(word(owner, round, i)) };
    }
    for i in 0..t {
        // SAFETY: byte `n * 8 + i < len` lies inside the segment, owned as above.
        unsafe { tail.wrapping_add(i).write_volatile(pattern(owner, round, n * 8 + i)) };
    }
}

/// Checks that `seg` holds `owner`'s pattern of `round`, word by word.
pub(crate) fn check(seg: &DataSegment, owner: u32, round: u32) -> Result<(), String> {
    let (words, n, tail, t) = parts(seg);
    for i in 0..n {
        // SAFETY: inside the segment and aligned, as in `fill`; its owner wrote it
        // before a fence this rank has passed, and writes again only after the next.
        let got = unsafe { words.wrapping_add(i).read_volatile() };
        if got != word(owner, round, i) {
            return Err(std::format!("rank {owner}, round {round}: word {i} is {got:#x}"));
        }
    }
    for i in 0..t {
        // SAFETY: as above.
        let got = unsafe { tail.wrapping_add(i).read_volatile() };
        if got != pattern(owner, round, n * 8 + i) {
            return Err(std::format!("rank {owner}, round {round}: byte {} is {got:#x}", n * 8 + i));
        }
    }
    Ok(())
}
