//! The mode's own figures in a run's result ([`NapiReport`]: deferral, busy and thread
//! polls, each vector's moderation at the end, XDP's), and what its work costs per frame
//! for the analytical model ([`mode_costs`]).

use super::Napi;
use crate::engine::io::IoReport;
use crate::engine::nic::Nic;
use crate::engine::time::Span;
use crate::scenario::ResolvedScenario;

impl Napi {
    /// The figures of `report` (see `IoMode::report`).
    pub(super) fn io_report(&self, nic: &Nic) -> IoReport {
        // A policy's own state at the end (DIM: profile index, windows, changes), per vector.
        let state: Vec<_> = nic.vectors().iter().map(|v| v.moderation().figures()).filter(|f| !f.is_null()).collect();
        IoReport::Napi(NapiReport {
            app: self.app.as_ref().map(|a| a.report()),
            busy_polls: self.app.as_ref().map(|_| self.busy_polls),
            deferral_timer_polls: self.timer_polls,
            itr_interval_ns: nic.vectors().iter().map(|v| v.moderation().interval().as_ns_f64()).collect(),
            moderation: nic.vectors().first().map(|v| v.moderation().name()),
            moderation_state: (!state.is_empty()).then_some(state),
            thread_wakeups: self.p.threaded.then_some(self.wakeups),
            xdp: self.xdp.as_ref().map(|x| x.report(self.flushes)),
        })
    }
}

/// A NAPI's figures in a run's result (`io`).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct NapiReport {
    /// The application's, where an `[app]` (or AF_XDP's user thread) reads the frames.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub app: Option<crate::engine::app::AppReport>,
    /// Polls the application made itself (busy polling), with an application.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub busy_polls: Option<u64>,
    /// Polls the deferral timer drove (`napi_defer_hard_irqs`).
    pub deferral_timer_polls: u64,
    /// Each vector's throttle interval at the end.
    pub itr_interval_ns: Vec<f64>,
    /// The moderation policy (`nic.itr.mode`).
    pub moderation: Option<&'static str>,
    /// Each vector's policy's own state at the end, where it has one (DIM).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub moderation_state: Option<Vec<serde_json::Value>>,
    /// Wake-ups of the NAPI threads (`nic.napi.threaded`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub thread_wakeups: Option<u64>,
    /// The XDP program's figures (xdp, af-xdp).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub xdp: Option<crate::engine::io::xdp::XdpReport>,
}

/// Per frame its tx clean, on the core its tx queue completes to; per poll `t_poll` (a full
/// weight when the rings never run dry); per interrupt `t_irq` (none then: the vector stays
/// masked while polls use their whole weight). At low load a frame may pay an rx interrupt
/// and poll, and with `nic.tx_vector = "separate"` a tx interrupt and poll as well.
pub fn mode_costs(sc: &ResolvedScenario, costs: &crate::engine::costs::Costs) -> crate::price::ModeCosts {
    let (io, n) = (&sc.scenario.host.io, &sc.scenario.nic);
    let weight = io.poll().weight;
    let per_poll = weight.min(n.rx_ring).max(1) as f64;
    let vectors = if n.tx_vector == crate::scenario::TxVector::Shared { 1.0 } else { 2.0 };
    let mut notes = Vec::new();
    if vectors > 1.0 && costs.t_poll > Span::ZERO {
        notes.push(
            "at saturation, polls of the separate tx vectors (their rate follows interrupt moderation) are left out"
                .to_string(),
        );
    }
    // With deferral, a frame alone may be followed by napi_defer_hard_irqs timer polls.
    let deferred = if n.napi.defers() { n.napi.defer_hard_irqs as f64 } else { 0.0 };
    let mut terms = vec![
        crate::price::IoCost::per_event("poll", costs.t_poll.ps() as f64, per_poll, vectors + deferred),
        crate::price::IoCost::per_event("interrupt", costs.t_irq.ps() as f64, f64::INFINITY, vectors),
    ];
    terms.extend(crate::price::IoCost::deferral_timer(costs.t_timer.ps() as f64, deferred));
    // The thread's way to sleep before each wake-up (where nothing else runs on its core:
    // `napi::thread_done`), and the wake-up.
    let wake_ps = (io.thread().t_wakeup.ps + if sc.scenario.app.is_none() { io.thread().t_sleep.ps } else { 0 }) as f64;
    if n.napi.threaded {
        // A thread that never runs out of work never sleeps; alone, a frame may wake it.
        terms.push(crate::price::IoCost::per_event("wake-up", wake_ps, f64::INFINITY, vectors + deferred));
    }
    let sock = &sc.scenario.socket;
    let suspends = n.napi.irq_suspend_timeout.ps > 0;
    let app = sc.scenario.app.as_ref().map(|a| crate::price::AppCosts {
        frame_ps: a.t_packet.ps as f64 + a.t_call.ps as f64 / a.batch.max(1) as f64,
        same_core: a.core == crate::scenario::AppCore::Same,
        drives: suspends
            .then(|| costs.t_poll.ps() as f64 * (1.0 / sock.busy_poll_budget.max(1) as f64 - 1.0 / per_poll)),
        busy_extra_ps: costs.t_poll.ps() as f64 * (1.0 / sock.busy_poll_budget.max(1) as f64 - 1.0 / per_poll),
        t_call_ps: a.t_call.ps as f64,
        t_packet_ps: a.t_packet.ps as f64,
        batch: a.batch.max(1) as f64,
        wake_latency_ps: a.wake_latency.ps as f64,
        t_wakeup_ps: a.t_wakeup.ps as f64,
        busy_poll_ps: crate::engine::app::AppParams::of(sc).map_or(0.0, |p| p.busy.ps() as f64),
        spin: false,
        back_pressure_ps: None,
        kick_per_sleep_ps: None,
    });
    if let Some(a) = &app {
        notes.clear();
        if a.same_core && (costs.t_irq > Span::ZERO || costs.t_poll > Span::ZERO) {
            notes.push("the application shares the NAPI's core: where the stack leaves it time, the stack's interrupts and polls cost more than the saturated estimate, so the read rate there is an upper bound".to_string());
        }
    }
    // A preferred busy poller's NAPI yields after every poll: while the reader is busy
    // (its socket never empty), only the deferral timer polls it.
    let s = &sc.scenario.socket;
    let prefer = app.is_some() && s.prefer_busy_poll && n.napi.defers();
    let poll_gap_ps = if prefer && !suspends { n.napi.gro_flush_timeout.ps as f64 } else { 0.0 };
    let shared = n.tx_vector == crate::scenario::TxVector::Shared;
    let events = crate::price::Events::Napi(crate::price::NapiEvents {
        t_irq_ps: costs.t_irq.ps() as f64,
        t_poll_ps: costs.t_poll.ps() as f64,
        t_timer_ps: costs.t_timer.ps() as f64,
        weight: per_poll,
        itr: n.itr.clone(),
        shared_tx: shared && app.is_none(),
        tx_vector: !shared && app.is_none(),
        thread: n.napi.threaded.then(|| (io.thread().wake_latency.ps as f64, wake_ps)),
        defer: n.napi.defers().then_some((n.napi.defer_hard_irqs, n.napi.gro_flush_timeout.ps as f64)),
    });
    crate::price::ModeCosts {
        terms,
        events,
        poll_gap_ps,
        // Frames an application reads are not sent.
        tx_lock: app.is_none(),
        tx_clean_ps: if app.is_some() { 0.0 } else { costs.t_clean.ps() as f64 },
        app,
        // (Nothing to clean where the application consumes the frames.)
        cleans_per_rx: if sc.scenario.app.is_some() {
            f64::INFINITY
        } else {
            n.tx_work_limit as f64 / weight.max(1) as f64
        },
        notes,
        ..Default::default()
    }
}
