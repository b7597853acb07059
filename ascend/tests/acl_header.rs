//! `ascend/include/acl_ipc.h` (the ACL prototypes the C tests compile against,
//! written by hand from CANN's `acl_rt.h`) and `kpccl_ascend::codes` give every
//! constant they share the same value, and the header names none the Rust side
//! lacks.

use kpccl_ascend::codes::*;

/// The constants both sides define, by name.
macro_rules! named {
    ($($c:ident),+ $(,)?) => { [$((stringify!($c), i128::from($c))),+] };
}

/// CANN's constants the header lists for completeness and the library never uses.
const HEADER_ONLY: [&str; 5] = [
    "ACL_MEM_MALLOC_HUGE1G_ONLY",
    "ACL_MEM_MALLOC_HUGE1G_ONLY_P2P",
    "ACL_MEMCPY_HOST_TO_BUF_TO_DEVICE",
    "ACL_MEMCPY_INNER_DEVICE_TO_DEVICE",
    "ACL_MEMCPY_INTER_DEVICE_TO_DEVICE",
];

/// `NAME = value` enumerators and `#define NAME value` lines of the header.
fn header_constants(text: &str) -> Vec<(String, i128)> {
    let value = |v: &str| {
        let v = v.trim().trim_end_matches(',').trim_end_matches("UL");
        match v.strip_prefix("0x") {
            Some(hex) => i128::from_str_radix(hex, 16),
            None => v.parse(),
        }
        .unwrap_or_else(|e| panic!("{v:?} is not a number: {e}"))
    };
    text.lines()
        .filter_map(|line| {
            let line = line.trim();
            let (name, v) = match line.strip_prefix("#define ") {
                Some(def) => def.split_once(' ')?,
                None => line.split_once(" = ")?,
            };
            name.starts_with("ACL_").then(|| (name.to_owned(), value(v)))
        })
        .collect()
}

#[test]
fn the_c_header_agrees_with_the_rust_codes() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/include/acl_ipc.h");
    let header = header_constants(&std::fs::read_to_string(path).unwrap());
    let rust = named!(
        ACL_SUCCESS,
        ACL_ERROR_INVALID_PARAM,
        ACL_ERROR_UNINITIALIZE,
        ACL_ERROR_REPEAT_INITIALIZE,
        ACL_ERROR_REPEAT_FINALIZE,
        ACL_ERROR_API_NOT_SUPPORT,
        ACL_ERROR_FEATURE_UNSUPPORTED,
        ACL_ERROR_RT_PARAM_INVALID,
        ACL_ERROR_RT_INVALID_DEVICEID,
        ACL_ERROR_RT_CONTEXT_NULL,
        ACL_ERROR_RT_STREAM_CONTEXT,
        ACL_ERROR_RT_INVALID_HANDLE,
        ACL_ERROR_RT_FEATURE_NOT_SUPPORT,
        ACL_ERROR_RT_MEMORY_ALLOCATION,
        ACL_ERROR_RT_NO_PERMISSION,
        ACL_ERROR_RT_INTERNAL_ERROR,
        ACL_ERROR_RT_IPC_ERROR,
        ACL_ERROR_RT_DRV_INTERNAL_ERROR,
        ACL_RT_IPC_MEM_EXPORT_FLAG_DEFAULT,
        ACL_RT_IPC_MEM_EXPORT_FLAG_DISABLE_PID_VALIDATION,
        ACL_RT_IPC_MEM_IMPORT_FLAG_DEFAULT,
        ACL_RT_IPC_MEM_IMPORT_FLAG_ENABLE_PEER_ACCESS,
        ACL_MEM_MALLOC_HUGE_FIRST,
        ACL_MEM_MALLOC_HUGE_ONLY,
        ACL_MEM_MALLOC_NORMAL_ONLY,
        ACL_MEM_MALLOC_HUGE_FIRST_P2P,
        ACL_MEM_MALLOC_HUGE_ONLY_P2P,
        ACL_MEM_MALLOC_NORMAL_ONLY_P2P,
        ACL_MEMCPY_HOST_TO_HOST,
        ACL_MEMCPY_HOST_TO_DEVICE,
        ACL_MEMCPY_DEVICE_TO_HOST,
        ACL_MEMCPY_DEVICE_TO_DEVICE,
        ACL_MEMCPY_DEFAULT,
    );
    for (name, value) in &rust {
        let found = header.iter().find(|(n, _)| n == name).map(|&(_, v)| v);
        assert_eq!(found, Some(*value), "{name} in acl_ipc.h");
    }
    for (name, _) in &header {
        let known = rust.iter().any(|(n, _)| n == name) || HEADER_ONLY.contains(&name.as_str());
        assert!(known, "acl_ipc.h defines {name}, which kpccl_ascend::codes lacks");
    }
    assert_eq!(header.len(), rust.len() + HEADER_ONLY.len(), "a constant is defined twice in acl_ipc.h");
}
