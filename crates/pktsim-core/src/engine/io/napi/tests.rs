//! The NAPI mode against hand-computed traces: interrupts preempting polls, causes latched
//! while masked, deferral, DIM's two modes, the throttle counter, threaded NAPI, busy
//! polling, `SO_PREFER_BUSY_POLL` and IRQ suspension.

use crate::engine::testing::{node_toml, trace, trace_origins};

/// ITR off, t_irq 1 us, t_proc 2 us, t_clean 0.5 us; tx completions on their own
/// vector. Frames reach the rx ring at 10 and 12 us.
///
/// ```text
///  10     IRQ v0 (rx) -> handler 10-11 -> poll v0: frame 1 11-13, tx at 13 (done 13.0672)
///  13     frame 2 (written at 12 while v0 was masked) 13-15
///  13.07  IRQ v1 (tx completion) preempts: frame 2 ends at 16, tx at 16 (done 16.0672)
///  16     v0 completes; its cause from 12 is pending -> IRQ v0 at 16 (counter 0)
///         poll v1 (scheduled by the handler at 13.07): tx clean 16-16.5, preempted by
///         IRQ v0 -> 17.5; second clean 17.5-18; v1 completes, completion from
///         16.07 pending -> IRQ v1 at 18; poll v0: nothing, v0 armed
///  18     IRQ v1 -> handler 18-19 -> poll v1: nothing, armed
/// ```
#[test]
fn an_interrupt_preempts_a_poll_and_causes_that_came_while_masked_interrupt_at_unmask() {
    let toml =
        node_toml("io = \"napi\"\nt_irq = \"1us\"\nt_proc = \"2us\"\nt_clean = \"500ns\"", "[nic.itr]\nmode = \"off\"");
    let (r, dep, origins) = trace_origins(&toml, &[(10_000, 64), (12_000, 64)]);
    assert_eq!(dep, [(13_000.0, 13_067.2), (16_000.0, 16_067.2)]);
    assert_eq!(origins, [10_000.0, 12_000.0], "the egress port sees where each frame began");
    assert_eq!(r.irq_per_s * 1e-3, 4.0, "IRQs at 10, 13.07, 16, 18 us");
    assert_eq!(r.polls_per_packet, 2.0, "four polls for two frames");
    assert_eq!(r.packets_per_poll.histogram[..3], [1, 0, 1], "rx polls: one with both frames, one empty");
    assert_eq!((r.latency_ns.min, r.latency_ns.mean), (3_000.0, 3_500.0));
    assert!((r.cpu_by_activity["irq"] - 4e-6 / 1e-3).abs() < 1e-12, "4 handlers of 1 us in 1 ms");
    assert!((r.cpu_by_activity["tx_clean"] - 1e-6 / 1e-3).abs() < 1e-12);
}

/// napi_defer_hard_irqs = 2, gro_flush_timeout = 5 us; ITR off, tx completions on the
/// rx vector, t_irq 1 us, t_poll 0.5 us, t_proc 2 us. Frames reach the ring at 10 and
/// 14 us.
///
/// ```text
///  10     IRQ -> handler 10-11 -> poll 11-11.5, frame 1 11.5-13.5: work, count 2 -> 1,
///         vector stays masked, timer at 18.5 (frame 2 at 14 raises no IRQ)
///  18.5   timer poll 18.5-19, frame 2 19-21: work, count 2 -> 1, timer at 26
///  26     timer poll 26-26.5 (cleans frame 2's completion): empty, count 1 -> 0, timer at 31.5
///  31.5   timer poll 31.5-32: empty, count 0 -> unmask; completions came while masked
///         -> IRQ at 32 -> handler 32-33 -> poll 33-33.5: empty, unmask
/// ```
#[test]
fn deferral_keeps_the_interrupt_masked_and_polls_from_a_timer() {
    let host = "io = \"napi\"\nt_irq = \"1us\"\nt_poll = \"500ns\"\nt_proc = \"2us\"\nt_timer = \"0ns\"";
    let toml = node_toml(host, "[nic]\ntx_vector = \"shared\"\n[nic.itr]\nmode = \"off\"\n[nic.napi]\ndefer_hard_irqs = 2\ngro_flush_timeout = \"5us\"");
    let (r, dep) = trace(&toml, &[(10_000, 64), (14_000, 64)]);
    let t_tx: Vec<f64> = dep.iter().map(|d| d.0).collect();
    assert_eq!(t_tx, [13_500.0, 21_000.0]);
    assert_eq!(r.irq_per_s * 1e-3, 2.0, "IRQs at 10 and 32 us only");
    assert_eq!(r.polls_per_packet, 2.5, "polls at 11, 18.5, 26, 31.5 and 33 us");
    assert_eq!(r.io.json()["deferral_timer_polls"], 3);
    assert_eq!((r.latency_ns.min, r.latency_ns.max), (3_500.0, 7_000.0));
    assert!((r.cpu_by_activity["irq"] - 2e-6 / 1e-3).abs() < 1e-12);
    assert!((r.cpu_by_activity["poll"] - 2.5e-6 / 1e-3).abs() < 1e-12);
    // Without deferral the vector is unmasked at 13.5 us; frame 1's completion at
    // 13.5672 interrupts, and frame 2 is polled at 15.0672 and leaves at 17.0672.
    let plain = node_toml(
        "io = \"napi\"\nt_irq = \"1us\"\nt_poll = \"500ns\"\nt_proc = \"2us\"",
        "[nic]\ntx_vector = \"shared\"\n[nic.itr]\nmode = \"off\"",
    );
    let (_, dep) = trace(&plain, &[(10_000, 64), (14_000, 64)]);
    assert!((dep[1].0 - 17_067.2).abs() < 1e-6, "{dep:?}");
}

/// The trace above with the deferral timer costing 1 us (`host.t_timer`: its arming and
/// the expiry that follows), charged when `napi_complete_done` arms it, after the poll:
/// at 13.5-14.5, 21-22 and 26.5-27.5, the core taken as by the poll. No frame leaves later:
/// the cost is CPU time, not in any frame's way.
#[test]
fn each_deferral_timer_costs_t_timer_when_it_is_armed() {
    let host = "io = \"napi\"\nt_irq = \"1us\"\nt_poll = \"500ns\"\nt_proc = \"2us\"\nt_timer = \"1us\"";
    let nic = "[nic]\ntx_vector = \"shared\"\n[nic.itr]\nmode = \"off\"";
    let defer = format!("{nic}\n[nic.napi]\ndefer_hard_irqs = 2\ngro_flush_timeout = \"5us\"");
    let (r, dep) = trace(&node_toml(host, &defer), &[(10_000, 64), (14_000, 64)]);
    let t_tx: Vec<f64> = dep.iter().map(|d| d.0).collect();
    assert_eq!(t_tx, [13_500.0, 21_000.0]);
    assert_eq!(r.io.json()["deferral_timer_polls"], 3);
    assert_eq!(r.irq_per_s * 1e-3, 2.0);
    assert_eq!((r.latency_ns.min, r.latency_ns.max), (3_500.0, 7_000.0));
    assert!((r.cpu_by_activity["irq"] - 2e-6 / 1e-3).abs() < 1e-12);
    assert!((r.cpu_by_activity["poll"] - 5.5e-6 / 1e-3).abs() < 1e-12, "{}", r.cpu_by_activity["poll"]);
    // Without deferral no timer is armed: four interrupts and their polls, nothing more.
    let (r, _) = trace(&node_toml(host, nic), &[(10_000, 64), (14_000, 64)]);
    assert_eq!(r.irq_per_s * 1e-3, 4.0);
    assert!((r.cpu_by_activity["poll"] - 2e-6 / 1e-3).abs() < 1e-12, "{}", r.cpu_by_activity["poll"]);
}

/// DIM, mlx5 CQE mode, at its default profile (index 1: 8 us, 128 frames); t_irq 1 us,
/// t_proc 1 us; tx completions on the rx vector.
///
/// ```text
///  10     frame 1 written back: the timer runs 8 us from it -> IRQ at 18 (frame 2 at
///         14 waits with it); handler 18-19, frames 19-20, 20-21
///  21     complete: the completion of 20.07 came meanwhile -> IRQ 8 us after it was
///         seen, at 29; its poll cleans both completions; armed
/// ```
#[test]
fn dim_cqe_mode_interrupts_one_interval_after_the_first_write_back() {
    let toml = node_toml(
        "io = \"napi\"\nt_irq = \"1us\"\nt_proc = \"1us\"",
        "[nic]\ntx_vector = \"shared\"\n[nic.itr]\nmode = \"dim\"\nprofile = \"mlx5-cqe\"",
    );
    let (r, dep) = trace(&toml, &[(10_000, 64), (14_000, 64)]);
    let t_tx: Vec<f64> = dep.iter().map(|d| d.0).collect();
    assert_eq!(t_tx, [20_000.0, 21_000.0]);
    assert_eq!(r.io.json()["moderation_state"][0]["usec"], 8);
    assert_eq!(r.io.json()["moderation_state"][0]["frames"], 128);
    assert_eq!(r.irq_per_s * 1e-3, 2.0, "IRQs at 18 and 29 us");
    assert_eq!(r.polls_per_packet, 1.0);
}

/// EQE mode (index 1: 8 us from the last interrupt, 256 frames): a lone frame
/// interrupts at once; the next waits for the interval since that interrupt.
#[test]
fn dim_eqe_mode_times_from_the_last_interrupt() {
    let toml = node_toml(
        "io = \"napi\"\nt_irq = \"1us\"\nt_proc = \"1us\"",
        "[nic]\ntx_vector = \"shared\"\n[nic.itr]\nmode = \"dim\"\nprofile = \"mlx5-eqe\"",
    );
    let (_, dep) = trace(&toml, &[(10_000, 64), (13_000, 64)]);
    // IRQ 10, handler to 11, frame 1 to 12 (completes at 12.07: a cause of the armed
    // vector -> IRQ when the counter allows, 10 + 8 = 18; frame 2 at 13 leaves it
    // there). Handler 18-19, frame 2 19-20.
    let t_tx: Vec<f64> = dep.iter().map(|d| d.0).collect();
    assert_eq!(t_tx, [12_000.0, 20_000.0]);
}

/// A full count interrupts at the write-back that fills it: CQE mode index 1 counts
/// 128 frames; frames every 10 ns from 10 us fill it at 11.27 us, long before the timer.
#[test]
fn dim_interrupts_when_the_ring_holds_its_frame_count() {
    let toml = node_toml(
        "io = \"napi\"\nt_irq = \"1us\"\nt_proc = \"10ns\"",
        "[nic]\ntx_vector = \"shared\"\n[nic.itr]\nmode = \"dim\"\nprofile = \"mlx5-cqe\"",
    );
    let frames: Vec<(u64, u16)> = (0..128).map(|i| (10_000 + 10 * i, 64)).collect();
    let (_, dep) = trace(&toml, &frames);
    // IRQ at 11.27, handler to 12.27, then frame 1 to 12.28.
    assert_eq!(dep[0].0, 12_280.0);
}

/// Threaded NAPI on a device: wake_latency 3 us, t_wakeup 1 us, t_irq 1 us, t_proc 2 us,
/// ITR off, tx completions on the rx vector. Frames at 10 and 11 us.
///
/// ```text
///  10     IRQ -> handler 10-11 -> napi_schedule wakes the thread: runs at 14 (the core
///         idles meanwhile); wake-up 14-15, poll: frames 15-17, 17-19; complete, sleep
///  19     frame 1's completion (17.07) came while masked -> IRQ 19, handler 19-20,
///         thread at 23, wake-up 23-24, poll cleans both completions, sleeps; frame 2's
///         completion (19.07) came after the IRQ of 19 -> IRQ 24, thread at 28, wake-up
///         28-29, empty poll, armed
/// ```
#[test]
fn a_threaded_napi_is_polled_by_its_thread_the_interrupt_wakes() {
    let host =
        "io = \"napi\"\nt_irq = \"1us\"\nt_proc = \"2us\"\n[host.thread]\nwake_latency = \"3us\"\nt_wakeup = \"1us\"";
    let toml = node_toml(host, "[nic]\ntx_vector = \"shared\"\n[nic.itr]\nmode = \"off\"\n[nic.napi]\nthreaded = true");
    let (r, dep) = trace(&toml, &[(10_000, 64), (11_000, 64)]);
    let t_tx: Vec<f64> = dep.iter().map(|d| d.0).collect();
    assert_eq!(t_tx, [17_000.0, 19_000.0]);
    assert_eq!(r.irq_per_s * 1e-3, 3.0);
    assert_eq!(r.io.json()["thread_wakeups"], 3);
    assert_eq!(r.softirqs_per_packet, 0.0, "no NET_RX softirq");
    assert!((r.cpu_by_activity["wakeup"] - 3e-6 / 1e-3).abs() < 1e-12);
    assert_eq!((r.latency_ns.min, r.latency_ns.max), (7_000.0, 8_000.0));
}

/// A device's NAPI thread on its way to sleep (XDP drop, t_driver 1 us, t_irq 1 us, wake
/// latency 3 us, t_wakeup 1 us, t_sleep 5 us, ITR off). Frames at 10, 20 and 40 us.
///
/// ```text
///  10  IRQ 10-11 wakes the thread: runs at 14, wake-up 14-15, frame 15-16 (latency 6);
///      complete, on its way to sleep 16-21
///  20  IRQ: the thread is still on its way (4 us of it spent): handler 20-21, the thread
///      polls with no wake-up, frame 21-22 (latency 2); on its way 22-27, then asleep
///  40  IRQ 40-41, thread at 44, wake-up 44-45, frame 45-46 (latency 6); on its way 46-51
/// ```
///
/// Two wake-ups; the thread's CPU besides its polls is 2 x 1 + 4 + 5 + 5 = 16 us. Without
/// t_sleep the frame of 20 wakes the thread (at 24) and waits 6 us too.
#[test]
fn a_device_napi_thread_on_its_way_to_sleep_polls_again_without_a_wake_up() {
    let host = "io = \"xdp\"\nt_irq = \"1us\"\n[host.xdp]\naction = \"drop\"\nt_driver = \"1us\"\n[host.thread]\nwake_latency = \"3us\"\nt_wakeup = \"1us\"";
    let napi = "[nic.itr]\nmode = \"off\"\n[nic.napi]\nthreaded = true";
    let frames = [(10_000, 64), (20_000, 64), (40_000, 64)];
    let (r, _) = trace(&node_toml(&format!("{host}\nt_sleep = \"5us\""), napi), &frames);
    assert_eq!(r.io.json()["thread_wakeups"], 2);
    assert_eq!((r.latency_ns.min, r.latency_ns.max), (2_000.0, 6_000.0));
    assert!((r.latency_ns.mean - 14_000.0 / 3.0).abs() < 1e-6, "{}", r.latency_ns.mean);
    assert!((r.cpu_by_activity["wakeup"] - 16e-6 / 1e-3).abs() < 1e-12, "{}", r.cpu_by_activity["wakeup"]);
    assert_eq!(r.irq_per_s * 1e-3, 3.0);
    let (r0, _) = trace(&node_toml(host, napi), &frames);
    assert_eq!(r0.io.json()["thread_wakeups"], 3);
    assert_eq!((r0.latency_ns.min, r0.latency_ns.max), (6_000.0, 6_000.0));
}

const BUSY: &str = "io = \"napi\"\nt_irq = \"1us\"\nt_poll = \"200ns\"\nt_proc = \"1us\"\nt_timer = \"0ns\"";

fn busy_toml(socket: &str, napi: &str) -> String {
    let extra = format!("[nic]\ntx_vector = \"shared\"\n[nic.itr]\nmode = \"off\"\n[nic.napi]\n{napi}\n[app]\nt_packet = \"500ns\"\nbatch = 8\n[socket]\nbusy_poll = \"10us\"\n{socket}");
    node_toml(BUSY, &extra)
}

/// Busy polling for 10 us (t_poll 200 ns, t_proc 1 us, the reader 500 ns a frame).
/// Frames at 10 and 15.05 us.
///
/// ```text
///  10     IRQ, handler 10-11, softirq poll 11-11.2, frame 11.2-12.2 -> socket; the
///         reader reads it 12.2-12.7; the socket is empty: busy polls of 200 ns from 12.7
///  15.05  frame 2: the vector is armed -> IRQ preempts the busy poll of 14.9 (ends
///         16.1; napi_schedule finds the NAPI taken); its rx phase takes frame 2,
///         16.1-17.1; busy_poll_stop's poll 17.1-17.3 completes the NAPI (unmasked);
///         the reader reads 17.3-17.8; busy polls again until 27.8
/// ```
#[test]
fn a_busy_polling_reader_polls_the_napi_itself() {
    let (r, _) = trace(&busy_toml("", ""), &[(10_000, 64), (15_050, 64)]);
    assert_eq!(r.consumed_packets, 2);
    assert_eq!((r.latency_ns.min, r.latency_ns.max), (2_700.0, 2_750.0));
    assert_eq!(r.irq_per_s * 1e-3, 2.0);
    // Busy polls: 12.7 .. 14.9 (12, the last one preempted to 16.1 and taking frame 2
    // to 17.1), its stop, then from 17.8 to 27.8 (50) and the stop: 64.
    assert_eq!(r.io.json()["busy_polls"], 64);
}

/// The same with SO_PREFER_BUSY_POLL and deferral (2, 5 us): the interrupt masked by
/// the first frame's deferral stays masked while the reader polls; frame 2 is found by
/// a busy poll, and only after the reader blocks does the timer poll and unmask.
///
/// ```text
///  10     IRQ, softirq poll, frame 1 to 12.2: work -> count 2 -> 1, timer 17.2, masked
///  15.05  frame 2, no IRQ: the busy poll 14.9-15.1 takes it 15.1-16.1; stop poll
///         16.1-16.3 arms the timer (21.3) instead of unmasking; read 16.3-16.8
///  21.3   the timer finds the NAPI busy polled (missed); the loop ends at 26.8, its stop
///         poll arms the timer (32.0); the reader blocks
///  32.0   timer poll: empty, count 1 -> 0, timer 37.2; 37.2: empty -> unmask; the
///         cause frame 2 latched while masked fires then (37.4), to an empty poll
/// ```
#[test]
fn prefer_busy_poll_keeps_the_interrupt_masked_while_the_reader_polls() {
    let (r, _) = trace(
        &busy_toml("prefer_busy_poll = true", "defer_hard_irqs = 2\ngro_flush_timeout = \"5us\""),
        &[(10_000, 64), (15_050, 64)],
    );
    assert_eq!(r.consumed_packets, 2);
    assert_eq!(
        r.irq_per_s * 1e-3,
        2.0,
        "frame 1's, and at 37.4 the cause frame 2 latched: none while the reader polled"
    );
    assert_eq!((r.latency_ns.min, r.latency_ns.max), (1_750.0, 2_700.0));
    assert_eq!(r.io.json()["deferral_timer_polls"], 2, "at 32.0 and 37.2 us");
}

/// IRQ suspension (1 ms) on top of the previous test: the stop poll after the loop that
/// found frame 2 arms the suspension timer (16.3 + 1000 us) instead of gro_flush_timeout;
/// the next loop ends empty at 26.8, its stop poll arms the 5 us timer, and before the
/// reader blocks napi_resume_irqs schedules the NAPI: a softirq poll at 27.0 (count
/// 1 -> 0, timer 32.2), whose empty poll unmasks (the latched cause fires at 32.4).
#[test]
fn irq_suspension_holds_the_timer_while_epoll_finds_events_and_resumes_when_it_blocks() {
    let napi = "defer_hard_irqs = 2\ngro_flush_timeout = \"5us\"\nirq_suspend_timeout = \"1ms\"";
    let (r, _) = trace(&busy_toml("prefer_busy_poll = true", napi), &[(10_000, 64), (15_050, 64)]);
    assert_eq!((r.latency_ns.min, r.latency_ns.max), (1_750.0, 2_700.0));
    assert_eq!(r.io.json()["deferral_timer_polls"], 1, "at 32.2 us only");
    assert_eq!(r.irq_per_s * 1e-3, 2.0);
    assert_eq!(r.softirqs_per_packet, 2.0, "at 11 (IRQ), 27.0 (resume), 32.2 (timer), 33.4 (IRQ)");
}

#[test]
fn the_throttle_counter_delays_the_second_interrupt() {
    // rx-usecs 10: 10.24 us. Frames at 10 and 15 us: the second interrupt waits for the
    // counter loaded at 10 us, until 20.24 us.
    let toml = node_toml(
        "io = \"napi\"\nt_irq = \"1us\"\nt_proc = \"1us\"",
        "[nic]\ntx_vector = \"shared\"\n[nic.itr]\nmode = \"static\"\ninterval = \"10us\"",
    );
    let (r, dep) = trace(&toml, &[(10_000, 64), (15_000, 64)]);
    // IRQ at 10, handler to 11, frame to 12; IRQ at 20.24, handler to 21.24, frame to 22.24.
    assert_eq!(dep[0].0, 12_000.0);
    assert_eq!(dep[1].0, 22_240.0);
    assert!((r.latency_ns.max - 7_240.0).abs() < 8.0, "7.24 us, within its HDR bucket: {}", r.latency_ns.max);
}

/// `__do_softirq`'s restart limit: a burst of 700 frames (10 Gbit/s apart, 64 B) on one
/// NAPI, t_irq 1 us, t_proc 1 us, ITR off. Each `net_rx_action` pass polls the NAPI once
/// (64 frames, a full poll goes back on the list and the softirq is raised again); after
/// `MAX_SOFTIRQ_RESTART` = 10 passes (640 frames, 10 - 651 us) the softirq wakes
/// ksoftirqd, which switches in (0.74 us, the default wake-up) and polls the other 60
/// (651.74 - 711.74 us) in task context.
#[test]
fn ten_passes_of_do_softirq_hand_the_rest_to_ksoftirqd() {
    let host = "io = \"napi\"\nt_irq = \"1us\"\nt_proc = \"1us\"\nt_clean = \"0ns\"";
    let toml =
        node_toml(host, "[nic]\nrx_ring = 1024\ntx_ring = 1024\ntx_vector = \"shared\"\n[nic.itr]\nmode = \"off\"");
    let frames: Vec<(u64, u16)> = (0..700).map(|_| (10_000, 64)).collect();
    let (r, dep) = trace(&toml, &frames);
    assert_eq!(dep.len(), 700);
    assert_eq!(r.ksoftirqd_wakeups, 1);
    assert!((dep[639].0 - 651_000.0).abs() < 1e-6, "{:?}", dep[639]);
    assert!((dep[699].0 - 711_740.0).abs() < 1e-6, "{:?}", dep[699]);
    let ctx = &r.cpu_by_context;
    assert!((ctx["ksoftirqd"] - 60.74e-6 / 1e-3).abs() < 1e-12, "{ctx:?}");
    assert!((ctx["softirq"] - 640e-6 / 1e-3).abs() < 1e-12, "{ctx:?}");
    assert_eq!(ctx["hardirq"], r.cpu_by_activity["irq"], "the handlers, the burst's and the completions' after it");
}

/// epoll with `prefer_busy_poll` and no busy-poll time (Linux 6.13, `ep_busy_loop_on`):
/// each time the reader finds its socket empty it polls the NAPI once and hands it back
/// (`busy_poll_stop`'s poll), then sleeps: two busy polls a wait, four for two frames 50 us
/// apart. Without `prefer_busy_poll` it never busy polls; with IRQ suspension on top the
/// same reader runs (the feature's own measurements ran it so).
#[test]
fn epoll_preferring_busy_poll_with_no_busy_time_polls_once_before_it_sleeps() {
    let toml = |socket: &str, napi: &str| {
        let extra = format!("[nic]\ntx_vector = \"shared\"\n[nic.itr]\nmode = \"off\"\n[nic.napi]\n{napi}\n[app]\nt_packet = \"500ns\"\nbatch = 8\n[socket]\n{socket}");
        node_toml(BUSY, &extra)
    };
    let defer = "defer_hard_irqs = 2\ngro_flush_timeout = \"5us\"";
    let frames = [(10_000, 64), (60_000, 64)];
    let (once, _) = trace(&toml("prefer_busy_poll = true", defer), &frames);
    assert_eq!(once.consumed_packets, 2);
    assert_eq!(once.io.json()["busy_polls"], 4);
    let (plain, _) = trace(&toml("", defer), &frames);
    assert_eq!(plain.consumed_packets, 2);
    assert_eq!(plain.io.json()["busy_polls"], 0);
    let suspend = format!("{defer}\nirq_suspend_timeout = \"1ms\"");
    let (suspended, _) = trace(&toml("prefer_busy_poll = true", &suspend), &frames);
    assert_eq!(suspended.consumed_packets, 2);
    assert_eq!(suspended.io.json()["busy_polls"], 4);
}
