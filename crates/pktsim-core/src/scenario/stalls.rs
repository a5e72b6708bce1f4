//! `[[traffic.stalls]]`: the sender's stalls. A software generator paces its frames, but
//! its CPU is now and then taken away (the scheduler, another task on that CPU, the
//! hypervisor); the frames that fall due meanwhile leave together when it comes back, back
//! to back on the link. Each entry is a kind of stall: they start as a Poisson process of
//! `rate`, each lasting a length drawn uniformly from `length` (e.g. the quantiles
//! `pktsim-tb gen` measured of its own lateness); every frame due within a stall leaves at
//! its end. Several kinds keep rare long stalls (a few per second, milliseconds long) apart
//! from frequent short ones, so that a draw from a list of quantiles does not lose them. The frames move, their
//! number does not: the offered rate stays `traffic.rate`, so the analytical model, which
//! works with mean rates, is unchanged; the simulator's losses and latency tails are not.
//! The behaviour is `engine::stalls`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::cpu::zero_hz;
use crate::error::{ConfigError, Result};
use crate::units::{Duration, Frequency};

/// One kind of the sender's stalls (`[[traffic.stalls]]`, synthetic traffic). None by
/// default.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Stalls {
    /// How often a stall begins, a Poisson process ("300Hz"); 0: never.
    #[serde(default = "zero_hz")]
    pub rate: Frequency,
    /// How long one lasts, drawn uniformly from these values.
    #[serde(default)]
    pub length: Vec<Duration>,
}

/// Most lengths to draw from, and the longest one (1 s).
const MAX_VALUES: usize = 1000;
const MAX_PS: u64 = 1_000_000_000_000;
/// Most kinds of stalls.
const MAX_KINDS: usize = 16;

impl Stalls {
    /// Whether the sender stalls at all.
    pub fn is_on(&self) -> bool {
        self.rate.hz > 0.0
    }

    /// Each kind: a rate from 0 to 1 MHz; with a rate, 1 to 1000 lengths of at most 1 s;
    /// at most 16 kinds.
    pub(super) fn validate_all(all: &[Stalls], origin: &str) -> Result<()> {
        if all.len() > MAX_KINDS {
            return Err(ConfigError::new(
                origin,
                "traffic.stalls",
                Some(format!("{} kinds", all.len())),
                "at most 16 kinds of stalls",
            )
            .into());
        }
        all.iter().enumerate().try_for_each(|(i, s)| s.validate(origin, &format!("traffic.stalls[{i}]")))
    }

    fn validate(&self, origin: &str, at: &str) -> Result<()> {
        if !(self.rate.hz >= 0.0 && self.rate.hz <= 1e6) {
            return Err(ConfigError::new(
                origin,
                format!("{at}.rate"),
                Some(format!("{:?}", self.rate.to_string())),
                "a rate from 0 Hz to 1 MHz",
            )
            .into());
        }
        if self.is_on() && self.length.is_empty() {
            return Err(ConfigError::new(
                origin,
                format!("{at}.length"),
                Some("[]".into()),
                "one or more lengths to draw from (its rate is set)",
            )
            .into());
        }
        if self.length.len() > MAX_VALUES || self.length.iter().any(|d| d.ps > MAX_PS) {
            return Err(ConfigError::new(
                origin,
                format!("{at}.length"),
                Some(format!("{} values", self.length.len())),
                "at most 1000 lengths, each at most 1s",
            )
            .into());
        }
        Ok(())
    }

    /// The lengths in ps, for the generator.
    pub fn lengths_ps(&self) -> Vec<f64> {
        self.length.iter().map(|d| d.ps as f64).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::config_error;

    #[test]
    fn a_rate_needs_lengths_and_both_stay_in_range() {
        let d = |t: &str| Duration::parse(t).unwrap();
        let check = |s: Stalls| Stalls::validate_all(&[Stalls::default(), s], "t");
        let on = Stalls { rate: Frequency::from_hz(300.0), length: vec![] };
        assert_eq!(config_error(check(on.clone())).path, "traffic.stalls[1].length");
        assert!(check(Stalls { length: vec![d("5us")], ..on.clone() }).is_ok());
        let long = Stalls { length: vec![d("2s")], ..on.clone() };
        assert_eq!(config_error(check(long)).path, "traffic.stalls[1].length");
        let fast = Stalls { rate: Frequency::from_hz(2e6), length: vec![d("1us")] };
        assert_eq!(config_error(check(fast)).path, "traffic.stalls[1].rate");
        assert!(check(Stalls::default()).is_ok() && !Stalls::default().is_on());
        assert_eq!(config_error(Stalls::validate_all(&vec![Stalls::default(); 17], "t")).path, "traffic.stalls");
    }
}
