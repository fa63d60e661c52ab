//! Test doubles for the store contracts, behind the `conformance` feature: an in-process
//! database for the shared layer ([`MemoryDatabase`]) and a store with nothing but the core
//! ([`CoreOnly`]). Neither is for production: nothing survives the process.

mod core_only;
mod database;

pub use core_only::CoreOnly;
pub use database::MemoryDatabase;
