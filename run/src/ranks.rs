//! The rank count a command line gives with `-n`: one check, shared by the
//! launcher and the demo, so that both refuse the same counts the same way
//! (a usage error) before any rank starts.

use kpccl_core::MAX_RANKS;

/// Parses the value of `-n`: a rank count from 1 to [`MAX_RANKS`], or the
/// message of a usage error.
///
/// # Errors
/// If `v` is not a number, or not a rank count a window can have.
pub fn parse_rank_count(v: &str) -> Result<u32, String> {
    let n: u32 = v.parse().map_err(|_| format!("-n {v}: not a rank count"))?;
    if n == 0 || n > MAX_RANKS {
        return Err(format!("-n {n}: the rank count must be 1 to {MAX_RANKS}"));
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::parse_rank_count;

    #[test]
    fn rank_counts_are_1_to_max_ranks() {
        assert_eq!(parse_rank_count("1"), Ok(1));
        assert_eq!(parse_rank_count("1024"), Ok(1024));
        assert_eq!(parse_rank_count("1025"), Err("-n 1025: the rank count must be 1 to 1024".into()));
        assert_eq!(parse_rank_count("0"), Err("-n 0: the rank count must be 1 to 1024".into()));
        assert_eq!(parse_rank_count("-1"), Err("-n -1: not a rank count".into()));
    }
}
