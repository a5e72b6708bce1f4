//! Lone episodes against the general path: the same figures, bit for bit, with fewer
//! events (a chain's departures too), across loads, moderation policies and layouts.

use crate::engine::testing::{figures_of, scenario, Departures};
use crate::engine::SimNode;

/// The result of the node `toml` describes as JSON, without what depends on how it was
/// computed (wall time, events), and its events; `general`: every step through the
/// general path.
fn figures(toml: &str, general: bool) -> (serde_json::Value, u64) {
    let (v, events, _) = run(toml, general, None);
    (v, events)
}

/// The node `toml` describes, run with lone episodes and through the general path
/// only: the figures must be the same and the lone run's events no more; its figures
/// and both runs' events.
fn both_paths(toml: &str, what: &str) -> (serde_json::Value, u64, u64) {
    let (lone, lone_events) = figures(toml, false);
    let (general, general_events) = figures(toml, true);
    assert_eq!(lone, general, "{what}");
    assert!(lone_events <= general_events, "{what}: {lone_events} vs {general_events} events");
    (lone, lone_events, general_events)
}

/// [`figures`], with an egress port connected when `port` is given (it hears of every
/// departure, in time order: no core runs ahead of the next event), and its departures.
fn run(toml: &str, general: bool, port: Option<Departures>) -> (serde_json::Value, u64, Vec<(f64, f64)>) {
    let mut node = SimNode::build(&scenario(toml));
    if general {
        node.general_path_only();
    }
    if let Some(p) = &port {
        node.connect_egress(Box::new(p.clone()));
    }
    node.run().unwrap_or_else(|e| panic!("{e}"));
    let (v, events) = figures_of(node.report(0.0));
    (v, events, port.map(|p| p.get().0).unwrap_or_default())
}

/// With the next node's port connected (a chain), lone episodes hand it the same
/// departures as the general path, in the same order.
#[test]
fn lone_episodes_hand_the_egress_port_the_general_paths_departures() {
    for ((cores, kpps), tx_vector) in
        [(1u32, 80u32), (1, 1200), (3, 300)].into_iter().flat_map(|x| [(x, "shared"), (x, "separate")])
    {
        let toml = format!(
            "seed = 9\n[cpu]\nfrequency = \"3GHz\"\ncores = {cores}\n[link]\nrate = \"100Gbit/s\"\n\
             [traffic]\nrate = \"{}kpps\"\npattern = \"poisson\"\nflows = 64\n\
             [host]\nio = \"napi\"\nt_irq = \"300ns\"\nt_proc = \"500ns\"\nt_clean = \"80ns\"\n\
             [nic]\ntx_vector = \"{tx_vector}\"\n[measure]\nwarmup = \"1ms\"\nduration = \"3ms\"\n",
            kpps * cores
        );
        let (lone, lone_events, lone_dep) = run(&toml, false, Some(Departures::default()));
        let (general, general_events, general_dep) = run(&toml, true, Some(Departures::default()));
        let what = format!("{cores} cores, {kpps} kpps per core, tx vector {tx_vector}");
        assert_eq!(lone, general, "{what}");
        assert!(lone_dep.len() > 200, "{}", lone_dep.len());
        assert_eq!(lone_dep, general_dep, "{what}");
        assert!(lone_events <= general_events, "{what}: {lone_events} vs {general_events} events");
        // (With a tx vector of its own, the completion's interrupt mostly comes while the
        // core leaves its idle state, which the general path takes.)
        if cores == 1 && kpps < 100 && tx_vector == "shared" {
            assert!(lone_events * 5 < general_events, "{what}: {lone_events} vs {general_events} events");
        }
    }
}

/// With tx completions on a vector of their own, a frame's completion can come at the
/// very picosecond the next frame is written back (here: 64 B frames every 1 us on a
/// 6.72 Gbit/s link, 100 ns on the wire each way, 300 ns of hard IRQ and 600 ns of rx
/// clean, no moderation), so the two vectors' interrupts are due at one time: they go
/// back to the queue in the order the general path scheduled their causes, and the
/// figures are its own, bit for bit — with a poll cost and a throttle that move the
/// ties elsewhere too, and on four cores.
#[test]
fn lone_episodes_break_ties_as_the_general_path() {
    let cases: &[(u32, &str, &str)] = &[
        (1, "t_proc = \"600ns\"", "mode = \"off\""),
        (1, "t_proc = \"500ns\"\nt_poll = \"100ns\"", "mode = \"off\""),
        (1, "t_proc = \"600ns\"", "mode = \"static\"\ninterval = \"1us\""),
        (1, "t_proc = \"600ns\"", "mode = \"static\"\ninterval = \"2us\""),
        (4, "t_proc = \"600ns\"", "mode = \"off\""),
    ];
    for &(cores, host, itr) in cases {
        let toml = format!(
            "seed = 3\n[cpu]\nfrequency = \"3GHz\"\ncores = {cores}\n[link]\nrate = \"{}Gbit/s\"\n\
             [traffic]\nrate = \"{}kpps\"\npattern = \"cbr\"\nsize = \"64B\"\nflows = {cores}\n\
             [host]\nio = \"napi\"\nt_irq = \"300ns\"\nt_clean = \"80ns\"\n{host}\n\
             [nic]\ntx_vector = \"separate\"\ndma_delay = \"0ns\"\n[nic.itr]\n{itr}\n\
             [measure]\nwarmup = \"100us\"\nduration = \"1ms\"\n",
            6.72 * cores as f64,
            1000 * cores,
        );
        let what = format!("{cores} cores, {host:?} {itr:?}");
        let (lone, _, _) = both_paths(&toml, &what);
        assert!(lone["forwarded_packets"].as_u64().unwrap_or(0) > 900, "{what}");
    }
}

/// With tx completions on a vector of their own, the tx interrupt comes during an rx
/// clean of several frames (the rx throttle holds its interrupt until several wait):
/// its handler preempts the frame under way and the tx NAPI is polled next in the same
/// net_rx_action, inline, as the general path does with events — CPU time included
/// where the window starts in the middle of such a frame (warm-ups every 200 ns over
/// 60 us, which holds several; a lone run never passes the window's end, an event).
#[test]
fn lone_episodes_poll_the_tx_napi_a_frame_preempted_for_as_the_general_path() {
    for k in 0..300u64 {
        let toml = format!(
            "seed = 2\n[cpu]\nfrequency = \"3GHz\"\n[link]\nrate = \"10Gbit/s\"\n\
             [traffic]\nrate = \"300kpps\"\npattern = \"poisson\"\n\
             [host]\nio = \"napi\"\nt_irq = \"300ns\"\nt_proc = \"700ns\"\nt_clean = \"80ns\"\nt_poll = \"100ns\"\n\
             [nic]\ntx_vector = \"separate\"\n[nic.itr]\nmode = \"static\"\ninterval = \"8us\"\n\
             [cpu.idle]\ntable = \"poll\"\n[measure]\nwarmup = \"{}ns\"\nduration = \"1ms\"\n",
            100_000 + 200 * k
        );
        let (lone, lone_events, general_events) = both_paths(&toml, &format!("warm-up of {} ns", 100_000 + 200 * k));
        assert!(lone["forwarded_packets"].as_u64().unwrap_or(0) > 250);
        assert!(lone_events * 10 < general_events, "{lone_events} vs {general_events} events");
    }
}

/// A tie to the picosecond: the tx vector's interrupt preempts a frame whose stretched
/// end falls exactly on the core's interference tick (a barrier, so the lone run's
/// horizon). The frame ends on the tick, and the tick then holds the next frame 3 us;
/// the lone run's figures and departures are the general path's. (The lone run leaves
/// such a frame to the general path: it runs a stretched frame only when it ends
/// strictly before the horizon. Running it inline at the tie gives the same figures
/// here too.)
///
/// The frame's end is found from a run without interference. Then a seed is picked
/// whose tick falls on that end modulo 1 ns: the tick's phase is the first draw of the
/// stream "interference". The frames are then shifted by whole nanoseconds onto it.
#[test]
fn a_preempted_frame_ending_on_a_tick_to_the_picosecond_is_the_general_paths() {
    use crate::engine::rng::Stream;
    use crate::engine::testing::Scripted;
    let toml = |seed: u64, tick: bool| {
        format!(
            "seed = {seed}\n[cpu]\nfrequency = \"3GHz\"\n{}\n[link]\nrate = \"10Gbit/s\"\n[traffic]\nrate = \"100kpps\"\n\
             [host]\nio = \"napi\"\nt_irq = \"300ns\"\nt_proc = \"700ns\"\nt_clean = \"80ns\"\nt_poll = \"100ns\"\n\
             [nic]\ntx_vector = \"separate\"\n[nic.itr]\nmode = \"off\"\n[measure]\nwarmup = \"0s\"\nduration = \"1s\"\n",
            if tick { "[cpu.interference]\ntick_period = \"1s\"\nt_tick = [\"3us\"]" } else { "" }
        )
    };
    // (figures, departures' post times in ps) of one path.
    let run = |toml: &str, frames: &[(u64, u16)], general: bool| {
        let mut node = SimNode::with_ingress(&scenario(toml), Box::new(Scripted::new(frames)));
        if general {
            node.general_path_only();
        }
        let port = Departures::default();
        node.connect_egress(Box::new(port.clone()));
        node.run().unwrap_or_else(|e| panic!("{e}"));
        let posted: Vec<u64> = port.get().0.iter().map(|&(tx, _)| (tx * 1e3).round() as u64).collect();
        (figures_of(node.report(0.0)).0, posted)
    };
    // A burst of three: the tx interrupt of the first frame's completion comes 67.2 ns
    // into the second frame's 700 ns, which then ends 300 ns later (posted 1 us after the
    // first).
    let burst = |at_ns: u64| [(at_ns, 64), (at_ns + 10, 64), (at_ns + 20, 64)];
    let (_, posted) = run(&toml(1, false), &burst(10_000), true);
    let stretched = posted
        .windows(2)
        .find(|w| w[1] - w[0] == 1_000_000)
        .map(|w| w[1])
        .expect("a frame preempted by the tx interrupt");
    // A seed whose tick (at a phase in [0, 1 s)) falls on the stretched end shifted by
    // whole nanoseconds, at least 10 us on.
    let (seed, tick_ps) = (1..100_000u64)
        .map(|seed| (seed, Stream::new(seed, "interference").below(1_000_000_000_000)))
        .find(|&(_, phase)| phase > stretched + 10_000_000 && (phase - stretched) % 1_000 == 0)
        .expect("a seed whose tick is a whole number of ns after the frame's end");
    let frames = burst(10_000 + (tick_ps - stretched) / 1_000);
    let (general, general_posted) = run(&toml(seed, true), &frames, true);
    let (lone, lone_posted) = run(&toml(seed, true), &frames, false);
    assert_eq!(general_posted[1], tick_ps, "the preempted frame ends on the tick");
    assert_eq!(general_posted[2] - general_posted[1], 3_700_000, "the tick holds the next frame: {general_posted:?}");
    assert_eq!(lone_posted, general_posted, "tick at {tick_ps} ps");
    assert_eq!(lone, general);
}

/// A core alone with its NAPIs runs its episodes straight through, its next interrupts
/// fired without an event: the figures are the general path's, bit for bit, with
/// fewer events — at low and high load (full polls go back to the general path), on
/// one core and four, with tx completions on the rx vector and on a vector of their own
/// (whose interrupt, held, bounds the rx vector's episodes and the other way round:
/// no moderation and short throttles make them meet), with every moderation policy
/// (DIM's frame counts take the general path), with a poll cost, exponential service,
/// Poisson arrivals, small rings,
/// weights, tx work limits and budgets (time squeezes), a net_rx_action time limit, a
/// ring whose driver never gives descriptors back (frames dropped raise no interrupt),
/// interference (steps that do not fit), a time series, and a window that ends in the
/// middle of an episode.
#[test]
fn lone_episodes_are_the_general_path() {
    // (rate per core in kpps, [host] keys, [nic] keys, more tables, [measure] keys)
    let cases: &[(u32, &str, &str, &str, &str)] = &[
        (50, "", "", "", ""),
        (400, "", "", "", ""),
        (1900, "", "", "", ""),
        (300, "service = \"exponential\"\nt_poll = \"200ns\"", "", "", ""),
        (200, "", "", "[nic.itr]\nmode = \"static\"\ninterval = \"20us\"", ""),
        (200, "", "", "[nic.itr]\nmode = \"off\"", ""),
        (300, "service = \"exponential\"", "", "[nic.itr]\nmode = \"off\"", ""),
        (300, "service = \"exponential\"", "", "[nic.itr]\nmode = \"static\"\ninterval = \"2us\"", ""),
        (
            600,
            "service = \"exponential\"\nt_poll = \"400ns\"",
            "",
            "[nic.itr]\nmode = \"static\"\ninterval = \"1500ns\"",
            "",
        ),
        (500, "", "", "[nic.itr]\nmode = \"dim\"\nprofile = \"mlx5-eqe\"", ""),
        (500, "", "", "[nic.itr]\nmode = \"dim\"\nprofile = \"mlx5-cqe\"", ""),
        (1500, "weight = 4\nbudget = 8\nnet_rx_action = \"modern\"", "rx_ring = 16\ntx_work_limit = 2", "", ""),
        (800, "budget_time = \"1us\"\nhz = 1000\nnet_rx_action = \"modern\"\nservice = \"exponential\"", "", "", ""),
        (400, "budget = 2\nnet_rx_action = \"modern\"", "", "[nic.itr]\nmode = \"static\"\ninterval = \"30us\"", ""),
        (50, "", "rx_ring = 16\nrefill_batch = 16\nrefill_at_poll_end = false", "", ""),
        (300, "", "", "[cpu.interference]\ntick_period = \"97us\"\nt_tick = [\"3us\"]", ""),
        (300, "", "", "", "interval = \"500us\""),
        (100, "", "", "", "duration = \"3001234ns\""),
        // Idle states: each interrupt wakes the core from the state its governor picked.
        (50, "", "", "[cpu.idle]\ntable = \"intel-skx\"", ""),
        (400, "service = \"exponential\"", "", "[cpu.idle]\ngovernor = \"teo\"", ""),
        (150, "", "", "[cpu.idle]\ngovernor = \"haltpoll\"\ntable = \"kvm-haltpoll\"", ""),
        (
            300,
            "",
            "",
            "[cpu.idle]\ntable = \"intel-skx\"\n[cpu.interference]\ntick_period = \"97us\"\nt_tick = [\"3us\"]",
            "",
        ),
    ];
    for (cores, tx_vector) in [(1u32, "shared"), (4, "shared"), (1, "separate"), (4, "separate")] {
        for &(kpps, host, nic, tables, measure) in cases {
            let pattern = if host.contains("exponential") { "poisson" } else { "cbr" };
            // (The cores never sleep at a cost unless the case gives idle states.)
            let idle = if tables.contains("[cpu.idle]") { "" } else { "[cpu.idle]\ntable = \"poll\"" };
            let toml = format!(
                "seed = 5\n[cpu]\nfrequency = \"3GHz\"\ncores = {cores}\n[link]\nrate = \"100Gbit/s\"\n\
                 [traffic]\nrate = \"{}kpps\"\npattern = \"{pattern}\"\nsize = \"64B\"\nflows = 64\n\
                 [host]\nio = \"napi\"\nt_irq = \"300ns\"\nt_proc = \"500ns\"\nt_clean = \"80ns\"\n{host}\n\
                 [nic]\ntx_vector = \"{tx_vector}\"\n{nic}\n{tables}\n{idle}\n\
                 [measure]\nwarmup = \"1ms\"\n{}\n",
                kpps * cores,
                if measure.starts_with("duration") {
                    measure.to_string()
                } else {
                    format!("duration = \"3ms\"\n{measure}")
                },
            );
            let what = format!(
                "{cores} cores, tx vector {tx_vector}, {kpps} kpps per core, {host:?} {nic:?} {tables:?} {measure:?}"
            );
            let (lone, lone_events, general_events) = both_paths(&toml, &what);
            assert!(lone["offered_packets"].as_u64().unwrap_or(0) > 100, "{what}");
            if kpps == 50 && cores == 1 && nic.is_empty() && !idle.is_empty() {
                // (With several cores, an idle core's armed ring keeps an arrival event
                // in the queue, which bounds the others' horizons.)
                assert!(
                    lone_events * 20 < general_events,
                    "{what}: a frame alone brings no event: {lone_events} vs {general_events}"
                );
            }
        }
    }
}
