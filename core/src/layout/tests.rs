//! Property tests of the layout: for random rank counts, modes, sizes,
//! alignments and page sizes, the regions never overlap, keep their promised
//! alignment, stay inside the window, and the layout (and its digest) is a
//! deterministic function of exactly its inputs. Overflow is an error, never
//! a panic: a `u128` model of the data area says when it must happen.

use std::vec;
use std::vec::Vec;

use proptest::prelude::*;
use proptest::test_runner::Config;

use super::*;

/// Few cases under Miri (which is ~1000x slower), more natively.
fn config(native: u32, miri: u32) -> Config {
    let cases = if cfg!(miri) { miri } else { native };
    // No regression files: the failing input is printed, which is enough here.
    Config { cases, failure_persistence: None, ..Config::default() }
}

const PAGES: [u64; 2] = [4096, 65536];

fn mode() -> impl Strategy<Value = LayoutMode> {
    prop_oneof![Just(LayoutMode::Contiguous), Just(LayoutMode::Aligned)]
}

/// Mostly small sizes, often 0, now and then one big enough to overflow the sum.
fn size() -> impl Strategy<Value = u64> {
    prop_oneof![
        3 => Just(0u64),
        8 => 1u64..4096,
        4 => 0u64..(1 << 22),
        1 => (1u64 << 40)..(1u64 << 48),
        1 => (1u64 << 62)..=(1u64 << 63),
        1 => (u64::MAX - (1 << 20))..=u64::MAX,
    ]
}

/// Valid parameters and one size per rank.
fn input(ranks: core::ops::RangeInclusive<u32>) -> impl Strategy<Value = (LayoutParams, Vec<u64>)> {
    (ranks, mode(), 0u32..=16, prop::sample::select(&PAGES[..])).prop_flat_map(|(nranks, mode, shift, page)| {
        let params = LayoutParams { nranks, mode, align: 1 << shift, page };
        (Just(params), prop::collection::vec(size(), nranks as usize))
    })
}

fn at(sizes: &[u64]) -> impl Fn(u32) -> u64 + '_ {
    |r| sizes[r as usize]
}

/// The window's total length by a `u128` model of the data area (starting at
/// the `data_base` of the same parameters with empty segments).
fn model_total(params: LayoutParams, sizes: &[u64]) -> u128 {
    let empty = Layout::new(params, |_| 0).expect("the fixed part of a layout never overflows");
    let up = |v: u128, a: u64| v.div_ceil(u128::from(a)) * u128::from(a);
    let mut end = u128::from(empty.header().data_base);
    for &s in sizes {
        end = up(end, params.segment_align()) + u128::from(s);
    }
    up(end, params.page)
}

/// The refusal of a window of `total` bytes: the first rank with the largest request.
fn too_large(sizes: &[u64], total: u128) -> LayoutError {
    let size = sizes.iter().copied().max().unwrap_or(0);
    let rank = u32::try_from(sizes.iter().position(|&s| s == size).unwrap_or(0)).unwrap();
    LayoutError::TooLarge { rank, size, total, max: MAX_TOTAL }
}

/// Checks properties (a), (b), (c) and the sync-block lines (e) of one layout.
fn check_layout(l: &Layout, params: LayoutParams, sizes: &[u64]) {
    let n = params.nranks;
    let page = params.page;
    assert_eq!(l.params(), params);
    assert_eq!(l.nranks(), n);
    assert_eq!(l.rounds(), reference_rounds(n));
    // (c) the total is whole pages.
    assert!(l.total().is_multiple_of(page), "total {} is not a multiple of the page {page}", l.total());

    let regions: Vec<Region> = l.regions(at(sizes)).collect();
    assert_eq!(regions.len(), 2 + 2 * n as usize);
    for reg in &regions {
        // (b) every region keeps the alignment it promises.
        assert!(reg.align.is_power_of_two(), "{reg:?}");
        assert!(reg.offset.is_multiple_of(reg.align), "{reg:?} is misaligned");
        // (c) and lies inside the window.
        let end = reg.offset.checked_add(reg.len).expect("region end overflows");
        assert!(end <= l.total(), "{reg:?} ends past the total {}", l.total());
    }

    // The data segments: rank order, the requested sizes, the segment alignment.
    let data: Vec<Region> = regions.iter().copied().filter(|r| matches!(r.kind, RegionKind::Data(_))).collect();
    assert_eq!(data, l.segments(at(sizes)).collect::<Vec<_>>());
    for (r, reg) in (0u32..).zip(&data) {
        assert_eq!(reg.kind, RegionKind::Data(r));
        assert_eq!(reg.len, sizes[r as usize]);
        assert_eq!(reg.align, params.segment_align());
        assert!(reg.offset.is_multiple_of(params.segment_align()));
        assert!(reg.align >= MIN_SEGMENT_ALIGN && reg.align >= params.align);
        if params.mode == LayoutMode::Aligned {
            assert!(reg.offset.is_multiple_of(page));
        }
    }

    // (a) no two non-empty regions overlap.
    let mut sorted: Vec<Region> = regions.iter().copied().filter(|r| r.len > 0).collect();
    sorted.sort_by_key(|r| r.offset);
    for w in sorted.windows(2) {
        assert!(w[0].offset + w[0].len <= w[1].offset, "{:?} overlaps {:?}", w[0], w[1]);
    }
    // In aligned mode a rank's sync block and data segment share no page with
    // anything else, so the owner's first touch decides where they live.
    if params.mode == LayoutMode::Aligned {
        let pages = |r: &Region| (r.offset / page, (r.offset + r.len).div_ceil(page));
        for w in sorted.windows(2) {
            if matches!(w[1].kind, RegionKind::Sync(_) | RegionKind::Data(_)) {
                assert!(pages(&w[0]).1 <= pages(&w[1]).0, "{:?} shares a page with {:?}", w[0], w[1]);
            }
        }
    }

    // The header this layout writes agrees with it.
    let h = l.header();
    assert_eq!(h.magic, shared::MAGIC);
    assert_eq!(h.total_len, l.total());
    assert_eq!(h.digest, l.digest());
    assert_eq!(h.nranks, n);
    assert_eq!(h.page_size, page);
    assert_eq!(LayoutMode::from_code(h.mode), Some(params.mode));
    assert_eq!(h.sync_base, l.sync_block(0));
    assert!(data.iter().all(|d| d.offset >= h.data_base));
    assert_eq!(l.shared_prefix().len, h.sync_base);
    let table = regions[1];
    for r in 0..n {
        let e = l.rank_entry(r);
        assert!(e >= table.offset && e + size_of::<RankEntry>() as u64 <= table.offset + table.len);
    }

    check_sync_lines(l);
}

/// (e) the wait record, every round slot and every peer slot a rank reads
/// are distinct 128-byte lines of that rank's sync block.
fn check_sync_lines(l: &Layout) {
    let n = l.nranks();
    let mut used = Vec::new();
    for r in 0..n {
        let block = l.sync_region(r);
        assert_eq!(block.kind, RegionKind::Sync(r));
        assert!(block.len.is_multiple_of(LINE));
        used.clear();
        used.resize(usize::try_from(block.len / LINE).unwrap(), false);
        let mut claim = |offset: u64, what: &dyn Fn() -> std::string::String| {
            assert!(offset.is_multiple_of(LINE), "{} is not on a line", what());
            assert!(
                offset >= block.offset && offset + LINE <= block.offset + block.len,
                "{} lies outside sync block {block:?}",
                what()
            );
            let line = usize::try_from((offset - block.offset) / LINE).unwrap();
            assert!(!core::mem::replace(&mut used[line], true), "{} shares a line", what());
        };
        claim(l.wait_record(r), &|| std::format!("wait_record({r})"));
        for k in 0..l.rounds() {
            claim(l.round_slot(k, r), &|| std::format!("round_slot({k}, {r})"));
        }
        for w in 0..n {
            claim(l.peer_slot(w, r), &|| std::format!("peer_slot({w}, {r})"));
            // The signal counters share the writer's line, never another's.
            assert_eq!(l.signal_slot(w, r) / LINE, l.peer_slot(w, r) / LINE, "signal_slot({w}, {r})");
            assert_eq!(l.taken_slot(w, r) / LINE, l.peer_slot(w, r) / LINE, "taken_slot({w}, {r})");
            assert!(l.signal_slot(w, r) != l.peer_slot(w, r) && l.taken_slot(w, r) != l.signal_slot(w, r));
        }
    }
}

fn reference_rounds(n: u32) -> u32 {
    (0..).find(|&k| 1u64 << k >= u64::from(n)).unwrap()
}

/// Builds the layout, checks the outcome against the model and, when it
/// exists, all its properties. Returns it.
fn build_and_check(params: LayoutParams, sizes: &[u64]) -> Result<Layout, LayoutError> {
    let result = Layout::new(params, at(sizes));
    // Parameters the layout refuses on their own are refused whatever the sizes.
    if let Err(e) = params.validate() {
        assert_eq!(result, Err(e));
        return result;
    }
    let total = model_total(params, sizes);
    if total > u128::from(MAX_TOTAL) {
        assert_eq!(result, Err(too_large(sizes, total)));
        return result;
    }
    let l = result.unwrap_or_else(|e| panic!("the model says {total} bytes, the layout {e:?}"));
    assert_eq!(u128::from(l.total()), total);
    check_layout(&l, params, sizes);
    result
}

proptest! {
    #![proptest_config(config(256, 4))]

    #[test]
    fn layouts_are_sound(
        (params, sizes) in input(if cfg!(miri) { 1..=24 } else { 1..=64 }),
        pick in any::<prop::sample::Index>(),
        other in size(),
        bit in 0u32..64,
    ) {
        let first = build_and_check(params, &sizes);
        // (d) deterministic, regions included.
        let again = Layout::new(params, at(&sizes));
        prop_assert_eq!(first, again);
        if let Ok(l) = first {
            prop_assert!(l.regions(at(&sizes)).eq(again.unwrap().regions(at(&sizes))));
        }
        // (d) the digest changes when any one size changes.
        let i = pick.index(sizes.len());
        let mut changed = sizes.clone();
        changed[i] = if other == sizes[i] { other.wrapping_add(1) } else { other };
        let second = build_and_check(params, &changed);
        if let (Ok(a), Ok(b)) = (first, second) {
            prop_assert_ne!(a.digest(), b.digest(), "rank {}: {} -> {}", i, sizes[i], changed[i]);
        }
        // Also a change in a single bit, high or low.
        changed[i] = sizes[i] ^ (1 << bit);
        if let (Ok(a), Ok(b)) = (first, build_and_check(params, &changed)) {
            prop_assert_ne!(a.digest(), b.digest(), "rank {}: {} -> {}", i, sizes[i], changed[i]);
        }
    }

    #[test]
    fn digest_covers_every_parameter((params, sizes) in input(1..=16), shift in 0u32..=16) {
        let Ok(base) = Layout::new(params, at(&sizes)) else { return Ok(()) };
        let flip = match params.mode {
            LayoutMode::Contiguous => LayoutMode::Aligned,
            LayoutMode::Aligned => LayoutMode::Contiguous,
        };
        let page = if params.page == PAGES[0] { PAGES[1] } else { PAGES[0] };
        let variants = [
            LayoutParams { mode: flip, ..params },
            LayoutParams { align: 1 << shift, ..params },
            LayoutParams { page, ..params },
        ];
        for v in variants {
            if v == params {
                continue;
            }
            if let Ok(l) = build_and_check(v, &sizes) {
                prop_assert_ne!(l.digest(), base.digest(), "{:?} vs {:?}", v, params);
            }
        }
        // One more rank (with an empty segment) changes it too.
        if params.nranks < MAX_RANKS {
            let mut more = sizes.clone();
            more.push(0);
            if let Ok(l) = build_and_check(LayoutParams { nranks: params.nranks + 1, ..params }, &more) {
                prop_assert_ne!(l.digest(), base.digest());
            }
        }
    }
}

proptest! {
    // Up to MAX_RANKS: a million sync lines per case, so only a few cases
    // (and smaller counts under Miri).
    #![proptest_config(config(6, 1))]

    #[test]
    fn large_rank_counts_are_sound(
        (params, sizes) in input(if cfg!(miri) { 65..=80 } else { 65..=MAX_RANKS })
    ) {
        build_and_check(params, &sizes).ok();
    }
}

#[test]
fn max_ranks_with_empty_and_page_sized_segments() {
    for mode in [LayoutMode::Contiguous, LayoutMode::Aligned] {
        let n = if cfg!(miri) { 72 } else { MAX_RANKS };
        let params = LayoutParams { nranks: n, mode, align: 1, page: 4096 };
        let sizes: Vec<u64> = (0..u64::from(n)).map(|r| if r % 3 == 0 { 0 } else { 4096 }).collect();
        let l = build_and_check(params, &sizes).unwrap();
        assert_eq!(l.rounds(), if cfg!(miri) { 7 } else { 10 });
        assert_eq!(l.segments(|r| sizes[r as usize]).filter(|s| s.len == 0).count(), n.div_ceil(3) as usize);
    }
}

#[test]
fn a_window_beyond_a_segment_names_the_largest_request() {
    for mode in [LayoutMode::Contiguous, LayoutMode::Aligned] {
        let params = |n| LayoutParams { nranks: n, mode, align: 1 << 16, page: 65536 };
        for sizes in [vec![u64::MAX], vec![u64::MAX - 4096], vec![1 << 63, 1 << 63], vec![0, u64::MAX, 0]] {
            let n = u32::try_from(sizes.len()).unwrap();
            let e = build_and_check(params(n), &sizes).unwrap_err();
            assert!(matches!(e, LayoutError::TooLarge { max: MAX_TOTAL, .. }), "{sizes:?}: {e:?}");
        }
        // Each fits a segment, the sum does not: the tie goes to the lower rank.
        let e = Layout::new(params(3), |r| [64, 1 << 62, 1 << 62][r as usize]).unwrap_err();
        let LayoutError::TooLarge { rank: 1, size, total, max } = e else { panic!("{e:?}") };
        assert_eq!((size, max), (1 << 62, MAX_TOTAL));
        assert!(total > u128::from(max) && total < 1 << 64, "{total}");
    }
    let max = i64::MAX.unsigned_abs();
    let e = LayoutError::TooLarge { rank: 1, size: max, total: 1 << 63, max };
    assert_eq!(
        std::string::ToString::to_string(&e),
        "rank 1 asked for 9223372036854775807 bytes: the window's total of 9223372036854775808 bytes is more than \
         a window can span on this system (9223372036854775807 bytes)"
    );
}

#[test]
fn the_largest_window_is_laid_out_and_one_byte_more_is_refused() {
    // The bound is what a file offset holds (i64::MAX); the largest window
    // is the last whole page below it. Its segments end at the window's
    // end, where rounding their offsets up must not overflow either.
    let params = LayoutParams { nranks: 3, mode: LayoutMode::Aligned, align: 32, page: 65536 };
    let base = Layout::new(params, |_| 0).unwrap().header().data_base;
    let last = MAX_TOTAL - MAX_TOTAL % 65536;
    let sizes = [last - base, 0, 0];
    let l = build_and_check(params, &sizes).unwrap();
    assert_eq!(l.total(), last);
    assert!(l.segments(at(&sizes)).skip(1).all(|s| s.offset == l.total()));
    let more = [0, last - base + 1, 0];
    let want = LayoutError::TooLarge { rank: 1, size: more[1], total: u128::from(last) + 65536, max: MAX_TOTAL };
    assert_eq!(build_and_check(params, &more), Err(want));
}

/// An offset past `isize::MAX` into a mapping is undefined behaviour
/// (`ptr::add`): no window may span more, on 32-bit targets too (where a
/// `usize` holds more than an `isize`).
#[test]
fn no_window_spans_more_than_an_isize() {
    let isize_max = isize::MAX.unsigned_abs() as u64;
    assert!(MAX_TOTAL <= isize_max, "{MAX_TOTAL} > {isize_max}");
    // On 64-bit targets what a file offset holds is the bound.
    if cfg!(target_pointer_width = "64") {
        assert_eq!(MAX_TOTAL, i64::MAX.unsigned_abs());
    }
    let params = LayoutParams { nranks: 2, mode: LayoutMode::Contiguous, align: 64, page: 4096 };
    let sizes = [0, isize_max];
    let e = Layout::new(params, at(&sizes)).unwrap_err();
    assert!(matches!(e, LayoutError::TooLarge { rank: 1, size, .. } if size == isize_max), "{e:?}");
}

#[test]
fn invalid_params_are_rejected() {
    let ok = LayoutParams { nranks: 2, mode: LayoutMode::Contiguous, align: 64, page: 4096 };
    assert_eq!(ok.validate(), Ok(()));
    let cases = [
        (LayoutParams { nranks: 0, ..ok }, LayoutError::RankCount { nranks: 0, max: MAX_RANKS }),
        (
            LayoutParams { nranks: MAX_RANKS + 1, ..ok },
            LayoutError::RankCount { nranks: MAX_RANKS + 1, max: MAX_RANKS },
        ),
        (LayoutParams { nranks: u32::MAX, ..ok }, LayoutError::RankCount { nranks: u32::MAX, max: MAX_RANKS }),
        (LayoutParams { align: 3, ..ok }, LayoutError::Alignment { align: 3 }),
        (LayoutParams { align: 0, ..ok }, LayoutError::Alignment { align: 0 }),
        (LayoutParams { align: 96, ..ok }, LayoutError::Alignment { align: 96 }),
        (LayoutParams { page: 100, ..ok }, LayoutError::PageSize { page: 100 }),
        (LayoutParams { page: 0, ..ok }, LayoutError::PageSize { page: 0 }),
        (LayoutParams { page: 64, ..ok }, LayoutError::PageSize { page: 64 }),
        (LayoutParams { align: 8192, ..ok }, LayoutError::AlignmentAbovePage { align: 8192, page: 4096 }),
    ];
    for (params, err) in cases {
        assert_eq!(params.validate(), Err(err), "{params:?}");
        for mode in [LayoutMode::Contiguous, LayoutMode::Aligned] {
            assert_eq!(Layout::new(LayoutParams { mode, ..params }, |_| 0), Err(err), "{params:?}");
        }
    }
    // The limits themselves are fine.
    assert!(Layout::new(LayoutParams { nranks: MAX_RANKS, ..ok }, |_| 0).is_ok());
    assert!(Layout::new(LayoutParams { nranks: 1, align: 1, page: LINE, ..ok }, |_| 0).is_ok());
}

#[test]
fn rounds_are_ceil_log2() {
    for (n, k) in [(0, 0), (1, 0), (2, 1), (3, 2), (4, 2), (5, 3), (8, 3), (9, 4), (1023, 10), (1024, 10)] {
        assert_eq!(rounds(n), k, "rounds({n})");
    }
    for n in (1..=MAX_RANKS).step_by(if cfg!(miri) { 37 } else { 1 }) {
        assert_eq!(rounds(n), reference_rounds(n));
    }
}

#[test]
fn mode_codes_round_trip() {
    for m in [LayoutMode::Contiguous, LayoutMode::Aligned] {
        assert_eq!(LayoutMode::from_code(m.code()), Some(m));
    }
    assert_eq!(LayoutMode::from_code(2), None);
}

#[test]
fn two_ranks_by_hand() {
    let p = LayoutParams { nranks: 2, mode: LayoutMode::Contiguous, align: 64, page: 4096 };
    let l = Layout::new(p, |r| [100, 0][r as usize]).unwrap();
    // Header 384 + 2 x 64 table = 512 -> sync at 512 (a line multiple), 2 x (1 + 1 + 2) lines.
    assert_eq!(l.sync_block(0), 512);
    assert_eq!(l.sync_region(0).len, 4 * LINE);
    assert_eq!(l.header().data_base, 4096);
    let segs: Vec<Region> = l.segments(|r| [100, 0][r as usize]).collect();
    assert_eq!((segs[0].offset, segs[0].len), (4096, 100));
    assert_eq!((segs[1].offset, segs[1].len), (4096 + 128, 0));
    assert_eq!(l.total(), 8192);
}

#[test]
fn a_window_longer_than_a_rank_can_map_names_the_rank_that_asked_the_most() {
    let params = LayoutParams { nranks: 3, mode: LayoutMode::Contiguous, align: 64, page: 4096 };
    let size = |r: u32| [4096, 1 << 20, 1 << 20][r as usize];
    let total = Layout::new(params, size).unwrap().total();
    assert_eq!(Layout::new(params, size).unwrap().within(total, size).map(|l| l.total()), Ok(total));
    let e = Layout::new(params, size).unwrap().within(total - 1, size).unwrap_err();
    assert_eq!(e, LayoutError::TooLarge { rank: 1, size: 1 << 20, total: u128::from(total), max: total - 1 });
}
