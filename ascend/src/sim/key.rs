//! The key format of the v2 driver: `%08x%016llx%02x%02x` (creator tgid, global
//! counter, device, vf), padded with ASCII '0' to 64 characters, then a NUL.

use crate::IpcKey;
use crate::codes::ACL_IPC_KEY_LEN;

/// The key for an export by `tgid` of memory on `dev`, the `counter`-th of the machine.
pub(crate) fn format(tgid: i32, counter: u64, dev: i32) -> IpcKey {
    let text = format!("{:08x}{:016x}{:02x}{:02x}", tgid.cast_unsigned(), counter, u8::try_from(dev).unwrap_or(0), 0u8);
    let mut bytes = [b'0'; ACL_IPC_KEY_LEN];
    bytes[..text.len()].copy_from_slice(text.as_bytes());
    bytes[ACL_IPC_KEY_LEN - 1] = 0;
    IpcKey(bytes)
}

/// How a received key buffer parses.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Parsed {
    /// Empty, or no NUL within 65 bytes.
    Malformed,
    /// Terminated, but not lowercase hex: no driver record can match it.
    NotHex,
    /// Well-formed: the text to look the record up by.
    Hex(String),
}

/// Parses a key buffer as the HAL does.
pub(crate) fn parse(key: &IpcKey) -> Parsed {
    let Some(end) = key.0.iter().position(|&b| b == 0) else {
        return Parsed::Malformed;
    };
    if end == 0 {
        return Parsed::Malformed;
    }
    let text = &key.0[..end];
    if text.iter().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(b)) {
        Parsed::Hex(String::from_utf8_lossy(text).into_owned())
    } else {
        Parsed::NotHex
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn driver_format() {
        let k = format(0x1234, 7, 3);
        assert_eq!(&k.0[..28], b"0000123400000000000000070300");
        assert!(k.0[28..64].iter().all(|&b| b == b'0'));
        assert_eq!(k.0[64], 0);
        assert_eq!(parse(&k), Parsed::Hex(String::from_utf8_lossy(&k.0[..64]).into_owned()));
    }
}
