//! The key format of the v2 driver: `%08x%016llx%02x%02x` (creator tgid, global
//! counter, device, vf), padded with ASCII '0' to 64 characters, then a NUL.

use crate::IpcKey;
use crate::codes::ACL_IPC_KEY_LEN;

/// The key for an export by `tgid` of memory on `dev`, the `counter`-th of the machine.
/// `%02x` is a minimum width, as in the kernel's `sprintf`: device 256 (the simulator
/// has up to 65536) is `100`, never `00`, so a key always names its own device (a
/// real machine's device ids stay under 256). The simulator never reads it back.
pub(crate) fn format(tgid: i32, counter: u64, dev: i32) -> IpcKey {
    let text = format!("{:08x}{:016x}{:02x}{:02x}", tgid.cast_unsigned(), counter, dev.cast_unsigned(), 0u8);
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

    /// Devices 256 and up (the simulator has up to 65536) are named in full, as
    /// `%02x` prints them: before, every one of them printed device `00`.
    #[test]
    fn devices_past_255_are_named_in_full() {
        assert_eq!(&format(0x1234, 7, 0xff).0[..28], b"000012340000000000000007ff00");
        assert_eq!(&format(0x1234, 7, 256).0[..29], b"00001234000000000000000710000");
        assert_eq!(&format(0x1234, 7, 65535).0[..30], b"000012340000000000000007ffff00");
        assert!(format(0x1234, 7, 65535).0[30..64].iter().all(|&b| b == b'0'));
    }
}
