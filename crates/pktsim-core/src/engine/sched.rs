//! The fair scheduling class on one core: which task runs when several want the core
//! (`ksoftirqd`, the application's thread). Linux's EEVDF (`kernel/sched/fair.c`, v6.6 on;
//! Peter Zijlstra, "sched/fair: Implement an EEVDF-like scheduling policy"):
//!
//! ```text
//!   each task: weight w (sched_prio_to_weight[nice]), virtual runtime v (+= runtime * 1024 / w),
//!              deadline d = v + base_slice * 1024 / w (set when picked or when its slice ends)
//!   V = the load-weighted mean of the runnable tasks' v (avg_vruntime)
//!   pick (pick_eevdf): among the eligible tasks (v <= V) the one with the earliest deadline;
//!        the running task keeps the core while it is eligible until its slice is used
//!        (RUN_TO_PARITY: a waking task preempts it only by making it ineligible)
//!   block (dequeue): keep its lag V - v, at most max(2 base_slice, a tick) each way
//!   wake (place_entity, PLACE_LAG): v = V - lag * (W + w) / W with W the runnable load,
//!        d = v + its slice
//! ```
//!
//! A wake-up that preempts (it sets `need_resched`) also asks the next `__schedule` to skip
//! its clock update (`wakeup_preempt`: `rq_clock_skip_update`, "we're going to schedule").
//! Without kernel preemption (`PREEMPT_NONE`, `PREEMPT_VOLUNTARY`) the running task goes
//! on to its next preemption point first (a NAPI thread: the end of its poll,
//! `cond_resched` in `napi_threaded_poll_loop`; ksoftirqd, whatever the preemption model:
//! the end of its `handle_softirqs` pass, run with bottom halves off, which looks at
//! `need_resched` only between passes), and the clock stays where the wake-up (or
//! the last tick) left it: that task is charged only up to there, and the task picked next
//! starts its `exec_start` there, so the time in between lands on the picked task. Traced
//! on 6.18 (VALIDATION.md, share): a reader woken by the NAPI thread ran 0.19 ms a turn
//! and was charged 0.70 ms, the thread ran 0.89 ms and was charged 0.03.
//!
//! The kernel notices a used slice in `update_curr`, which runs at the tick and at each
//! scheduling event of the core (a task waking on it or blocking), not when the slice
//! ends: without the `HRTICK` scheduler feature (off by default, `cpu.sched.hrtick`) a
//! task keeps the core until the first tick after its slice, so on a HZ 250 kernel two
//! busy tasks take turns of a whole 4 ms jiffy rather than of a 1.5 ms slice. With
//! `hrtick` the slice ends when it is used (here: when the unit of work that used it, a
//! frame or a call, ends). Hard IRQs and
//! softirqs run on behalf of no task with `CONFIG_IRQ_TIME_ACCOUNTING`
//! (`cpu.sched.irq_time_accounting`, the default); without it they charge the task they
//! interrupted (the I/O mode does the charging).

use super::time::{Instant, Span};

/// `sched_prio_to_weight` (kernel/sched/core.c): the load weight of nice -20 ... 19, each
/// step about 1.25x (10% CPU between two tasks a nice level apart).
pub const PRIO_TO_WEIGHT: [u32; 40] = [
    88761, 71755, 56483, 46273, 36291, 29154, 23254, 18705, 14949, 11916, 9548, 7620, 6100, 4904, 3906, 3121, 2501,
    1991, 1586, 1277, 1024, 820, 655, 526, 423, 335, 272, 215, 172, 137, 110, 87, 70, 56, 45, 36, 29, 23, 18, 15,
];

/// The weight of nice level `nice` (-20 ... 19).
pub fn weight_of(nice: i32) -> u32 {
    PRIO_TO_WEIGHT[(nice.clamp(-20, 19) + 20) as usize]
}

const NICE_0: u128 = 1024;

#[derive(Debug, Clone, Copy, Default)]
struct Entity {
    weight: u32,
    runnable: bool,
    /// Virtual runtime and deadline (ps scaled by 1024 / weight).
    v: u128,
    deadline: u128,
    /// Lag kept from its last dequeue (virtual ps).
    vlag: i128,
}

/// The fair run queue of one core.
#[derive(Debug, Clone)]
pub struct Fair {
    ents: Vec<Entity>,
    /// Runnable tasks (`nr_running`).
    runnable: usize,
    curr: Option<usize>,
    slice_ps: u128,
    lag_limit_ps: u128,
    /// The last mean virtual runtime of a non-empty queue (a task waking to an empty
    /// queue starts there).
    last_avg: u128,
    /// A jiffy (ps); 0 with `hrtick`: a used slice ends at once.
    tick_ps: u64,
    /// The current task used its slice: it is rescheduled at this tick (ps) or at the
    /// next scheduling event of the core, whichever comes first.
    resched_at: Option<u64>,
    /// A jiffy (ps), `hrtick` or not: a tick updates the run queue's clock.
    jiffy_ps: u64,
    /// Tasks that run on to a preemption point of their own after a preempting wake-up
    /// (a NAPI thread: the end of its poll); the others switch at once.
    runs_on: Vec<bool>,
    /// A preempting wake-up's skipped clock update, until the next pick.
    skip: Option<ClockSkip>,
}

/// The time a task that a wake-up preempted runs on until the next pick: charged to the
/// task picked then (see the module header).
#[derive(Debug, Clone, Copy)]
struct ClockSkip {
    /// The task that had the core at the wake-up.
    task: usize,
    /// The clock's last update: the wake-up, or a tick since.
    from_ps: u64,
    /// Of the task's runtime since, what it was not charged (ps).
    skipped_ps: u64,
}

impl Default for Fair {
    /// Two nice-0 tasks, the default 2.8 ms slice (`cpu.sched.base_slice`), a 1 ms tick, no `hrtick`.
    fn default() -> Self {
        Fair::new(&[1024, 1024], Span::from_ps(2_800_000_000), Span::from_ps(1_000_000_000), false)
    }
}

impl Fair {
    /// A run queue of tasks with these weights, all blocked; `base_slice` is
    /// `sched_base_slice`, `tick` a jiffy (the lag bound is the larger of two slices and a
    /// tick); with `hrtick` a used slice ends at once, else at the next tick.
    pub fn new(weights: &[u32], base_slice: Span, tick: Span, hrtick: bool) -> Self {
        let slice_ps = base_slice.ps().max(1) as u128;
        Fair {
            ents: weights.iter().map(|&w| Entity { weight: w.max(1), ..Entity::default() }).collect(),
            runnable: 0,
            curr: None,
            slice_ps,
            lag_limit_ps: (2 * slice_ps).max(tick.ps() as u128),
            last_avg: 0,
            tick_ps: if hrtick { 0 } else { tick.ps() },
            resched_at: None,
            jiffy_ps: tick.ps(),
            skip: None,
            runs_on: vec![false; weights.len()],
        }
    }

    fn vslice(&self, i: usize) -> u128 {
        self.slice_ps * NICE_0 / self.ents[i].weight as u128
    }

    /// The load-weighted mean virtual runtime of the runnable tasks, and their load.
    fn avg(&self) -> (u128, u128) {
        let (mut sum, mut load) = (0u128, 0u128);
        for e in self.ents.iter().filter(|e| e.runnable) {
            sum += e.v * e.weight as u128;
            load += e.weight as u128;
        }
        sum.checked_div(load).map_or((self.last_avg, 0), |avg| (avg, load))
    }

    /// Task `i` wakes at `t` (`enqueue_entity` with its lag); a running task keeps the core
    /// unless the wake-up preempts it, which also skips the clock until the next pick.
    pub fn wake(&mut self, i: usize, t: Instant) {
        if self.ents[i].runnable {
            return;
        }
        let (avg, load) = self.avg();
        let w = self.ents[i].weight as u128;
        let lag = if load > 0 { self.ents[i].vlag * (load + w) as i128 / load as i128 } else { 0 };
        let v = (avg as i128 - lag).max(0) as u128;
        let d = v + self.vslice(i);
        let e = &mut self.ents[i];
        (e.v, e.deadline, e.runnable) = (v, d, true);
        self.runnable += 1;
        // check_preempt_wakeup_fair: a running task that used its slice (update_curr sees
        // it now) or is no longer eligible is preempted.
        if self.resched_at.is_some() || self.curr.is_some_and(|c| !self.eligible(c)) {
            let running = self.curr;
            self.resched();
            // wakeup_preempt: rq_clock_skip_update.
            if let Some(task) = running.filter(|&c| c != i && self.runs_on[c]) {
                self.skip = Some(ClockSkip { task, from_ps: t.ps(), skipped_ps: 0 });
            }
        }
    }

    /// Task `i` runs on to a preemption point of its own when a wake-up preempts it (a
    /// kernel thread between `cond_resched` calls): the skipped clock charges that time to
    /// the task picked next.
    pub fn runs_on(mut self, i: usize) -> Self {
        self.runs_on[i] = true;
        self
    }

    /// `entity_eligible`: its virtual runtime is at most the mean.
    fn eligible(&self, i: usize) -> bool {
        self.ents[i].v <= self.avg().0
    }

    /// Task `i` blocks (`dequeue_entity`): it keeps its lag, bounded.
    pub fn block(&mut self, i: usize) {
        if !self.ents[i].runnable {
            return;
        }
        let (avg, _) = self.avg();
        let limit = (self.lag_limit_ps * NICE_0 / self.ents[i].weight as u128) as i128;
        self.ents[i].vlag = (avg as i128 - self.ents[i].v as i128).clamp(-limit, limit);
        self.ents[i].runnable = false;
        self.runnable -= 1;
        if self.curr == Some(i) || self.resched_at.is_some() {
            self.resched();
        }
        self.last_avg = self.avg().0.max(avg);
    }

    /// Task `i` ran `[start, end)`: its virtual runtime advances, and a used slice gets the
    /// next deadline (`update_deadline`). The current task that used its slice with others
    /// waiting is rescheduled at the first tick from `end` (at once with `hrtick`).
    pub fn charge(&mut self, i: usize, start: Instant, end: Instant) {
        let mut ran_ps = (end - start).ps();
        if let Some(skip) = self.skip.as_mut().filter(|k| k.task == i) {
            // What it ran after the clock's last update is not charged to it. A tick in
            // [start, end) updates the clock: all it ran before the tick is charged after all.
            let (s_ps, e_ps) = (start.ps(), end.ps());
            if self.jiffy_ps > 0 && e_ps / self.jiffy_ps > skip.from_ps / self.jiffy_ps {
                ran_ps += std::mem::take(&mut skip.skipped_ps);
                skip.from_ps = e_ps / self.jiffy_ps * self.jiffy_ps;
            }
            let unseen = e_ps.saturating_sub(s_ps.max(skip.from_ps));
            skip.skipped_ps += unseen;
            ran_ps -= unseen;
        }
        let vd = ran_ps as u128 * NICE_0 / self.ents[i].weight as u128;
        let vslice = self.vslice(i);
        let e = &mut self.ents[i];
        e.v += vd;
        let now = end.ps();
        if e.v >= e.deadline {
            e.deadline = e.v + vslice;
            if self.curr == Some(i) && self.runnable > 1 && self.resched_at.is_none() {
                // resched_curr once update_curr runs: at the next tick.
                // (With hrtick, a tick of 0: at once.)
                let tick = self.tick_ps;
                self.resched_at = Some(now.checked_div(tick).map_or(now, |n| n.saturating_add(1).saturating_mul(tick)));
            }
        }
        if self.resched_at.is_some_and(|t| now >= t) {
            self.resched();
        }
    }

    /// `resched_curr`: the next pick may choose another task.
    fn resched(&mut self) {
        self.curr = None;
        self.resched_at = None;
    }

    pub fn is_runnable(&self, i: usize) -> bool {
        self.ents[i].runnable
    }

    /// The task that has the core (picked and not yet rescheduled).
    pub fn curr(&self) -> Option<usize> {
        self.curr
    }

    /// Whether a reschedule is due (`need_resched`): tasks wait for the core and the one
    /// that had it used its slice, blocked or never ran (the core was idle).
    pub fn need_resched(&self) -> bool {
        self.curr.is_none() && self.runnable > 0
    }

    /// The task that runs next: the current one until its slice is used (RUN_TO_PARITY) or
    /// a waking task made it ineligible, else the eligible task with the earliest deadline
    /// (`pick_eevdf`); None when no task is runnable.
    #[inline]
    pub fn pick(&mut self) -> Option<usize> {
        if let Some(c) = self.curr.filter(|&c| self.ents[c].runnable) {
            return Some(c);
        }
        if self.runnable == 0 {
            return None;
        }
        let (avg, _) = self.avg();
        let best = (0..self.ents.len())
            .filter(|&i| self.ents[i].runnable && self.ents[i].v <= avg)
            .min_by_key(|&i| (self.ents[i].deadline, i))
            // Rounding can leave none at or below the mean: the least virtual runtime then.
            .or_else(|| (0..self.ents.len()).filter(|&i| self.ents[i].runnable).min_by_key(|&i| (self.ents[i].v, i)));
        self.curr = best;
        // The skipped clock: the picked task's exec_start is where the clock stood, so its
        // first update_curr charges it the time the preempted task ran since.
        if let (Some(skip), Some(b)) = (self.skip.take(), best) {
            self.ents[b].v += skip.skipped_ps as u128 * NICE_0 / self.ents[b].weight as u128;
        }
        best
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000_000;

    /// A run queue of these weights, a 3 ms slice and a 4 ms tick (HZ 250), with `hrtick`
    /// (a used slice ends at once).
    fn two_tasks(weights: &[u32]) -> Fair {
        Fair::new(weights, Span::from_ps(3 * MS), Span::from_ps(4 * MS), true)
    }

    /// Task `i` runs `d` ps from `*t`.
    fn run(f: &mut Fair, t: &mut u64, i: usize, d: u64) {
        f.charge(i, Instant::from_ps(*t), Instant::from_ps(*t + d));
        *t += d;
    }

    /// Run `fair` for `total` ps in units of `unit` ps with every task always runnable:
    /// each task's share of the time.
    fn shares(fair: &mut Fair, total: u64, unit: u64) -> Vec<f64> {
        let mut ran = vec![0u64; fair.ents.len()];
        let mut t = 0;
        while t < total {
            let i = fair.pick().unwrap();
            run(fair, &mut t, i, unit);
            ran[i] += unit;
        }
        ran.iter().map(|&r| r as f64 / total as f64).collect()
    }

    #[test]
    fn the_weights_are_the_kernels() {
        assert_eq!(weight_of(0), 1024);
        assert_eq!(weight_of(-20), 88761);
        assert_eq!(weight_of(19), 15);
        assert_eq!(weight_of(5), 335);
    }

    /// Two nice-0 tasks always runnable take turns of one slice each: 50% each, and the
    /// core changes hands once per 3 ms slice.
    #[test]
    fn equal_tasks_share_the_core_in_slices() {
        let mut t = 0;
        let mut f = two_tasks(&[1024, 1024]);
        f.wake(0, Instant::from_ps(t));
        f.wake(1, Instant::from_ps(t));
        let mut switches = 0;
        let mut last = None;
        for _ in 0..3000 {
            let i = f.pick().unwrap();
            if last.is_some_and(|l| l != i) {
                switches += 1;
            }
            last = Some(i);
            run(&mut f, &mut t, i, 10_000_000); // 10 us
        }
        // 30 ms: 10 slices, 9 hand-overs.
        assert!((9..=10).contains(&switches), "{switches}");
        let s = shares(&mut f, 600 * MS, 10_000_000);
        assert!((s[0] - 0.5).abs() < 0.01, "{s:?}");
    }

    /// Weights divide the core in their ratio: nice 0 against nice 5 is 1024 : 335.
    #[test]
    fn weights_divide_the_core() {
        let mut f = two_tasks(&[1024, 335]);
        f.wake(0, Instant::ZERO);
        f.wake(1, Instant::ZERO);
        let s = shares(&mut f, 2000 * MS, 10_000_000);
        let want = 1024.0 / (1024.0 + 335.0);
        assert!((s[0] - want).abs() < 0.01, "{s:?} vs {want}");
    }

    /// A task that wakes while another runs waits for the end of that one's slice
    /// (RUN_TO_PARITY), then runs first: it slept, so its lag is not negative.
    #[test]
    fn a_waking_task_does_not_preempt_but_runs_at_the_slice_end() {
        let mut t = 0;
        let mut f = two_tasks(&[1024, 1024]);
        f.wake(0, Instant::from_ps(t));
        assert_eq!(f.pick(), Some(0));
        run(&mut f, &mut t, 0, MS);
        f.wake(1, Instant::from_ps(t));
        assert!(!f.need_resched());
        assert_eq!(f.pick(), Some(0), "task 0 keeps its slice");
        run(&mut f, &mut t, 0, 2 * MS);
        assert!(f.need_resched(), "its 3 ms are used");
        assert_eq!(f.pick(), Some(1));
    }

    /// A task that slept having run less than its share wakes with that lag: placed
    /// before the running task, it makes that one ineligible and preempts it.
    #[test]
    fn a_task_owed_time_preempts_on_waking() {
        let mut t = 0;
        let mut f = two_tasks(&[1024, 1024]);
        f.wake(0, Instant::from_ps(t));
        f.wake(1, Instant::from_ps(t));
        assert_eq!(f.pick(), Some(0));
        run(&mut f, &mut t, 0, MS); // task 1 never ran: 0.5 ms behind the mean
        f.block(1);
        assert_eq!(f.ents[1].vlag, 500_000_000);
        run(&mut f, &mut t, 0, MS);
        f.wake(1, Instant::from_ps(t));
        // Placed 0.5 ms x 2 = 1 ms before task 0: the mean is 0.5 ms before it.
        assert_eq!(f.ents[0].v - f.ents[1].v, 1_000_000_000);
        assert!(f.need_resched());
        assert_eq!(f.pick(), Some(1));
    }

    /// Two nice-0 tasks, a 3 ms slice and a 4 ms tick (no `hrtick`; task 0 runs on to a
    /// preemption point of its own with `runs_on`): task 0 runs 1 ms beside task 1, which
    /// then blocks owed 0.5 ms, and `then` ps more alone. The time reached and the queue.
    fn owed(runs_on: bool, then: u64) -> (u64, Fair) {
        let mut f = Fair::new(&[1024, 1024], Span::from_ps(3 * MS), Span::from_ps(4 * MS), false);
        if runs_on {
            f = f.runs_on(0);
        }
        let mut t = 0;
        f.wake(0, Instant::ZERO);
        f.wake(1, Instant::ZERO);
        assert_eq!(f.pick(), Some(0));
        run(&mut f, &mut t, 0, MS);
        f.block(1);
        run(&mut f, &mut t, 0, then);
        (t, f)
    }

    /// A wake-up that preempts skips the clock until the next pick: the running task goes
    /// on to its preemption point (0.5 ms, five 0.1 ms units) uncharged, and the task picked
    /// then is charged that time (its exec_start is where the clock stood).
    #[test]
    fn a_preempting_wake_up_charges_the_run_on_to_the_task_picked_next() {
        let (mut t, mut f) = owed(true, MS);
        f.wake(1, Instant::from_ps(t)); // placed at 1 ms, task 0 (2 ms) no longer eligible
        assert!(f.need_resched());
        for _ in 0..5 {
            run(&mut f, &mut t, 0, MS / 10);
        }
        assert_eq!(f.ents[0].v, 2 * MS as u128, "task 0 is charged up to the wake-up only");
        assert_eq!(f.pick(), Some(1), "the pick sees the clock as the wake-up left it");
        assert_eq!(f.ents[1].v, 1_500_000_000, "task 1 starts charged the 0.5 ms task 0 ran on");
        // A task that switches at once (in user space) leaves nothing to move.
        let (mut t, mut f) = owed(false, MS);
        f.wake(1, Instant::from_ps(t));
        run(&mut f, &mut t, 0, MS / 2);
        assert_eq!((f.ents[0].v, f.pick(), f.ents[1].v), (2_500_000_000, Some(1), MS as u128));
    }

    /// A tick between the wake-up and the preemption point updates the clock: what the
    /// running task ran before it is its own, only what it ran after the tick (4 ms) moves.
    #[test]
    fn a_tick_ends_the_skipped_clock() {
        let (mut t, mut f) = owed(true, 2_600_000_000); // 3.6 ms
        f.wake(1, Instant::from_ps(t));
        assert!(f.need_resched());
        for _ in 0..8 {
            run(&mut f, &mut t, 0, MS / 10); // on to 4.4 ms
        }
        assert_eq!(f.ents[0].v, 4 * MS as u128);
        let v1 = f.ents[1].v;
        assert_eq!(f.pick(), Some(1));
        assert_eq!(f.ents[1].v - v1, 400_000_000);
    }

    /// A task that ran more than its share before blocking keeps that (negative) lag: on
    /// waking it is not eligible until the other task has caught up.
    #[test]
    fn lag_is_kept_across_a_sleep() {
        let mut t = 0;
        let mut f = two_tasks(&[1024, 1024]);
        f.wake(0, Instant::from_ps(t));
        f.wake(1, Instant::from_ps(t));
        assert_eq!(f.pick(), Some(0));
        run(&mut f, &mut t, 0, 3 * MS); // task 0 used its slice: 1.5 ms ahead of the mean
        f.block(0);
        assert_eq!(f.ents[0].vlag, -(1_500_000_000i128));
        assert_eq!(f.pick(), Some(1));
        run(&mut f, &mut t, 1, MS);
        f.wake(0, Instant::from_ps(t));
        // Placed 1.5 ms x (W + w) / W = 3 ms after the mean: not eligible while task 1 is.
        assert!(f.ents[0].v > f.ents[1].v);
        run(&mut f, &mut t, 1, 2 * MS);
        assert_eq!(f.pick(), Some(1), "task 0 is not yet eligible");
    }

    /// Without `hrtick` a used slice is seen at the next tick: two busy tasks take turns of
    /// a whole 4 ms jiffy (the 3 ms slice ends inside it), half the core each.
    #[test]
    fn without_hrtick_a_slice_ends_at_the_tick() {
        let (mut t, mut f) = (0, Fair::new(&[1024, 1024], Span::from_ps(3 * MS), Span::from_ps(4 * MS), false));
        f.wake(0, Instant::from_ps(t));
        f.wake(1, Instant::from_ps(t));
        let mut turns = Vec::new();
        let mut last = (f.pick().unwrap(), 0);
        while t < 40 * MS {
            let i = f.pick().unwrap();
            if i != last.0 {
                turns.push(t - last.1);
                last = (i, t);
            }
            run(&mut f, &mut t, i, 10_000_000);
        }
        assert_eq!(turns, vec![4 * MS; 9], "{turns:?}");
        let s = shares(&mut f, 400 * MS, 10_000_000);
        assert!((s[0] - 0.5).abs() < 0.01, "{s:?}");
    }

    /// A used slice not yet seen by a tick is seen when another task wakes on the core
    /// (`update_curr` in the enqueue): a waiting task then gets the core.
    #[test]
    fn a_wake_sees_a_used_slice_before_the_tick() {
        let weights = [1024, 1024, 1024];
        let (mut t, mut f) = (0, Fair::new(&weights, Span::from_ps(3 * MS), Span::from_ps(4 * MS), false));
        f.wake(0, Instant::from_ps(t));
        f.wake(1, Instant::from_ps(t));
        assert_eq!(f.pick(), Some(0));
        run(&mut f, &mut t, 0, 3 * MS + 1000);
        assert!(!f.need_resched(), "3 ms used, the tick at 4 ms not yet come");
        assert_eq!(f.pick(), Some(0));
        f.wake(2, Instant::from_ps(t));
        assert!(f.need_resched(), "the wake-up sees task 0's used slice");
        assert_ne!(f.pick(), Some(0));
    }
}
