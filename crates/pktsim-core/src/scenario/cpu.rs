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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::config_error;
    use crate::units::Bytes;

    fn cpu(cores: u32) -> Cpu {
        Cpu { frequency: Frequency::from_hz(3.3e9), cores, contention: Cycles::default(), caches: Caches::default() }
    }

    #[test]
    fn cores_range_from_1_to_4096() {
        assert!(cpu(1).validate("t").is_ok());
        assert!(cpu(4096).validate("t").is_ok());
        assert_eq!(config_error(cpu(0).validate("t")).to_string(), "t: cpu.cores = 0: expected a number of cores from 1 to 4096");
        assert_eq!(config_error(cpu(4097).validate("t")).path, "cpu.cores");
    }

    #[test]
    fn a_clock_of_0_hz_is_rejected() {
        let c = Cpu { frequency: Frequency::from_hz(0.0), ..cpu(1) };
        assert_eq!(config_error(c.validate("t")).to_string(), "t: cpu.frequency = \"0Hz\": expected a frequency above 0 Hz");
    }

    #[test]
    fn caches_grow_from_l1d_to_l3() {
        let mut c = cpu(1);
        c.caches.l2 = Bytes::new(c.caches.l1d.bytes - 1);
        assert_eq!(config_error(c.validate("t")).path, "cpu.caches");
        let mut c = cpu(1);
        c.caches.l3 = Bytes::new(c.caches.l2.bytes - 1);
        assert_eq!(config_error(c.validate("t")).path, "cpu.caches");
        let mut c = cpu(1);
        c.caches.l1d = Bytes::new(0);
        assert_eq!(config_error(c.validate("t")).path, "cpu.caches");
    }
}
