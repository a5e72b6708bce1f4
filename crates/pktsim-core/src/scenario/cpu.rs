//! `[cpu]`: the processor of the node, and its checks.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::freq::Freq;
use super::idle::Idle;
use crate::error::{ConfigError, Result};
use crate::fib::Caches;
use crate::units::{Cycles, Duration, Frequency};

/// The processor of the node.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Cpu {
    /// Core clock (turbo and power saving off, as in 000 V-A).
    pub frequency: Frequency,
    /// Cores forwarding packets, each with its own rx and tx rings.
    #[serde(default = "one_u32")]
    #[schemars(extend("x-linux" = "ethtool -L combined"))]
    pub cores: u32,
    /// Extra cycles per packet for each additional core contending for shared state (a
    /// shared tx-queue lock, the allocator). 0 gives 000's linear scaling.
    #[serde(default)]
    pub contention: Cycles,
    #[serde(default)]
    pub caches: Caches,
    #[serde(default)]
    pub interference: Interference,
    /// Idle states and their governor: what a core that runs out of work does, and what
    /// the next interrupt pays to wake it.
    #[serde(default)]
    pub idle: Idle,
    /// The cpufreq governor and the lowest clock: how much slower the same work runs
    /// below full load (`cpu.frequency` is the clock at full load).
    #[serde(default)]
    pub freq: Freq,
    /// The fair scheduling class: how tasks sharing a core (ksoftirqd, the application's
    /// thread) take turns.
    #[serde(default)]
    pub sched: Sched,
}

/// `[cpu.sched]`: the fair class (EEVDF, Linux 6.6 on) on each core.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Sched {
    /// The slice a task runs before another runnable task of its weight gets the core
    /// (`sysctl_sched_base_slice`, kernel/sched/fair.c: 0.70 ms x (1 + ilog2(online CPUs,
    /// at most 8)) since "sched: Reduce the default slice to avoid tasks getting an extra
    /// tick" (2ae891b82695, 2025, also in 6.6-stable), 0.75 ms before; a task's `se.slice`
    /// in /proc/PID/sched shows it). Default 2.8 ms: a server with 8 or more CPUs.
    #[serde(default = "default_base_slice")]
    #[schemars(extend("x-linux" = "/sys/kernel/debug/sched/base_slice_ns"))]
    pub base_slice: Duration,
    /// `CONFIG_IRQ_TIME_ACCOUNTING`: true, time in hard IRQs and softirqs is charged to no
    /// task; false, to the task they interrupted (`update_curr` then counts it in that
    /// task's runtime), so a reader whose receive calls run the softirq (on `local_bh_enable`)
    /// uses its turns up on it and ksoftirqd gets the rest. Default true: interrupts charge
    /// no task; `pktsim testbed validate --path share` reads the kernel's own configuration.
    #[serde(default = "yes")]
    #[schemars(extend("x-linux" = "CONFIG_IRQ_TIME_ACCOUNTING"))]
    pub irq_time_accounting: bool,
    /// The `HRTICK` scheduler feature: true, a task's slice ends when it is used (a
    /// high-resolution timer); false, the kernel sees it at the next tick or scheduling
    /// event on the core, so two busy tasks take turns of whole jiffies (4 ms at HZ 250)
    /// and a woken reader can wait that long. Default false, the kernel's default
    /// (kernel/sched/features.h: `SCHED_FEAT(HRTICK, false)`).
    #[serde(default)]
    #[schemars(extend("x-linux" = "/sys/kernel/debug/sched/features: HRTICK"))]
    pub hrtick: bool,
}

fn yes() -> bool {
    true
}

fn default_base_slice() -> Duration {
    Duration::from_ps(2_800_000_000)
}

impl Default for Sched {
    fn default() -> Self {
        Sched { base_slice: default_base_slice(), irq_time_accounting: true, hrtick: false }
    }
}

/// `[cpu.interference]`: what takes each forwarding core away from the packets now and
/// then — the scheduler tick and other preemptions (timers, RCU, kworkers, the
/// hypervisor) — as `pktsim testbed probe` measures them. Off by default.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Interference {
    /// Period of the scheduler tick (1 / CONFIG_HZ, e.g. "4ms"); 0: no tick.
    #[serde(default)]
    pub tick_period: Duration,
    /// CPU time of one tick, drawn uniformly from these values (e.g. the quantiles the
    /// probe measured).
    #[serde(default)]
    pub t_tick: Vec<Duration>,
    /// Rate of the other preemptions, a Poisson process ("700Hz"); 0: none.
    #[serde(default = "zero_hz")]
    pub rate: Frequency,
    /// Length of one preemption, drawn uniformly from these values.
    #[serde(default)]
    pub t_preempt: Vec<Duration>,
}

pub(super) fn zero_hz() -> Frequency {
    Frequency::from_hz(0.0)
}

impl Interference {
    /// Whether anything interferes.
    pub fn is_on(&self) -> bool {
        self.tick_period.ps > 0 || self.rate.hz > 0.0
    }

    fn validate(&self, origin: &str) -> Result<()> {
        const MAX_VALUES: usize = 1000;
        const MAX_PS: u64 = 1_000_000_000_000; // 1 s
        let p = self.tick_period.ps;
        if p > 0 && !(1_000_000..=MAX_PS).contains(&p) {
            return Err(ConfigError::new(
                origin,
                "cpu.interference.tick_period",
                Some(format!("{:?}", self.tick_period.to_string())),
                "0, or a period from 1us to 1s",
            )
            .into());
        }
        if !(self.rate.hz >= 0.0 && self.rate.hz <= 1e6) {
            return Err(ConfigError::new(
                origin,
                "cpu.interference.rate",
                Some(format!("{:?}", self.rate.to_string())),
                "a rate from 0 Hz to 1 MHz",
            )
            .into());
        }
        for (key, on, values) in [("t_tick", p > 0, &self.t_tick), ("t_preempt", self.rate.hz > 0.0, &self.t_preempt)] {
            let path = format!("cpu.interference.{key}");
            if on && values.is_empty() {
                return Err(ConfigError::new(
                    origin,
                    &path,
                    Some("[]".into()),
                    "one or more times to draw from (the tick or rate is set)",
                )
                .into());
            }
            if values.len() > MAX_VALUES || values.iter().any(|d| d.ps > MAX_PS) {
                return Err(ConfigError::new(
                    origin,
                    &path,
                    Some(format!("{} values", values.len())),
                    "at most 1000 times, each at most 1s",
                )
                .into());
            }
        }
        if p > 0 && self.t_tick.iter().any(|d| d.ps >= p) {
            return Err(ConfigError::new(
                origin,
                "cpu.interference.t_tick",
                Some(format!("{:?}", self.t_tick.iter().map(|d| d.to_string()).collect::<Vec<_>>())),
                "times shorter than the tick period",
            )
            .into());
        }
        Ok(())
    }
}

fn one_u32() -> u32 {
    1
}

impl Cpu {
    /// A clock above 0 Hz, 1 to 4096 cores, and cache sizes above 0 B with l1d <= l2 <= l3.
    pub(super) fn validate(&self, origin: &str) -> Result<()> {
        let slice = self.sched.base_slice;
        if !(10_000_000..=1_000_000_000_000).contains(&slice.ps) {
            return Err(ConfigError::new(
                origin,
                "cpu.sched.base_slice",
                Some(format!("{:?}", slice.to_string())),
                "a slice from 10us to 1s",
            )
            .into());
        }
        if !(self.frequency.hz > 0.0) {
            return Err(ConfigError::new(
                origin,
                "cpu.frequency",
                Some(format!("{:?}", self.frequency.to_string())),
                "a frequency above 0 Hz",
            )
            .into());
        }
        if self.cores == 0 || self.cores > 4096 {
            return Err(ConfigError::new(
                origin,
                "cpu.cores",
                Some(self.cores.to_string()),
                "a number of cores from 1 to 4096",
            )
            .into());
        }
        self.interference.validate(origin)?;
        self.idle.validate(origin)?;
        self.freq.validate(origin, self.frequency.hz)?;
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
        Cpu {
            frequency: Frequency::from_hz(3.3e9),
            cores,
            contention: Cycles::default(),
            caches: Caches::default(),
            interference: Interference::default(),
            idle: Idle::default(),
            freq: Freq::default(),
            sched: Sched::default(),
        }
    }

    #[test]
    fn cores_range_from_1_to_4096() {
        assert!(cpu(1).validate("t").is_ok());
        assert!(cpu(4096).validate("t").is_ok());
        assert_eq!(
            config_error(cpu(0).validate("t")).to_string(),
            "t: cpu.cores = 0: expected a number of cores from 1 to 4096"
        );
        assert_eq!(config_error(cpu(4097).validate("t")).path, "cpu.cores");
    }

    #[test]
    fn interference_needs_times_to_draw_and_a_tick_longer_than_them() {
        use crate::units::Duration;
        let d = |t: &str| Duration::parse(t).unwrap();
        let with = |i: Interference| Cpu { interference: i, ..cpu(1) }.validate("t");
        assert!(with(Interference::default()).is_ok());
        let tick = Interference { tick_period: d("4ms"), t_tick: vec![d("40us")], ..Default::default() };
        assert!(with(tick.clone()).is_ok() && tick.is_on());
        let e = config_error(with(Interference { t_tick: vec![], ..tick.clone() }));
        assert_eq!(
            (e.path.as_str(), e.expected.as_str()),
            ("cpu.interference.t_tick", "one or more times to draw from (the tick or rate is set)")
        );
        assert_eq!(
            config_error(with(Interference { t_tick: vec![d("5ms")], ..tick.clone() })).path,
            "cpu.interference.t_tick"
        );
        assert_eq!(
            config_error(with(Interference { tick_period: d("100ns"), ..tick.clone() })).path,
            "cpu.interference.tick_period"
        );
        let rate = Interference { rate: Frequency::from_hz(700.0), ..Default::default() };
        assert_eq!(config_error(with(rate.clone())).path, "cpu.interference.t_preempt");
        assert!(with(Interference { t_preempt: vec![d("2us")], ..rate.clone() }).is_ok());
        assert_eq!(
            config_error(with(Interference { rate: Frequency::from_hz(-1.0), ..rate })).path,
            "cpu.interference.rate"
        );
    }

    #[test]
    fn a_clock_of_0_hz_is_rejected() {
        let c = Cpu { frequency: Frequency::from_hz(0.0), ..cpu(1) };
        assert_eq!(
            config_error(c.validate("t")).to_string(),
            "t: cpu.frequency = \"0Hz\": expected a frequency above 0 Hz"
        );
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
