//! The files `install` writes rather than copies: the pkg-config modules and
//! the CMake package, for an installation under a prefix.
//!
//! - `kpccl.pc`: `Libs` links the shared library; `Libs.private` is what the
//!   static one needs, for `pkg-config --static` in a fully static link
//!   (`cc -static`).
//! - `kpccl-static.pc`: `libkpccl.a` itself in `Libs`, for a program that
//!   links kpccl statically but the system (and MPI) dynamically, which a
//!   single module cannot say: its `-lkpccl` always finds the `.so` first.
//! - `kpccl-config.cmake`: imported targets `kpccl::kpccl_shared`,
//!   `kpccl::kpccl_static` and `kpccl::kpccl` (the shared one, or the static
//!   one with `KPCCL_STATIC` or `find_package(kpccl COMPONENTS static)`);
//!   it finds its prefix from its own place, so a moved tree still works.
//! - `kpccl-config-version.cmake`: a request is met by the same major
//!   version (for 0.x, the same minor) that is not older.

use std::path::Path;

/// The installed version's parts, `0.1.0` → `(0, 1, 0)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Version {
    pub(crate) major: u32,
    pub(crate) minor: u32,
    pub(crate) patch: u32,
}

impl Version {
    pub(crate) fn parse(v: &str) -> Option<Version> {
        let mut parts = v.split('.').map(|p| p.parse::<u32>().ok());
        let version = Version { major: parts.next()??, minor: parts.next()??, patch: parts.next()?? };
        parts.next().is_none().then_some(version)
    }
}

impl std::fmt::Display for Version {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.patch)
    }
}

const PC_HEAD: &str = "libdir=${prefix}/lib\nincludedir=${prefix}/include\n\n";

/// `kpccl.pc`: the shared library; `libs` (the static library's needs) for `--static`.
pub(crate) fn pc_file(prefix: &Path, version: Version, libs: &[String]) -> String {
    format!(
        "prefix={}\n{PC_HEAD}\
         Name: kpccl\n\
         Description: KPCCL shared-memory windows (kpccl_shm_*), from kpccl-rs\n\
         Version: {version}\n\
         Cflags: -I${{includedir}}\n\
         Libs: -L${{libdir}} -lkpccl\n\
         Libs.private: {}\n",
        prefix.display(),
        libs.join(" ")
    )
}

/// `kpccl-static.pc`: the static library and what it needs, in `Libs`.
pub(crate) fn pc_static_file(prefix: &Path, version: Version, libs: &[String]) -> String {
    format!(
        "prefix={}\n{PC_HEAD}\
         Name: kpccl-static\n\
         Description: KPCCL shared-memory windows, linked statically (libkpccl.a) into a dynamic program\n\
         Version: {version}\n\
         Cflags: -I${{includedir}}\n\
         Libs: ${{libdir}}/libkpccl.a {}\n",
        prefix.display(),
        libs.join(" ")
    )
}

/// `kpccl-config.cmake`, which sits in `PREFIX/lib/cmake/kpccl`.
pub(crate) fn cmake_config(version: Version, libs: &[String]) -> String {
    let libs: Vec<&str> = libs.iter().map(|l| l.strip_prefix("-l").unwrap_or(l)).collect();
    format!(
        r#"# kpccl-config.cmake: libkpccl {version} (kpccl-rs), installed by `cargo xtask install`.
#
#   find_package(kpccl CONFIG REQUIRED)            # or: COMPONENTS static
#   target_link_libraries(app PRIVATE kpccl::kpccl)
#
# kpccl::kpccl_shared  libkpccl.so (SONAME libkpccl.so.{major})
# kpccl::kpccl_static  libkpccl.a and the system libraries it needs
# kpccl::kpccl         the shared one; the static one when KPCCL_STATIC is ON
#                      or the component `static` was asked for
# KPCCL_RUN            the launcher (bin/kpccl-run)
# KPCCL_SIM_LIBRARY_DIR  the Ascend simulator's libascendcl.so (lib/kpccl/sim)
# The headers: kpccl.h, and kpccl_mpi.h for MPI programs (needs MPI::MPI_C).

get_filename_component(_kpccl_prefix "${{CMAKE_CURRENT_LIST_DIR}}/../../.." ABSOLUTE)

foreach(_kpccl_component IN LISTS kpccl_FIND_COMPONENTS)
  if(NOT _kpccl_component MATCHES "^(shared|static)$")
    set(kpccl_FOUND FALSE)
    set(kpccl_NOT_FOUND_MESSAGE "kpccl has no component `${{_kpccl_component}}` (it has: shared, static)")
    return()
  endif()
endforeach()

if(NOT TARGET kpccl::kpccl)
  add_library(kpccl::kpccl_shared SHARED IMPORTED)
  set_target_properties(kpccl::kpccl_shared PROPERTIES
    IMPORTED_LOCATION "${{_kpccl_prefix}}/lib/libkpccl.so.{version}"
    IMPORTED_SONAME "libkpccl.so.{major}"
    INTERFACE_INCLUDE_DIRECTORIES "${{_kpccl_prefix}}/include")

  add_library(kpccl::kpccl_static STATIC IMPORTED)
  set_target_properties(kpccl::kpccl_static PROPERTIES
    IMPORTED_LOCATION "${{_kpccl_prefix}}/lib/libkpccl.a"
    IMPORTED_LINK_INTERFACE_LANGUAGES "C"
    INTERFACE_INCLUDE_DIRECTORIES "${{_kpccl_prefix}}/include"
    INTERFACE_LINK_LIBRARIES "{libs}")

  add_library(kpccl::kpccl INTERFACE IMPORTED)
  if(KPCCL_STATIC OR "static" IN_LIST kpccl_FIND_COMPONENTS)
    set_target_properties(kpccl::kpccl PROPERTIES INTERFACE_LINK_LIBRARIES kpccl::kpccl_static)
  else()
    set_target_properties(kpccl::kpccl PROPERTIES INTERFACE_LINK_LIBRARIES kpccl::kpccl_shared)
  endif()
endif()

set(KPCCL_RUN "${{_kpccl_prefix}}/bin/kpccl-run")
set(KPCCL_SIM_LIBRARY_DIR "${{_kpccl_prefix}}/lib/kpccl/sim")
unset(_kpccl_prefix)
unset(_kpccl_component)
"#,
        major = version.major,
        libs = libs.join(";"),
    )
}

/// `kpccl-config-version.cmake`.
pub(crate) fn cmake_version(version: Version) -> String {
    // Before 1.0 a minor release may break the API, as in Cargo's rules.
    let same = if version.major == 0 { "MAJOR AND MINOR" } else { "MAJOR" };
    format!(
        r#"# kpccl-config-version.cmake: libkpccl {version}; a request is met by the same
# major version ({same} before 1.0) that is not older, on a 64-bit build.
set(PACKAGE_VERSION "{version}")
set(PACKAGE_VERSION_COMPATIBLE FALSE)
set(PACKAGE_VERSION_EXACT FALSE)
if(DEFINED CMAKE_SIZEOF_VOID_P AND NOT CMAKE_SIZEOF_VOID_P EQUAL 8)
  set(PACKAGE_VERSION_UNSUITABLE TRUE)
  set(PACKAGE_VERSION "${{PACKAGE_VERSION}} (64-bit)")
elseif(PACKAGE_FIND_VERSION_MAJOR EQUAL {major} AND
       ({major} GREATER 0 OR PACKAGE_FIND_VERSION_MINOR EQUAL {minor}) AND
       NOT PACKAGE_FIND_VERSION VERSION_GREATER PACKAGE_VERSION)
  set(PACKAGE_VERSION_COMPATIBLE TRUE)
  if(PACKAGE_FIND_VERSION VERSION_EQUAL PACKAGE_VERSION)
    set(PACKAGE_VERSION_EXACT TRUE)
  endif()
endif()
"#,
        major = version.major,
        minor = version.minor,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const V: Version = Version { major: 0, minor: 1, patch: 0 };

    fn libs() -> Vec<String> {
        ["-ldl", "-lm"].map(str::to_owned).to_vec()
    }

    #[test]
    fn versions_parse_strictly() {
        assert_eq!(Version::parse("0.1.0"), Some(V));
        assert_eq!(V.to_string(), "0.1.0");
        for bad in ["0.1", "0.1.0.1", "0.x.0", ""] {
            assert_eq!(Version::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn pc_files_name_the_prefix_and_the_libraries() {
        let pc = pc_file(Path::new("/opt/kpccl"), V, &libs());
        assert!(pc.starts_with("prefix=/opt/kpccl\n"), "{pc}");
        assert!(pc.contains("\nVersion: 0.1.0\n") && pc.contains("\nLibs: -L${libdir} -lkpccl\n"), "{pc}");
        assert!(pc.contains("\nLibs.private: -ldl -lm\n"), "{pc}");
        let st = pc_static_file(Path::new("/opt/kpccl"), V, &libs());
        assert!(st.contains("\nLibs: ${libdir}/libkpccl.a -ldl -lm\n"), "{st}");
    }

    #[test]
    fn cmake_files_carry_the_version() {
        let config = cmake_config(V, &libs());
        assert!(config.contains("/lib/libkpccl.so.0.1.0\"") && config.contains("\"libkpccl.so.0\""), "{config}");
        assert!(config.contains("INTERFACE_LINK_LIBRARIES \"dl;m\""), "{config}");
        let version = cmake_version(V);
        assert!(version.contains("set(PACKAGE_VERSION \"0.1.0\")"), "{version}");
        assert!(version.contains("PACKAGE_FIND_VERSION_MINOR EQUAL 1"), "{version}");
    }
}
