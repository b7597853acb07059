//! # kpccl-posix
//!
//! kpccl on Linux.
#![deny(unsafe_code)]

pub mod launch;
