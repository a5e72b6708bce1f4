//! `[cpu]`: the processor of the node, and its checks.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::error::{ConfigError, Result};
use crate::fib::Caches;
use crate::units::{Cycles, Frequency};

/// The processor of the node.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Cpu {
    /// Core clock (turbo and power saving off, as in 000 V-A).
    pub frequency: Frequency,
    /// Cores forwarding packets, each with its own rx and tx rings.
    #[serde(default = "one_u32")]
    pub cores: u32,
    /// Extra cycles per packet for each additional core contending for shared state (a
    /// shared tx-queue lock, the allocator). 0 gives 000's linear scaling.
    #[serde(default)]
    pub contention: Cycles,
    #[serde(default)]
    pub caches: Caches,
}

fn one_u32() -> u32 {
    1
}

impl Cpu {
    /// A clock above 0 Hz, 1 to 4096 cores, and cache sizes above 0 B with l1d <= l2 <= l3.
    pub(super) fn validate(&self, origin: &str) -> Result<()> {
        if !(self.frequency.hz > 0.0) {
            return Err(ConfigError::new(origin, "cpu.frequency", Some(format!("{:?}", self.frequency.to_string())), "a frequency above 0 Hz").into());
        }
        if self.cores == 0 || self.cores > 4096 {
            return Err(ConfigError::new(origin, "cpu.cores", Some(self.cores.to_string()), "a number of cores from 1 to 4096").into());
        }
        let c = &self.caches;
        if c.l1d.bytes == 0 || c.l2.bytes < c.l1d.bytes || c.l3.bytes < c.l2.bytes {
            return Err(ConfigError::new(
                origin,
                "cpu.caches",
                Some(format!("l1d {}, l2 {}, l3 {}", c.l1d, c.l2, c.l3)),
                "cache sizes above 0 B with l1d <= l2 <= l3",
            )
            .into());
        }
        Ok(())
    }
}
