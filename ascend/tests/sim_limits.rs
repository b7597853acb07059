//! The simulator at the driver's limits: a key's whitelist holds at most
//! 32 768 entries, and a key names its device however many devices are
//! simulated. Each case runs in a child with a registry of its own.
#![allow(missing_docs, clippy::std_instead_of_core, clippy::alloc_instead_of_core)]

use kpccl_ascend::AclRuntime;
use kpccl_ascend::codes::*;
use kpccl_ascend::sim::{DEVICES_ENV, HostSim};
use kpccl_testkit::acl::ipc::{Exported, code, read};

mod support;
use support::{in_child_with_own_registry, own_registry};

/// Set in the child: the case to run.
const CHILD_ENV: &str = "KPCCL_SIM_LIMITS_CHILD";

/// The whitelist field of the only record of the registry, "pid:set_time,..."
/// ("-" when empty): "K" then 14 fields, the whitelist the 13th.
const WLIST_FIELD: usize = 13;

/// The fields of the only record of the registry.
fn record_fields() -> Vec<String> {
    let text = std::fs::read_to_string(own_registry().join("registry")).unwrap();
    let record = text.lines().find(|l| l.starts_with("K ")).expect("the key's record");
    record.split(' ').map(str::to_owned).collect()
}

/// Adds whitelist entries for `pids` to the only record of the registry, as
/// that many `aclrtIpcMemSetImportPid` calls would (32 768 entries through the
/// API are a thousand rewrites of a growing registry: seconds of a test). They
/// take the first entry's time, or 0 on an empty whitelist.
fn add_entries(pids: impl Iterator<Item = i32>) {
    let path = own_registry().join("registry");
    let text = std::fs::read_to_string(&path).unwrap();
    let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
    let record = lines.iter_mut().find(|l| l.starts_with("K ")).expect("the key's record");
    let mut fields: Vec<String> = record.split(' ').map(str::to_owned).collect();
    let wl = &mut fields[WLIST_FIELD];
    let set_time = wl.split(',').next().and_then(|e| e.split(':').nth(1)).unwrap_or("0").to_owned();
    let mut entries: Vec<String> = if wl == "-" { Vec::new() } else { vec![wl.clone()] };
    entries.extend(pids.map(|pid| format!("{pid}:{set_time}")));
    *wl = entries.join(",");
    *record = fields.join(" ");
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
}

/// The pids of the only record's whitelist.
fn entries() -> Vec<i32> {
    let fields = record_fields();
    let wl = &fields[WLIST_FIELD];
    if wl == "-" { Vec::new() } else { wl.split(',').map(|e| e.split(':').next().unwrap().parse().unwrap()).collect() }
}

/// A key's whitelist holds at most 32 768 entries (the driver's
/// `IPC_WLIST_NUM`): a call that would pass it is refused whole with 507899,
/// counting every pid it passes, even one it would only refresh. Before, the
/// whitelist grew without bound.
#[test]
fn a_whitelist_holds_at_most_32768_entries() {
    if std::env::var_os(CHILD_ENV).is_none() {
        return in_child_with_own_registry("a_whitelist_holds_at_most_32768_entries", CHILD_ENV, "2000", &[]);
    }
    let rt = HostSim::faithful();
    rt.set_device(0).unwrap();
    let p = rt.malloc(4096, ACL_MEM_MALLOC_NORMAL_ONLY).unwrap();
    let key = rt.ipc_mem_get_export_key(p, 4096, ACL_RT_IPC_MEM_EXPORT_FLAG_DEFAULT).unwrap();
    let me = rt.device_get_bare_tgid().unwrap();
    // Pids that are neither 0 nor ours (they need not run).
    let mut pids = (1..).filter(|&pid| pid != me);
    let first = pids.next().unwrap();
    rt.ipc_mem_set_import_pid(&key, &[first]).unwrap();
    add_entries(pids.by_ref().take(32_766));
    let (a, b) = (pids.next().unwrap(), pids.next().unwrap());
    // 32 767 held: two more would be 32 769.
    let refused = ACL_ERROR_RT_DRV_INTERNAL_ERROR;
    assert_eq!(code(rt.ipc_mem_set_import_pid(&key, &[a, b])), refused, "two pids past the limit");
    assert_eq!(code(rt.ipc_mem_set_import_pid(&key, &[a])), 0, "the 32 768th entry");
    assert_eq!(code(rt.ipc_mem_set_import_pid(&key, &[b])), refused, "the 32 769th entry");
    assert_eq!(code(rt.ipc_mem_set_import_pid(&key, &[first])), refused, "a refresh counts as the driver counts it");
    rt.ipc_mem_close(&key).unwrap();
    rt.free(p).unwrap();
}

/// A key names its device in full, `%02x` being a minimum width: 255 is
/// `ff`, 256 is `100`, and the key imports. Before, every device from 256 on
/// printed `00`, naming device 0.
#[test]
fn a_key_names_a_device_past_255_in_full() {
    if std::env::var_os(CHILD_ENV).is_none() {
        return in_child_with_own_registry(
            "a_key_names_a_device_past_255_in_full",
            CHILD_ENV,
            "2000",
            &[(DEVICES_ENV, "300")],
        );
    }
    let rt = HostSim::faithful();
    for (dev, named) in [(255, &b"ff00"[..]), (256, &b"10000"[..]), (299, &b"12b00"[..])] {
        let exp = Exported::new(&rt, dev, 0x5a, ACL_RT_IPC_MEM_EXPORT_FLAG_DISABLE_PID_VALIDATION);
        let text = exp.key.as_bytes();
        // tgid (8 hex digits), counter (16), then the device and the vf (00).
        assert_eq!(&text[24..24 + named.len()], named, "device {dev}: key {:?}", String::from_utf8_lossy(text));
        exp.run_importer(dev, |_, k| {
            let q = rt.ipc_mem_import_by_key(k, 0).unwrap();
            assert!(read(&rt, q).iter().all(|&b| b == 0x5a), "device {dev}: the import reads the exporter's bytes");
            rt.ipc_mem_close(k).unwrap();
        });
        exp.release();
    }
}

/// A key exported without pid validation fills the same whitelist as the
/// driver's (`_devmm_ipc_node_get_wlist`): a process's first import adds its
/// entry, kept after its close, and an import that would add the 32 769th
/// entry is refused with 507899; a process already listed imports again.
/// Before, such imports never counted and a 32 769th process imported.
#[test]
fn an_import_without_pid_validation_counts_against_the_whitelist() {
    if std::env::var_os(CHILD_ENV).is_none() {
        return in_child_with_own_registry(
            "an_import_without_pid_validation_counts_against_the_whitelist",
            CHILD_ENV,
            "2000",
            &[],
        );
    }
    let rt = HostSim::faithful();
    let exp = Exported::new(&rt, 0, 0x3c, ACL_RT_IPC_MEM_EXPORT_FLAG_DISABLE_PID_VALIDATION);
    // Pids no child gets: above the kernel's pid_max (at most 2^22).
    add_entries((1 << 23..).take(32_766));
    // 32 766 held: the first importer adds the 32 767th, and imports twice.
    exp.run_importer(0, |_, k| {
        for round in ["first", "again after its close"] {
            let q = rt.ipc_mem_import_by_key(k, 0).unwrap_or_else(|e| panic!("{round} import: {e:?}"));
            assert!(read(&rt, q).iter().all(|&b| b == 0x3c), "{round} import reads the exporter's bytes");
            rt.ipc_mem_close(k).unwrap();
        }
    });
    assert_eq!(entries().len(), 32_767, "the first importer's entry is added once and kept after its close");
    let refused = ACL_ERROR_RT_DRV_INTERNAL_ERROR;
    exp.run_importer(0, |_, k| {
        let q = rt.ipc_mem_import_by_key(k, 0).expect("the 32 768th entry");
        rt.ipc_mem_close(k).unwrap();
        assert!(!q.is_null());
    });
    exp.run_importer(0, |_, k| {
        assert_eq!(code(rt.ipc_mem_import_by_key(k, 0)), refused, "the 32 769th entry");
    });
    assert_eq!(entries().len(), 32_768, "a refused import adds no entry");
    exp.release();
}
