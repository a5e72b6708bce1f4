//! `[cpu.idle]`: the idle states of a core and the governor that picks one (Linux cpuidle,
//! `Documentation/admin-guide/pm/cpuidle.rst`), and their checks.
//!
//! ```toml
//! [cpu.idle]
//! governor = "menu"          # menu | teo | haltpoll  (/sys/devices/system/cpu/cpuidle/current_governor)
//! table = "intel-skx"        # intel-skx | kvm-haltpoll | poll: a driver's state table
//! # or the states themselves (/sys/devices/system/cpu/cpuN/cpuidle/stateK/):
//! # states = [{ name = "POLL", latency = "0us", residency = "0us" },
//! #           { name = "C1", latency = "2us", residency = "2us" },
//! #           { name = "C6", latency = "133us", residency = "600us", flush = true }]
//! ```
//!
//! The tables, as the kernel's drivers declare them:
//!
//! | table | states (exit latency / target residency) | source |
//! |---|---|---|
//! | `intel-skx` | POLL 0/0, C1 2/2 us, C1E 10/20 us, C6 133/600 us (flushes L1 and L2) | `drivers/idle/intel_idle.c`, `skx_cstates` (Xeon Scalable, Skylake-SP and Cascade Lake) |
//! | `kvm-haltpoll` | POLL 0/0, halt 1/1 us | `drivers/cpuidle/cpuidle-haltpoll.c` (a KVM guest) |
//! | `poll` | POLL only: the core spins (`idle=poll`) | `Documentation/admin-guide/pm/cpuidle.rst` |
//!
//! What leaving a state costs: its exit latency, as delay before the work that woke the core
//! starts, and its `refill`, as CPU time that work takes longer. A state that keeps the
//! core's caches (POLL, C1, C1E: the core still answers snoops, Intel's datasheets) refills
//! nothing; one that flushes L1 and L2 to L3 (`flush`, C3 and deeper) refills by default the
//! whole L2 from L3: the L2's lines at the L3 hit latency (`cpu.caches`), ten lines in
//! flight at once (the line fill buffers of a core, Intel's optimization reference manual) —
//! 3.7 us on 000's Ivy Bridge caches at 3.3 GHz. `refill` given on a state replaces that.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::error::{ConfigError, Result};
use crate::fib::Caches;
use crate::units::{Duration, Frequency};

/// The cpuidle governor: how a core that runs out of work picks its idle state.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Governor {
    /// `menu`: predicts the idle time from the recent idle times (their mean when they
    /// agree, else a decaying mean) and takes the deepest state whose target residency fits
    /// it (`drivers/cpuidle/governors/menu.c`).
    #[default]
    Menu,
    /// `teo`: the deepest state that at least half of the recent idle times would have
    /// outlasted (`drivers/cpuidle/governors/teo.c`: the state that wake-ups "hit").
    Teo,
    /// `haltpoll` (a KVM guest): polls first, for a window that grows when a wake-up came
    /// just after it and shrinks when it came long after, then halts
    /// (`drivers/cpuidle/governors/haltpoll.c`, `Documentation/virt/guest-halt-polling.rst`).
    Haltpoll,
}

/// A driver's state table (see the module's table).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum IdleTable {
    /// `intel_idle`'s `skx_cstates`: POLL, C1, C1E, C6.
    #[default]
    IntelSkx,
    /// `cpuidle-haltpoll`: POLL, then a halt (an exit to the hypervisor).
    KvmHaltpoll,
    /// No idle state: the core polls (`idle=poll`, or power saving off).
    Poll,
}

/// One idle state (`/sys/devices/system/cpu/cpuN/cpuidle/stateK/`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct IdleState {
    /// The state's name (`name`).
    pub name: String,
    /// Exit latency: from the wake-up to the first instruction (`latency`).
    pub latency: Duration,
    /// Target residency: the shortest idle time for which the state pays off (`residency`).
    pub residency: Duration,
    /// The state flushes the core's L1 and L2 caches (C3 and deeper).
    #[serde(default)]
    pub flush: bool,
    /// CPU time the first work after this state takes longer (cold caches); default 0, or
    /// for a state that flushes the L2 refetched from L3 (see the section's doc).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refill: Option<Duration>,
    /// The idle time over which the refill grows to its whole value, in proportion: what a
    /// core that keeps its caches loses to others while it sleeps (the hypervisor and other
    /// guests on a VM's halt, the sibling thread). "0ns" (default): the whole refill after
    /// any idle time, as a state that flushes its caches on entry pays it.
    #[serde(default, skip_serializing_if = "Duration::is_zero")]
    pub refill_time: Duration,
    /// The governor never picks it (`disable`).
    #[serde(default)]
    pub disable: bool,
}

/// `[cpu.idle]`: the idle states of every core and their governor. A core that runs out of
/// work enters the state its governor picks; the interrupt or wake-up that ends it waits
/// for the state's exit latency, then its refill (CPU time, cold caches). Default: the
/// states of `intel_idle`'s Xeon Scalable table (POLL 0/0, C1 2/2 us, C1E 10/20 us, C6
/// 133/600 us exit latency / target residency; `drivers/idle/intel_idle.c`) under `menu`.
/// A state that flushes L1 and L2 (C3 and deeper) refills by default the L2 from L3 (its
/// lines at `cpu.caches.l3_latency`, 10 in flight: 3.7 us on 000's caches at 3.3 GHz); the
/// others keep their caches and refill nothing. `table = "poll"` for a core that never
/// sleeps (power saving off, `idle=poll`); `kvm-haltpoll` with `governor = "haltpoll"` for a
/// KVM guest. `pktsim import-host` reads a machine's own (cpuidle sysfs).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Idle {
    /// The governor that picks a state (`/sys/devices/system/cpu/cpuidle/current_governor`).
    #[serde(default)]
    #[schemars(extend("x-linux" = "/sys/devices/system/cpu/cpuidle/current_governor"))]
    pub governor: Governor,
    /// A driver's state table; default `intel-skx` when `states` is not given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub table: Option<IdleTable>,
    /// The states, shallowest first (instead of `table`), as
    /// `/sys/devices/system/cpu/cpuN/cpuidle/stateK/` lists them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub states: Option<Vec<IdleState>>,
    /// The CPU latency limit (PM QoS, `/dev/cpu_dma_latency`): no state whose exit latency
    /// exceeds it. None: no limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-linux" = "/dev/cpu_dma_latency"))]
    pub latency_limit: Option<Duration>,
    /// `haltpoll`: the longest poll before a halt.
    #[serde(default = "default_guest_halt_poll")]
    #[schemars(extend("x-linux" = "haltpoll.guest_halt_poll_ns"))]
    pub guest_halt_poll: Duration,
    /// `haltpoll`: the poll window a growth starts from.
    #[serde(default = "default_guest_halt_poll_grow_start")]
    #[schemars(extend("x-linux" = "haltpoll.guest_halt_poll_grow_start"))]
    pub guest_halt_poll_grow_start: Duration,
    /// `haltpoll`: the factor the window grows by when a wake-up came after it but within
    /// `guest_halt_poll`.
    #[serde(default = "two")]
    #[schemars(range(min = 1, max = 1024), extend("x-quantity" = "a factor"))]
    #[schemars(extend("x-linux" = "haltpoll.guest_halt_poll_grow"))]
    pub guest_halt_poll_grow: u32,
    /// `haltpoll`: the divisor the window shrinks by when a wake-up came after
    /// `guest_halt_poll` (0: to nothing at once).
    #[serde(default = "two")]
    #[schemars(range(min = 0, max = 1024), extend("x-quantity" = "a divisor"))]
    #[schemars(extend("x-linux" = "haltpoll.guest_halt_poll_shrink"))]
    pub guest_halt_poll_shrink: u32,
}

impl Default for Idle {
    fn default() -> Self {
        Idle {
            governor: Governor::default(),
            table: None,
            states: None,
            latency_limit: None,
            guest_halt_poll: default_guest_halt_poll(),
            guest_halt_poll_grow_start: default_guest_halt_poll_grow_start(),
            guest_halt_poll_grow: two(),
            guest_halt_poll_shrink: two(),
        }
    }
}

fn default_guest_halt_poll() -> Duration {
    Duration::from_ps(200_000_000)
}
fn default_guest_halt_poll_grow_start() -> Duration {
    Duration::from_ps(50_000_000)
}
fn two() -> u32 {
    2
}

const US: u64 = 1_000_000;

fn state(name: &str, latency_us: u64, residency_us: u64, flush: bool) -> IdleState {
    IdleState {
        name: name.into(),
        latency: Duration::from_ps(latency_us * US),
        residency: Duration::from_ps(residency_us * US),
        flush,
        refill: None,
        refill_time: Duration::default(),
        disable: false,
    }
}

impl IdleTable {
    /// The table's states, as its driver declares them.
    pub fn states(self) -> Vec<IdleState> {
        match self {
            IdleTable::IntelSkx => vec![
                state("POLL", 0, 0, false),
                state("C1", 2, 2, false),
                state("C1E", 10, 20, false),
                state("C6", 133, 600, true),
            ],
            IdleTable::KvmHaltpoll => vec![state("POLL", 0, 0, false), state("haltpoll idle", 1, 1, false)],
            IdleTable::Poll => vec![state("POLL", 0, 0, false)],
        }
    }
}

/// Line fill buffers of a core: the L1 misses it has in flight at once (Intel 64 and IA-32
/// Architectures Optimization Reference Manual: 10 on Sandy Bridge to Skylake).
pub const LINE_FILL_BUFFERS: u64 = 10;

/// A state as the simulator runs it: every cost resolved.
#[derive(Debug, Clone, PartialEq)]
pub struct ResolvedState {
    pub name: String,
    pub latency_ps: u64,
    pub residency_ps: u64,
    pub refill_ps: u64,
    pub refill_time_ps: u64,
    pub disable: bool,
}

impl ResolvedState {
    /// The refill after `idle_ps` in the state: the whole of it, or with a `refill_time`
    /// the share `min(idle, refill_time) / refill_time` of it.
    #[inline]
    pub fn refill_after_ps(&self, idle_ps: u64) -> u64 {
        if self.refill_time_ps == 0 || idle_ps >= self.refill_time_ps {
            return self.refill_ps;
        }
        // < refill_ps: the quotient fits in u64.
        (u128::from(self.refill_ps) * u128::from(idle_ps) / u128::from(self.refill_time_ps)) as u64
    }
}

impl Idle {
    /// The states the simulator runs, refills resolved with the node's caches and clock.
    pub fn resolved(&self, caches: &Caches, frequency: Frequency) -> Vec<ResolvedState> {
        let states = match &self.states {
            Some(s) => s.clone(),
            None => self.table.unwrap_or_default().states(),
        };
        states
            .into_iter()
            .map(|s| ResolvedState {
                refill_ps: s.refill.map_or_else(|| if s.flush { l2_refill_ps(caches, frequency) } else { 0 }, |d| d.ps),
                name: s.name,
                latency_ps: s.latency.ps,
                residency_ps: s.residency.ps,
                refill_time_ps: s.refill_time.ps,
                disable: s.disable,
            })
            .collect()
    }

    /// Whether the governor may pick `s`: enabled, and within the latency limit.
    pub fn usable(&self, s: &ResolvedState) -> bool {
        !s.disable && s.latency_ps <= self.latency_limit.map_or(u64::MAX, |d| d.ps)
    }

    /// Whether waking from a state the governor may pick costs anything (else the core
    /// never leaves C0 at a cost: only polling states).
    pub fn costs_something(&self, states: &[ResolvedState]) -> bool {
        states.iter().any(|s| self.usable(s) && (s.latency_ps > 0 || s.refill_ps > 0))
    }

    pub(super) fn validate(&self, origin: &str) -> Result<()> {
        let err = |path: &str, value: String, expected: &str| -> Result<()> {
            Err(ConfigError::new(origin, path, Some(value), expected).into())
        };
        if self.table.is_some() && self.states.is_some() {
            return err(
                "cpu.idle.states",
                "a list beside cpu.idle.table".into(),
                "either cpu.idle.table or cpu.idle.states, not both",
            );
        }
        const MAX_PS: u64 = 100_000 * US; // 100 ms
        if let Some(states) = &self.states {
            if states.is_empty() || states.len() > 16 {
                return err("cpu.idle.states", format!("{} states", states.len()), "from 1 to 16 states");
            }
            for (i, s) in states.iter().enumerate() {
                let p = |k: &str| format!("cpu.idle.states[{i}].{k}");
                if s.name.is_empty() || s.name.len() > 32 {
                    return err(&p("name"), format!("{:?}", s.name), "a name of 1 to 32 characters");
                }
                for (k, d) in [
                    ("latency", Some(s.latency)),
                    ("residency", Some(s.residency)),
                    ("refill", s.refill),
                    ("refill_time", Some(s.refill_time)),
                ] {
                    if d.is_some_and(|d| d.ps > MAX_PS) {
                        return err(
                            &p(k),
                            format!("{:?}", d.unwrap_or_default().to_string()),
                            "a duration from 0 to 100ms",
                        );
                    }
                }
                if i > 0 && s.latency.ps < states[i - 1].latency.ps {
                    return err(
                        &p("latency"),
                        format!("{:?}", s.latency.to_string()),
                        "states shallowest first: an exit latency no shorter than the state before's",
                    );
                }
            }
        }
        if self.latency_limit.is_some_and(|d| d.ps > MAX_PS) {
            let d = self.latency_limit.unwrap_or_default();
            return err("cpu.idle.latency_limit", format!("{:?}", d.to_string()), "a duration from 0 to 100ms");
        }
        for (k, d) in
            [("guest_halt_poll", self.guest_halt_poll), ("guest_halt_poll_grow_start", self.guest_halt_poll_grow_start)]
        {
            if d.ps > MAX_PS {
                return err(&format!("cpu.idle.{k}"), format!("{:?}", d.to_string()), "a duration from 0 to 100ms");
            }
        }
        if self.governor == Governor::Haltpoll {
            let states = match &self.states {
                Some(s) => s.clone(),
                None => self.table.unwrap_or_default().states(),
            };
            if states.first().is_none_or(|s| s.latency.ps != 0) {
                return err(
                    "cpu.idle.governor",
                    "\"haltpoll\"".into(),
                    "a first state that polls (exit latency 0), as haltpoll polls before it halts",
                );
            }
        }
        Ok(())
    }
}

/// The deepest usable state whose target residency fits `predicted_ps`, else the first
/// usable one (menu's choice; the simulator's and the model's).
pub fn deepest_within(states: &[ResolvedState], usable: &[bool], predicted_ps: u64) -> usize {
    let first = usable.iter().position(|&u| u).unwrap_or(0);
    (0..states.len()).rfind(|&i| usable[i] && states[i].residency_ps <= predicted_ps).unwrap_or(first)
}

/// haltpoll's halt: the first usable state after its poll (state 0).
pub fn halt_state(usable: &[bool]) -> usize {
    (1..usable.len()).find(|&i| usable[i]).unwrap_or(0)
}

/// The whole L2 refetched from L3: its lines at the L3 hit latency, [`LINE_FILL_BUFFERS`]
/// at a time.
pub fn l2_refill_ps(caches: &Caches, frequency: Frequency) -> u64 {
    let lines = caches.l2.bytes / 64;
    let cycles = lines as f64 * caches.l3_latency.cycles / LINE_FILL_BUFFERS as f64;
    (cycles / frequency.hz * 1e12).round() as u64
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::config_error;

    #[test]
    fn the_default_is_intel_skx_under_menu() {
        let i = Idle::default();
        let s = i.resolved(&Caches::default(), Frequency::from_hz(3.3e9));
        let names: Vec<&str> = s.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["POLL", "C1", "C1E", "C6"]);
        assert_eq!((s[3].latency_ps, s[3].residency_ps), (133 * US, 600 * US));
        assert_eq!(i.governor, Governor::Menu);
        // States that keep the caches refill nothing; C6 the L2 from L3: 256 KiB / 64 B
        // lines x 30 cycles / 10 in flight = 12,288 cycles = 3.72 us at 3.3 GHz.
        assert_eq!(s[2].refill_ps, 0);
        assert_eq!(s[3].refill_ps, 3_723_636);
        assert!(i.costs_something(&s));
        let poll = Idle { table: Some(IdleTable::Poll), ..Default::default() };
        assert!(!poll.costs_something(&poll.resolved(&Caches::default(), Frequency::from_hz(3.3e9))));
    }

    #[test]
    fn states_come_shallowest_first_and_not_beside_a_table() {
        let d = |t: &str| Duration::parse(t).unwrap();
        let st = |n: &str, l: &str| IdleState {
            name: n.into(),
            latency: d(l),
            residency: d(l),
            flush: false,
            refill: None,
            refill_time: Duration::default(),
            disable: false,
        };
        let ok = Idle { states: Some(vec![st("POLL", "0us"), st("C1", "2us")]), ..Default::default() };
        assert!(ok.validate("t").is_ok());
        let bad = Idle { states: Some(vec![st("C1", "2us"), st("POLL", "0us")]), ..Default::default() };
        assert_eq!(config_error(bad.validate("t")).path, "cpu.idle.states[1].latency");
        let both = Idle { table: Some(IdleTable::Poll), ..ok.clone() };
        assert_eq!(config_error(both.validate("t")).path, "cpu.idle.states");
        let hp = Idle { governor: Governor::Haltpoll, states: Some(vec![st("C1", "2us")]), ..Default::default() };
        assert_eq!(config_error(hp.validate("t")).path, "cpu.idle.governor");
        let long = Idle { latency_limit: Some(d("1s")), ..Default::default() };
        assert_eq!(config_error(long.validate("t")).path, "cpu.idle.latency_limit");
    }
}
