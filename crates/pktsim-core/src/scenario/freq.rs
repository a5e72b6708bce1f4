//! `[cpu.freq]`: the clock a core runs at below full load — Linux cpufreq's governor and
//! its lowest frequency (`Documentation/admin-guide/pm/cpufreq.rst`,
//! `Documentation/admin-guide/pm/intel_pstate.rst`) — and its checks.
//!
//! ```toml
//! [cpu.freq]
//! governor = "powersave"   # performance | powersave | schedutil  (scaling_governor)
//! min = "1.2GHz"           # scaling_min_freq
//! ```
//!
//! `cpu.frequency` is the clock at full load (`scaling_max_freq`, turbo included where the
//! machine turbos) and every CPU cost of the scenario is stated at it. A governor that
//! scales the clock down makes the same work take longer at light load, so the core is
//! busy for a larger share of its time than the work alone says (`mpstat`'s %idle falls):
//!
//! | governor | what it asks for after each sample | steady state |
//! |---|---|---|
//! | `performance` | `cpu.frequency` | every cost as stated |
//! | `powersave` | intel_pstate without HWP (`get_target_pstate`): 1.25 x max x the share of the last sample the core was busy (`mperf / tsc`), not below `min` | f = 1.25 x max x busy(f): busy = sqrt(0.8 w) for work w at max, until `min` |
//! | `schedutil` | `get_next_freq`: 1.25 x max x the frequency-invariant utilisation (busy x f / max) | busy(f) = 0.8, between `min` and max |
//!
//! The governors sample every few ms (intel_pstate: 10 ms) and the load of a run is
//! steady, so pktsim runs the node at the governor's steady state: the frequency `f` at
//! which the governor asks for `f` given the core's busy share at `f` (the analytical
//! model's, the busiest core's: the cores of a node share one policy here). Every CPU cost
//! then takes `cpu.frequency / f` times as long (the work is taken to be bound by the core
//! clock); what does not run on the core does not change: an idle state's exit latency and
//! refill (memory), a wake-up's IPI latency, the NIC, the interference.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::error::{ConfigError, Result};
use crate::units::Frequency;

/// The cpufreq governor (`/sys/devices/system/cpu/cpuN/cpufreq/scaling_governor`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum FreqGovernor {
    /// The highest frequency at any load (also a machine without cpufreq, as a VM).
    #[default]
    Performance,
    /// `intel_pstate` in active mode without HWP: 1.25 x max x the busy share of the last
    /// sample, at least `min` (`drivers/cpufreq/intel_pstate.c`, `get_target_pstate`).
    Powersave,
    /// `schedutil`: 1.25 x max x the frequency-invariant utilisation, at least `min`
    /// (`kernel/sched/cpufreq_schedutil.c`, `get_next_freq`).
    Schedutil,
}

/// `[cpu.freq]`: the governor that sets the core clock below full load and the lowest
/// clock it may set. Default `performance`: every cost at `cpu.frequency`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Freq {
    /// The governor (`scaling_governor`).
    #[serde(default)]
    #[schemars(extend("x-linux" = "/sys/devices/system/cpu/cpuN/cpufreq/scaling_governor"))]
    pub governor: FreqGovernor,
    /// The lowest clock the governor sets (`scaling_min_freq`, e.g. "1.2GHz" on a Xeon
    /// E5 v4); needed by `powersave` and `schedutil`, from 1% of `cpu.frequency` to all of
    /// it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-linux" = "/sys/devices/system/cpu/cpuN/cpufreq/scaling_min_freq"))]
    pub min: Option<Frequency>,
}

/// intel_pstate's and schedutil's headroom: they ask for 1.25 times the clock the last
/// sample's load needed (`target += target >> 2`; `freq + (freq >> 2)`).
pub const HEADROOM: f64 = 1.25;

impl Freq {
    /// Whether the clock can fall below `cpu.frequency`.
    pub fn scales(&self) -> bool {
        self.governor != FreqGovernor::Performance
    }

    /// `min` is given for a scaling governor, from 1% of `max_hz` (no processor scales
    /// further; every cost then stays far from wrapping the clock) to `max_hz`; not given
    /// with `performance`, which does not read it.
    pub(super) fn validate(&self, origin: &str, max_hz: f64) -> Result<()> {
        match (self.scales(), self.min) {
            (true, None) => Err(ConfigError::new(
                origin,
                "cpu.freq.min",
                None,
                format!(
                    "a value with cpu.freq.governor = {:?}, which has no default for it (scaling_min_freq, e.g. \"1.2GHz\")",
                    self.name()
                ),
            )
            .into()),
            (false, Some(m)) => Err(ConfigError::new(
                origin,
                "cpu.freq.min",
                Some(format!("{:?}", m.to_string())),
                "no cpu.freq.min with cpu.freq.governor = \"performance\" (it runs at cpu.frequency)",
            )
            .into()),
            (true, Some(m)) if !(m.hz >= max_hz / 100.0 && m.hz <= max_hz) => Err(ConfigError::new(
                origin,
                "cpu.freq.min",
                Some(format!("{:?}", m.to_string())),
                format!(
                    "a frequency from 1% of cpu.frequency to all of it ({} to {})",
                    Frequency::from_hz(max_hz / 100.0),
                    Frequency::from_hz(max_hz)
                ),
            )
            .into()),
            _ => Ok(()),
        }
    }

    /// The governor's name as the scenario format writes it.
    pub fn name(&self) -> &'static str {
        match self.governor {
            FreqGovernor::Performance => "performance",
            FreqGovernor::Powersave => "powersave",
            FreqGovernor::Schedutil => "schedutil",
        }
    }

    /// The clock the governor asks for, in Hz, after a sample in which a core at `f_hz`
    /// was busy `busy` of the time (0..1), with `max_hz` its highest clock.
    pub fn request_hz(&self, f_hz: f64, busy: f64, max_hz: f64) -> f64 {
        let want = match self.governor {
            FreqGovernor::Performance => return max_hz,
            FreqGovernor::Powersave => HEADROOM * max_hz * busy,
            FreqGovernor::Schedutil => HEADROOM * f_hz * busy,
        };
        want.clamp(self.min.map_or(max_hz, |m| m.hz), max_hz)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::config_error;

    fn freq(text: &str) -> Result<Freq> {
        let f: Freq = toml::from_str(text).map_err(|e| crate::error::Error::Invalid(e.to_string()))?;
        f.validate("t", 3.6e9)?;
        Ok(f)
    }

    #[test]
    fn a_scaling_governor_needs_a_lowest_clock_at_most_the_highest() {
        assert_eq!(freq("").unwrap(), Freq::default());
        assert!(freq("governor = \"powersave\"\nmin = \"1.2GHz\"").is_ok());
        let e = config_error(freq("governor = \"schedutil\""));
        assert_eq!(e.path, "cpu.freq.min");
        assert!(e.to_string().contains("schedutil"), "{e}");
        let e = config_error(freq("governor = \"powersave\"\nmin = \"4GHz\""));
        assert_eq!(
            e.to_string(),
            "t: cpu.freq.min = \"4GHz\": expected a frequency from 1% of cpu.frequency to all of it (36MHz to 3.6GHz)"
        );
        assert_eq!(config_error(freq("governor = \"powersave\"\nmin = \"35MHz\"")).path, "cpu.freq.min");
        assert!(freq("governor = \"powersave\"\nmin = \"36MHz\"").is_ok());
        assert_eq!(config_error(freq("governor = \"powersave\"\nmin = \"0Hz\"")).path, "cpu.freq.min");
        assert_eq!(config_error(freq("min = \"1GHz\"")).path, "cpu.freq.min");
    }

    /// intel_pstate asks for 1.25 x max x busy, schedutil 1.25 x f x busy; both within
    /// [min, max].
    #[test]
    fn the_governors_ask_for_headroom_over_the_last_load() {
        let ps = Freq { governor: FreqGovernor::Powersave, min: Some(Frequency::from_hz(1.2e9)) };
        assert_eq!(ps.request_hz(2e9, 0.4, 4e9), 2e9);
        assert_eq!(ps.request_hz(2e9, 0.1, 4e9), 1.2e9);
        assert_eq!(ps.request_hz(2e9, 0.9, 4e9), 4e9);
        let su = Freq { governor: FreqGovernor::Schedutil, ..ps.clone() };
        assert_eq!(su.request_hz(2e9, 0.8, 4e9), 2e9);
        assert_eq!(su.request_hz(2e9, 0.4, 4e9), 1.2e9);
        assert_eq!(Freq::default().request_hz(1e9, 0.1, 4e9), 4e9);
    }
}
