//! Idle states (`[cpu.idle]`): a core that runs out of work enters the state its governor
//! picks; the next interrupt or wake-up pays the state's exit latency (as delay: the work
//! starts that much later) and its refill (as CPU time: cold caches).
//!
//! ```text
//!   core runs out of work at t0 --> governor: predicted idle time p
//!        menu      p = min(typical recent idle time, decaying mean of idle times)
//!        teo       the deepest state at least half the recent idle times outlasted
//!        haltpoll  poll up to the window w, then the halt state
//!     --> state s: the deepest enabled one with residency <= p, latency <= latency_limit
//!   woken at t1 (an interrupt, a timer, a thread's wake-up)
//!     --> work starts at t1 + latency(s); it runs refill(s) longer (Activity::Refill)
//!     --> s counted: entries, time, above (t1 - t0 < residency(s): too deep), below (a
//!         deeper enabled state's residency fitted: too shallow); haltpoll adapts w
//! ```
//!
//! The sources: `Documentation/admin-guide/pm/cpuidle.rst` (states, governors, sysfs),
//! `drivers/cpuidle/governors/menu.c` (`get_typical_interval`: the mean of the last eight
//! idle times once their spread is small, dropping the longest up to two times; the
//! correction factor, a decaying mean with weight 1/8, which with no timer on the core
//! makes the prediction the decaying mean of the idle times), `teo.c` (states chosen by
//! which ones recent wake-ups "hit"), `haltpoll.c` (`adjust_poll_limit`: grow by
//! `guest_halt_poll_grow` from `guest_halt_poll_grow_start` when the wake-up came after the
//! window but within `guest_halt_poll_ns`, shrink by `guest_halt_poll_shrink` when it came
//! later). The figures are per state, like `cpupower monitor` and the sysfs `usage`, `time`,
//! `above` and `below` counters.
//!
//! Every decision is integer arithmetic on picoseconds: the same scenario and seed give the
//! same states.

use serde::Serialize;

use super::time::{Instant, Span};
use crate::scenario::{deepest_within, halt_state, Governor, Idle as Spec, ResolvedState};

/// Idle times menu and teo look back on (menu.c's `INTERVALS`).
const INTERVALS: usize = 8;
/// What menu predicts with no history: the next tick of a 250 Hz kernel (its correction
/// factor starts at 1 against the sleep length).
const FIRST_PREDICTION_PS: u64 = 4_000_000_000;

#[derive(Debug, Clone, Default)]
struct Core {
    /// Asleep since then, in this state (for haltpoll: the poll window it started with).
    since: Option<(Instant, usize, u64)>,
    intervals: [u64; INTERVALS],
    next: usize,
    seen: usize,
    /// menu's decaying mean of the idle times.
    mean_ps: u64,
    /// haltpoll's poll window.
    poll_limit_ps: u64,
}

/// One state's figures over the window.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct StateReport {
    pub name: String,
    pub latency_ns: f64,
    pub residency_ns: f64,
    pub refill_ns: f64,
    /// Times a core entered it.
    pub entries: u64,
    /// Share of the cores' time spent in it (all cores that sleep, like `cpupower monitor`).
    pub time_share: f64,
    /// Entries left before the target residency (the state was too deep).
    pub above: u64,
    /// Entries after which a deeper state would have paid off (too shallow).
    pub below: u64,
    #[serde(skip)]
    time_ps: u128,
}

/// The idle states' figures (`idle` in a run's result).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct IdleReport {
    pub governor: String,
    pub states: Vec<StateReport>,
    /// Wake-ups from a state, per second of the window.
    pub wakeups_per_s: f64,
    /// Mean exit latency a wake-up paid.
    pub mean_exit_latency_ns: f64,
}

/// The idle states of a node's cores.
#[derive(Debug, Clone, Default)]
pub struct Idle {
    on: bool,
    governor: Governor,
    states: Vec<ResolvedState>,
    /// The states the governor may pick (enabled, within the latency limit).
    usable: Vec<bool>,
    cores: Vec<Core>,
    halt_poll_ps: u64,
    grow_start_ps: u64,
    grow: u64,
    shrink: u64,
    warm: Instant,
    stop: Instant,
    report: Vec<StateReport>,
    wakeups: u64,
    exit_latency_ps: u128,
}

/// What a wake-up costs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Wake {
    pub latency: Span,
    pub refill: Span,
}

impl Idle {
    /// The cores' idle states; `sleeps`: whether the I/O mode's cores sleep when out of work
    /// (a polling mode's never do). Off (no cost anywhere) when every usable state polls.
    pub fn new(spec: &Spec, states: Vec<ResolvedState>, sleeps: bool, warm: Instant, stop: Instant) -> Self {
        let usable: Vec<bool> = states.iter().map(|s| spec.usable(s)).collect();
        let costly = spec.costs_something(&states);
        let report = states
            .iter()
            .map(|s| StateReport {
                name: s.name.clone(),
                latency_ns: s.latency_ps as f64 / 1e3,
                residency_ns: s.residency_ps as f64 / 1e3,
                refill_ns: s.refill_ps as f64 / 1e3,
                ..Default::default()
            })
            .collect();
        Idle {
            on: sleeps && costly,
            governor: spec.governor,
            states,
            usable,
            cores: Vec::new(),
            halt_poll_ps: spec.guest_halt_poll.ps,
            grow_start_ps: spec.guest_halt_poll_grow_start.ps,
            grow: spec.guest_halt_poll_grow as u64,
            shrink: spec.guest_halt_poll_shrink as u64,
            warm,
            stop,
            report,
            wakeups: 0,
            exit_latency_ps: 0,
        }
    }

    /// No idle states (tests, a chain's collector).
    pub fn off() -> Self {
        Idle::default()
    }

    /// Whether waking a core can cost anything.
    #[inline(always)]
    pub fn is_on(&self) -> bool {
        self.on
    }

    fn core(&mut self, c: usize) -> &mut Core {
        if c >= self.cores.len() {
            let first = Core { mean_ps: FIRST_PREDICTION_PS, poll_limit_ps: 0, ..Default::default() };
            self.cores.resize(c + 1, first);
        }
        &mut self.cores[c]
    }

    /// Core `c` runs out of work at `t`: its governor picks a state.
    #[inline]
    pub fn enter(&mut self, c: usize, t: Instant) {
        if !self.on {
            return;
        }
        let (state, window) = self.select(c);
        self.core(c).since = Some((t, state, window));
    }

    /// The deepest usable state whose residency fits `predicted_ps` (the first usable one
    /// when none fits).
    fn deepest_within(&self, predicted_ps: u64) -> usize {
        deepest_within(&self.states, &self.usable, predicted_ps)
    }

    fn select(&mut self, c: usize) -> (usize, u64) {
        let governor = self.governor;
        let core = self.core(c).clone();
        let recent = &core.intervals[..core.seen.min(INTERVALS)];
        match governor {
            Governor::Menu => {
                let p = typical_interval(recent).map_or(core.mean_ps, |t| t.min(core.mean_ps));
                (self.deepest_within(p), 0)
            }
            Governor::Teo => {
                if recent.is_empty() {
                    return (self.deepest_within(u64::MAX), 0);
                }
                // The deepest state at least half the recent idle times outlasted.
                let outlasted = |i: usize| recent.iter().filter(|&&d| d >= self.states[i].residency_ps).count();
                let hit = (0..self.states.len()).rfind(|&i| self.usable[i] && 2 * outlasted(i) >= recent.len());
                (hit.unwrap_or_else(|| self.deepest_within(0)), 0)
            }
            Governor::Haltpoll => {
                // Poll (state 0) for the window, then halt (the next usable state).
                let halt = halt_state(&self.usable);
                if core.poll_limit_ps == 0 {
                    (halt, 0)
                } else {
                    (0, core.poll_limit_ps)
                }
            }
        }
    }

    /// The state core `c` would leave if woken at `t`, and when it entered it (a haltpoll
    /// poll that outlasted its window halted at its end); None when it is not asleep.
    fn left_at(&self, c: usize, t: Instant) -> Option<(usize, Option<Instant>)> {
        let (since, chosen, window) = self.cores.get(c)?.since?;
        if self.governor == Governor::Haltpoll && chosen == 0 && (t - since).ps() > window {
            let halt = halt_state(&self.usable);
            return Some((halt, Some(since + Span::from_ps(window))));
        }
        Some((chosen, None))
    }

    /// What waking core `c` at `t` would cost, without waking it.
    #[inline]
    pub fn peek(&self, c: usize, t: Instant) -> Wake {
        match self.left_at(c, t) {
            Some((s, halted_at)) if self.on => {
                let Some((since, _, _)) = self.cores[c].since else { return Wake::default() };
                self.wake_from(s, (t - halted_at.unwrap_or(since)).ps())
            }
            _ => Wake::default(),
        }
    }

    /// Core `c` is woken at `t`: what leaving its state costs (nothing when it was not
    /// asleep). Records the state's figures and teaches the governor the idle time.
    #[inline]
    pub fn exit(&mut self, c: usize, t: Instant) -> Wake {
        if !self.on {
            return Wake::default();
        }
        let Some((state, halted_at)) = self.left_at(c, t) else { return Wake::default() };
        let Some((since, _, window)) = self.core(c).since.take() else { return Wake::default() };
        let idle_ps = (t - since).ps();
        let (warm, stop) = (self.warm, self.stop);
        let in_window = since >= warm && since < stop;
        let overlap = |a: Instant, b: Instant| -> u128 {
            let (s, e) = (a.max(warm), b.min(stop));
            if e > s {
                (e - s).ps() as u128
            } else {
                0
            }
        };
        // haltpoll: a poll that outlasted its window halted at its end.
        if let Some(h) = halted_at {
            // The poll's share of the time, and its entry.
            let r = &mut self.report[0];
            r.time_ps += overlap(since, h);
            r.entries += u64::from(in_window);
        }
        let from = halted_at.unwrap_or(since);
        let s = &self.states[state];
        let wake = self.wake_from(state, (t - from).ps());
        let deeper_fits =
            (state + 1..self.states.len()).any(|i| self.usable[i] && idle_ps >= self.states[i].residency_ps);
        let too_deep = idle_ps < s.residency_ps;
        let r = &mut self.report[state];
        r.time_ps += overlap(from, t);
        if in_window {
            r.entries += 1;
            r.above += u64::from(too_deep);
            r.below += u64::from(!too_deep && deeper_fits);
        }
        if t >= warm && t < stop && wake.latency.ps() + wake.refill.ps() > 0 {
            self.wakeups += 1;
            self.exit_latency_ps += wake.latency.ps() as u128;
        }
        self.learn(c, idle_ps, window);
        wake
    }

    /// What leaving state `s` costs after `in_state_ps` in it.
    #[inline]
    fn wake_from(&self, s: usize, in_state_ps: u64) -> Wake {
        let s = &self.states[s];
        Wake { latency: Span::from_ps(s.latency_ps), refill: Span::from_ps(s.refill_after_ps(in_state_ps)) }
    }

    fn learn(&mut self, c: usize, idle_ps: u64, window: u64) {
        let (max, grow_start, grow, shrink) = (self.halt_poll_ps, self.grow_start_ps, self.grow, self.shrink);
        let haltpoll = self.governor == Governor::Haltpoll;
        let core = self.core(c);
        core.intervals[core.next] = idle_ps;
        core.next = (core.next + 1) % INTERVALS;
        core.seen = core.seen.saturating_add(1);
        core.mean_ps = core.mean_ps - core.mean_ps / 8 + idle_ps / 8;
        if haltpoll {
            // adjust_poll_limit: grow when the wake-up came after the window but within
            // the longest poll, shrink when it came later.
            let w = window.max(core.poll_limit_ps);
            if idle_ps > w && idle_ps <= max {
                core.poll_limit_ps = w.saturating_mul(grow).max(grow_start).min(max);
            } else if idle_ps > max {
                core.poll_limit_ps = w.checked_div(shrink).unwrap_or(0);
            }
        }
    }

    /// The states' figures over a window of `window` on `cores` sleeping cores.
    pub fn report(&self, window: Span, cores: usize) -> Option<IdleReport> {
        if !self.on {
            return None;
        }
        let total = window.ps() as f64 * cores.max(1) as f64;
        let states = self
            .report
            .iter()
            .map(|r| StateReport { time_share: if total > 0.0 { r.time_ps as f64 / total } else { 0.0 }, ..r.clone() })
            .collect();
        let secs = window.ps() as f64 / 1e12;
        Some(IdleReport {
            governor: match self.governor {
                Governor::Menu => "menu",
                Governor::Teo => "teo",
                Governor::Haltpoll => "haltpoll",
            }
            .into(),
            states,
            wakeups_per_s: if secs > 0.0 { self.wakeups as f64 / secs } else { 0.0 },
            mean_exit_latency_ns: if self.wakeups > 0 {
                self.exit_latency_ps as f64 / self.wakeups as f64 / 1e3
            } else {
                0.0
            },
        })
    }
}

/// menu's `get_typical_interval`: the mean of the recent idle times when their standard
/// deviation is at most a sixth of it (with at least 3/4 of them) or at most 20 us,
/// dropping the longest and trying again while at least 3/4 remain; None otherwise.
fn typical_interval(recent: &[u64]) -> Option<u64> {
    if recent.len() < INTERVALS {
        return None;
    }
    let mut thresh = u64::MAX;
    loop {
        let kept = || recent.iter().filter(move |&&v| v <= thresh).map(|&v| v as u128);
        let (n, max) = (kept().count() as u128, kept().max()?);
        let avg = kept().sum::<u128>() / n;
        let variance = kept().map(|v| v.abs_diff(avg).pow(2)).sum::<u128>() / n;
        // 20 us squared, in ps^2.
        const SMALL: u128 = 20_000_000 * 20_000_000;
        if (avg * avg > variance * 36 && n * 4 >= INTERVALS as u128 * 3) || variance <= SMALL {
            return Some(avg as u64);
        }
        if n * 4 <= INTERVALS as u128 * 3 {
            return None;
        }
        thresh = (max - 1) as u64;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fib::Caches;
    use crate::scenario::{Idle as IdleSpec, IdleTable};
    use crate::units::Frequency;

    const US: u64 = 1_000_000;

    fn at(us: u64) -> Instant {
        Instant::ZERO + Span::from_ps(us * US)
    }

    fn idle(spec: IdleSpec) -> Idle {
        let states = spec.resolved(&Caches::default(), Frequency::from_hz(3.3e9));
        Idle::new(&spec, states, true, Instant::ZERO, at(1_000_000))
    }

    /// Sleep `gap` us, wake, work 1 us; `n` times from `t`: the wake-ups' costs.
    fn cycle(i: &mut Idle, t: &mut u64, gap: u64, n: usize) -> Vec<Wake> {
        (0..n)
            .map(|_| {
                i.enter(0, at(*t));
                *t += gap;
                let w = i.exit(0, at(*t));
                *t += 1;
                w
            })
            .collect()
    }

    /// menu on intel-skx: a first idle time predicted long (C6); eight regular gaps of
    /// 50 us make the typical interval 50 us: C1E (residency 20 us <= 50 < 600); gaps of
    /// 1 us: POLL (C1's residency is 2 us), which costs nothing.
    #[test]
    fn menu_settles_on_the_deepest_state_the_recent_idle_times_pay_for() {
        let mut i = idle(IdleSpec::default());
        let mut t = 0;
        let w = cycle(&mut i, &mut t, 50, 1);
        assert_eq!(w[0].latency, Span::from_ps(133 * US), "with no history: C6");
        assert_eq!(w[0].refill.ps(), 3_723_636);
        let w = cycle(&mut i, &mut t, 50, 40);
        assert_eq!(*w.last().unwrap(), Wake { latency: Span::from_ps(10 * US), refill: Span::ZERO }, "C1E");
        let w = cycle(&mut i, &mut t, 1, 40);
        assert_eq!(*w.last().unwrap(), Wake::default(), "POLL");
        let r = i.report(Span::from_ps(1_000_000 * US), 1).unwrap();
        let by = |n: &str| r.states.iter().find(|s| s.name == n).unwrap().clone();
        assert_eq!(by("C6").above, by("C6").entries, "every C6 entry was shorter than 600 us");
        assert!(by("C1E").entries >= 30 && by("POLL").entries >= 30);
        // 50 us in C1E is below nothing deeper that fits (C6 needs 600 us).
        assert_eq!(by("C1E").below, 0);
    }

    /// The latency limit keeps C6 out even with no history; a disabled C1E too.
    #[test]
    fn the_latency_limit_and_disable_keep_states_out() {
        let mut spec = IdleSpec { latency_limit: Some(crate::units::Duration::from_ps(20 * US)), ..Default::default() };
        let mut i = idle(spec.clone());
        let mut t = 0;
        assert_eq!(cycle(&mut i, &mut t, 1000, 1)[0].latency, Span::from_ps(10 * US));
        let mut states = IdleTable::IntelSkx.states();
        states[2].disable = true;
        spec.states = Some(states);
        let mut i = idle(spec);
        assert_eq!(cycle(&mut i, &mut t, 1000, 1)[0].latency, Span::from_ps(2 * US));
    }

    /// haltpoll on kvm-haltpoll: the window starts at 0 (halt at once); a wake-up 30 us
    /// after the halt, within 200 us, grows it to grow_start (50 us); then 30 us gaps poll
    /// (free); a gap of 300 us (beyond 200) shrinks the window to 25 us.
    #[test]
    fn haltpoll_grows_and_shrinks_its_window() {
        let spec = IdleSpec { governor: Governor::Haltpoll, table: Some(IdleTable::KvmHaltpoll), ..Default::default() };
        let mut i = idle(spec);
        let mut t = 0;
        let halt = Wake { latency: Span::from_ps(US), refill: Span::ZERO };
        assert_eq!(cycle(&mut i, &mut t, 30, 1)[0], halt);
        assert_eq!(cycle(&mut i, &mut t, 30, 5), vec![Wake::default(); 5]);
        assert_eq!(cycle(&mut i, &mut t, 300, 1)[0], halt);
        assert_eq!(i.cores[0].poll_limit_ps, 25 * US);
        assert_eq!(cycle(&mut i, &mut t, 20, 1)[0], Wake::default());
        assert_eq!(cycle(&mut i, &mut t, 40, 1)[0], halt, "40 us outlasts the 25 us window");
        assert_eq!(i.cores[0].poll_limit_ps, 50 * US);
        let r = i.report(Span::from_ps(1_000_000 * US), 1).unwrap();
        assert_eq!(r.states[1].entries, 3);
        // A halted entry polled its window first: POLL counts it too.
        assert_eq!(r.states[0].entries, 6 + 2);
    }

    /// A halt whose refill (6 us) grows over 300 us of idle: 30 us asleep costs a tenth of
    /// it, 150 us half, 300 us and more all of it; a peek agrees with the exit.
    #[test]
    fn a_refill_with_a_refill_time_grows_with_the_time_asleep() {
        let d = |us: u64| crate::units::Duration::from_ps(us * US);
        let halt = crate::scenario::IdleState {
            name: "halt".into(),
            latency: d(1),
            residency: d(1),
            flush: false,
            refill: Some(d(6)),
            refill_time: d(300),
            disable: false,
        };
        let mut i = idle(IdleSpec { states: Some(vec![halt]), ..Default::default() });
        let mut t = 0;
        let refills: Vec<u64> =
            [30, 150, 300, 900].iter().map(|&gap| cycle(&mut i, &mut t, gap, 1)[0].refill.ps()).collect();
        assert_eq!(refills, [600_000, 3_000_000, 6_000_000, 6_000_000]);
        i.enter(0, at(t));
        assert_eq!(i.peek(0, at(t + 75)).refill.ps(), 1_500_000);
        assert_eq!(i.exit(0, at(t + 75)).refill.ps(), 1_500_000);
    }

    /// teo: the deepest state at least half of the last idle times outlasted.
    #[test]
    fn teo_takes_the_state_most_recent_wakeups_hit() {
        let spec = IdleSpec { governor: Governor::Teo, ..Default::default() };
        let mut i = idle(spec);
        let mut t = 0;
        cycle(&mut i, &mut t, 700, 4);
        cycle(&mut i, &mut t, 30, 3);
        // 4 of 7 outlasted C6's 600 us.
        assert_eq!(cycle(&mut i, &mut t, 30, 1)[0].latency, Span::from_ps(133 * US));
        // Now 4 of 8 did: still C6; one more short one and C1E.
        assert_eq!(cycle(&mut i, &mut t, 30, 1)[0].latency, Span::from_ps(133 * US));
        assert_eq!(cycle(&mut i, &mut t, 30, 1)[0].latency, Span::from_ps(10 * US));
    }

    #[test]
    fn typical_interval_drops_outliers_and_gives_up_on_spread() {
        let v = |xs: &[u64]| xs.iter().map(|x| x * US).collect::<Vec<_>>();
        assert_eq!(typical_interval(&v(&[100; 8])), Some(100 * US));
        // One outlier is dropped: the other seven agree.
        assert_eq!(typical_interval(&v(&[100, 100, 100, 100, 100, 100, 100, 5000])), Some(100 * US));
        // Spread everywhere: none.
        assert_eq!(typical_interval(&v(&[10, 300, 50, 900, 120, 2000, 70, 400])), None);
        assert_eq!(typical_interval(&v(&[100; 7])), None);
    }

    /// NAPI, isolated frames every 200 us (t_irq 1 us, t_proc 2 us): each interrupt finds
    /// the core in a state of 50 us exit latency and 1 us refill (residency 100 us: the
    /// 197 us gaps pay for it), so every frame leaves 51 us later than on a core that
    /// polls, and each wake-up costs 1 us more of the core; the series counts them.
    #[test]
    fn an_interrupt_waits_for_the_exit_and_pays_the_refill() {
        use crate::engine::testing::{node_toml, trace};
        let host = "io = \"napi\"\nt_irq = \"1us\"\nt_proc = \"2us\"";
        let deep = "interval = \"500us\"\n[cpu.idle]\nstates = [{ name = \"POLL\", latency = \"0us\", \
                    residency = \"0us\" }, { name = \"deep\", latency = \"50us\", residency = \"100us\", \
                    refill = \"1us\" }]";
        let frames: Vec<(u64, u16)> = (0..5).map(|i| (10_000 + i * 200_000, 64)).collect();
        let (r, dep) = trace(&node_toml(host, deep), &frames);
        let (r0, dep0) = trace(&node_toml(host, ""), &frames);
        assert_eq!(dep.len(), 5);
        // The first interrupt comes to a core that never slept.
        assert_eq!(dep[0].0 - dep0[0].0, 0.0);
        for (a, b) in dep.iter().zip(&dep0).skip(1) {
            assert_eq!(a.0 - b.0, 51_000.0, "{dep:?} vs {dep0:?}");
        }
        // Each frame's tx completion interrupts too, and wakes the core again: every
        // wake-up from the deep state costs 1 us of refill and 50 us of exit.
        let idle = r.idle_states.as_ref().unwrap();
        let deep = idle.states[1].entries;
        assert!(deep >= 4, "{idle:?}");
        let refill_us = r.cpu_by_activity["refill"] * 1e3;
        assert!((refill_us - deep as f64).abs() < 1e-9, "{refill_us} us of refill, {deep} wake-ups");
        assert_eq!(r0.cpu_by_activity["refill"], 0.0);
        let series = r.series.as_ref().unwrap();
        assert_eq!(series.iter().map(|b| b.wakeups).sum::<u64>(), deep);
        assert_eq!(series.iter().map(|b| b.exit_latency_sum_ps).sum::<u128>(), deep as u128 * 50_000_000);
        assert!(r0.idle_states.is_none());
    }

    #[test]
    fn a_polling_table_or_a_polling_mode_costs_nothing() {
        let spec = IdleSpec { table: Some(IdleTable::Poll), ..Default::default() };
        assert!(!idle(spec).is_on());
        let spec = IdleSpec::default();
        let states = spec.resolved(&Caches::default(), Frequency::from_hz(3.3e9));
        assert!(!Idle::new(&spec, states, false, Instant::ZERO, at(1)).is_on());
    }
}
