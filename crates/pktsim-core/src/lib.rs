//! pktsim-core: the engine of pktsim, with no Python in it.
//!
//! Modules, in the order a scenario flows through them:
//! - [`units`]: quantities with units (`"3.3GHz"`, `"479ns"`, `"64B"`, ...).
//! - [`loader`]: TOML and JSON text to serde types, with key paths in errors; `--set`.
//! - [`scenario`]: the scenario format (defined once, here) and its validation, one file
//!   per section (cpu, link, traffic, nic, host, measure, sweep, cost, fib).
//! - [`cost`]: cycles per packet by processing group (000), bundled profiles.
//! - [`fib`]: routing cost as a function of FIB size and caches.
//! - [`price`]: what a frame's processing and an I/O mode's events cost in time, priced
//!   once for the model and the simulator; [`topology`]: how rings, queues, cores and
//!   vectors are numbered, for both.
//! - [`model`]: the analytical model (000 Eq. 1-3, line rate, cores); it imports nothing of
//!   the simulator.
//! - [`rates`]: event rates below saturation in closed form (rounds of interrupts, polls and
//!   wake-ups), for the model.
//! - [`engine`]: the discrete-event simulator of a node (002, 003).
//! - [`predict`]: the model assembled with the node's layout and its I/O mode's costs,
//!   taken from the simulator's components.

// Checks of a wanted range are written negated (`!(x > 0.0)`) so that NaN fails them.
#![allow(clippy::neg_cmp_op_on_partial_ord)]

pub mod clock;
pub mod cost;
pub mod engine;
pub mod error;
pub mod fib;
pub mod flame;
pub mod input;
pub mod loader;
pub mod model;
pub mod predict;
pub mod price;
pub mod rates;
pub mod scenario;
pub mod simulate;
pub mod topology;
pub mod trace;
pub mod units;

pub use error::{ConfigError, Error, Result};
pub use scenario::{ResolvedScenario, Scenario};

/// pktsim's version, as recorded in every output file.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
