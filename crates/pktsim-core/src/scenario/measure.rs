//! `[measure]`: what the simulator measures, and for how long; and its checks.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::error::{ConfigError, Result};
use crate::units::{Duration, TimeSpan};

/// Where a latency measurement starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum LatencyFrom {
    /// The frame's last bit received.
    WireIn,
    /// Its descriptor written to the rx ring (002 marker A).
    #[default]
    RxRing,
}

/// Where a latency measurement ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum LatencyTo {
    /// Its descriptor written to the tx ring (002 marker B).
    #[default]
    TxRing,
    /// Its last bit sent on the egress link.
    WireOut,
}

/// What to measure and for how long (simulated time).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MeasureSpec {
    /// Simulated time before statistics start.
    #[serde(default = "default_warmup")]
    pub warmup: TimeSpan,
    /// Simulated time measured after the warm-up.
    #[serde(default = "default_duration")]
    pub duration: TimeSpan,
    /// Constant added to every latency (hardware not modelled: 002 t_off, 001 T+).
    #[serde(default)]
    pub t_off: Duration,
    #[serde(default)]
    pub latency_from: LatencyFrom,
    #[serde(default)]
    pub latency_to: LatencyTo,
    /// Width of the time-series buckets (none: no time series).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interval: Option<TimeSpan>,
    /// 001's latency adder T+ = 4 T_DMA + 2 nic_batch x (x: the packet's service time).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub t_plus: Option<TPlus>,
    /// Batches for the 95% confidence interval of mean latencies (batch means).
    #[serde(default = "default_batches")]
    #[schemars(range(min = 2, max = 1000), extend("x-quantity" = "a number of batches"))]
    pub batches: u32,
}

/// Parameters of 001's T+.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TPlus {
    /// One DMA transfer (001: 2.56us); four per packet.
    pub t_dma: Duration,
    /// Packets batched by the NIC on average on each side (001: 8).
    pub nic_batch: u32,
}

fn default_batches() -> u32 {
    20
}

fn default_warmup() -> TimeSpan {
    TimeSpan::from_ps(10_000_000_000)
}
fn default_duration() -> TimeSpan {
    TimeSpan::from_ps(100_000_000_000)
}

impl Default for MeasureSpec {
    fn default() -> Self {
        MeasureSpec {
            warmup: default_warmup(),
            duration: default_duration(),
            t_off: Duration::default(),
            latency_from: LatencyFrom::default(),
            latency_to: LatencyTo::default(),
            interval: None,
            t_plus: None,
            batches: default_batches(),
        }
    }
}

impl MeasureSpec {
    /// 2 to 1000 batches, a duration above 0, and time-series buckets above 0 giving at most
    /// 1,000,000 buckets.
    pub(super) fn validate(&self, origin: &str) -> Result<()> {
        if self.duration.ps == 0 {
            return Err(ConfigError::new(
                origin,
                "measure.duration",
                Some(format!("{:?}", self.duration.to_string())),
                "a simulated time above 0",
            )
            .into());
        }
        if let Some(i) = self.interval {
            if i.ps == 0 || self.duration.ps / i.ps > 1_000_000 {
                return Err(ConfigError::new(
                    origin,
                    "measure.interval",
                    Some(format!("{:?}", i.to_string())),
                    "a bucket width above 0 giving at most 1,000,000 buckets over measure.duration",
                )
                .into());
            }
        }
        Ok(())
    }

    /// `latency_to` where every frame ends in the host (`ends`: how), with no egress for
    /// "wire-out" to measure to: refused (the latency runs to where the frame ends).
    pub(super) fn check_latency_end(&self, origin: &str, ends: Option<&str>) -> Result<()> {
        if let (LatencyTo::WireOut, Some(how)) = (self.latency_to, ends) {
            let expected =
                format!("\"tx-ring\" (the default): {how}, so no frame reaches the wire, and latency runs to that end");
            return Err(ConfigError::new(origin, "measure.latency_to", Some("\"wire-out\"".into()), expected).into());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::config_error;

    #[test]
    fn batches_range_from_2_to_1000() {
        assert!(MeasureSpec::default().validate("t").is_ok());
        let wire = MeasureSpec { latency_to: LatencyTo::WireOut, ..MeasureSpec::default() };
        assert_eq!(
            config_error(wire.check_latency_end("t", Some("an [app] reads every frame"))).path,
            "measure.latency_to"
        );
        assert!(wire.check_latency_end("t", None).is_ok());
        assert!(MeasureSpec::default().check_latency_end("t", Some("an [app] reads every frame")).is_ok());
        let range = |text: &str| super::super::ranges::check(&toml::from_str(text).unwrap(), "t").map_err(Into::into);
        assert_eq!(
            config_error(range("[measure]\nbatches = 1")).to_string(),
            "t: measure.batches = 1: expected a number of batches from 2 to 1000"
        );
        assert_eq!(config_error(range("[measure]\nbatches = 1001")).path, "measure.batches");
        assert!(range("[measure]\nbatches = 1000").is_ok());
    }

    #[test]
    fn at_most_a_million_time_series_buckets() {
        // 100 ms measured: 100 ns buckets are a million, 99 ns ones too many.
        let m = MeasureSpec { interval: Some(TimeSpan::from_ps(100_000)), ..MeasureSpec::default() };
        assert!(m.validate("t").is_ok());
        let m = MeasureSpec { interval: Some(TimeSpan::from_ps(99_000)), ..MeasureSpec::default() };
        assert_eq!(config_error(m.validate("t")).path, "measure.interval");
        let m = MeasureSpec { interval: Some(TimeSpan::from_ps(0)), ..MeasureSpec::default() };
        assert_eq!(config_error(m.validate("t")).path, "measure.interval");
    }

    #[test]
    fn a_duration_of_0_is_rejected() {
        let m = MeasureSpec { duration: TimeSpan::from_ps(0), ..MeasureSpec::default() };
        assert_eq!(config_error(m.validate("t")).path, "measure.duration");
    }
}
