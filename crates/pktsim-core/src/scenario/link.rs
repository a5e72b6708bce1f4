//! `[link]`: the link packets arrive on, its line rate in packets per second, and its check.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::error::{ConfigError, Result};
use crate::units::{BitRate, Bytes};

/// The link packets arrive on (and leave by).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Link {
    /// Line rate.
    pub rate: BitRate,
    /// Per-frame overhead on the wire: preamble + SFD (8 B) and inter-frame gap (12 B).
    #[serde(default = "default_overhead")]
    pub overhead: Bytes,
}

fn default_overhead() -> Bytes {
    Bytes::new(20)
}

impl Link {
    /// A line rate above 0 bit/s.
    pub(super) fn validate(&self, origin: &str) -> Result<()> {
        if !(self.rate.bps > 0.0) {
            return Err(ConfigError::new(
                origin,
                "link.rate",
                Some(format!("{:?}", self.rate.to_string())),
                "a line rate above 0 bit/s",
            )
            .into());
        }
        Ok(())
    }
}

/// Packets per second a link carries at line rate: `rate / (8 * (frame + overhead))`.
/// 64 B frames at 10 Gbit/s with 20 B overhead: 14.880952 Mpps.
pub fn line_rate_pps(link_bps: f64, mean_frame_bytes: f64, overhead_bytes: f64) -> f64 {
    link_bps / (8.0 * (mean_frame_bytes + overhead_bytes))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::config_error;

    #[test]
    fn a_rate_of_0_is_rejected() {
        let link = Link { rate: BitRate::from_bps(0.0), overhead: default_overhead() };
        assert_eq!(
            config_error(link.validate("t")).to_string(),
            "t: link.rate = \"0bit/s\": expected a line rate above 0 bit/s"
        );
        let link = Link { rate: BitRate::from_bps(f64::NAN), overhead: default_overhead() };
        assert_eq!(config_error(link.validate("t")).path, "link.rate");
        assert!(Link { rate: BitRate::from_bps(1e10), overhead: default_overhead() }.validate("t").is_ok());
    }

    #[test]
    fn ten_gigabit_carries_14_88_mpps_of_64_byte_frames() {
        assert!((line_rate_pps(10e9, 64.0, 20.0) - 14_880_952.380952).abs() < 1e-3);
    }
}
