use super::*;

#[test]
fn placeholder_two_ranks() {
    let p = LayoutParams { nranks: 2, mode: LayoutMode::Contiguous, align: 64, page: 4096 };
    let l = Layout::new(p, |r| [100, 0][r as usize]).unwrap();
    assert!(l.total().is_multiple_of(4096));
}
