//! Every class of bad input is rejected with a message that names the origin, the key path,
//! the value and what was expected.

use std::path::Path;

use pktsim_core::{Error, Scenario};

const BASE: &str = r#"
name = "t"
[cpu]
frequency = "3.3GHz"
[link]
rate = "10Gbit/s"
[traffic]
rate = "1Mpps"
size = "64B"
[cost]
profile = "raumer2015-64B"
"#;

fn load_with(sets: &[(&str, &str)]) -> Result<pktsim_core::ResolvedScenario, Error> {
    let sets: Vec<(String, String)> = sets.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    Scenario::load_toml(BASE, "sc.toml", Path::new("."), &sets)
}

fn message(sets: &[(&str, &str)]) -> String {
    match load_with(sets) {
        Ok(_) => panic!("{sets:?} was accepted"),
        Err(e) => e.to_string(),
    }
}

fn assert_names(msg: &str, parts: &[&str]) {
    assert!(msg.starts_with("sc.toml: "), "origin missing: {msg}");
    for p in parts {
        assert!(msg.contains(p), "{p:?} missing from: {msg}");
    }
}

#[test]
fn the_base_scenario_is_valid() {
    let sc = load_with(&[]).unwrap();
    assert_eq!(sc.offered_pps(), 1e6);
}

#[test]
fn unknown_keys_are_rejected_with_their_path() {
    assert_names(&message(&[("traffic.colour", "red")]), &["traffic.colour", "no such key", "rate"]);
    assert_names(&message(&[("cpu.caches.l4", "1GiB")]), &["cpu.caches.l4", "no such key"]);
    assert_names(&message(&[("bogus", "1")]), &["bogus", "no such key"]);
    assert_names(&message(&[("cost.cycles.rx", "1cycles")]), &["cost.cycles.rx", "RX"]);
}

#[test]
fn missing_units_are_rejected() {
    assert_names(&message(&[("cpu.frequency", "3.3")]), &["cpu.frequency = 3.3", "GHz", "bare number"]);
    assert_names(&message(&[("traffic.size", "64")]), &["traffic.size = 64", "unit"]);
    assert_names(&message(&[("traffic.rate", "1000000")]), &["traffic.rate = 1000000", "Mpps"]);
}

#[test]
fn wrong_units_are_rejected() {
    assert_names(&message(&[("cpu.frequency", "479ns")]), &["cpu.frequency = \"479ns\"", "frequency"]);
    assert_names(&message(&[("link.rate", "10GHz")]), &["link.rate = \"10GHz\"", "bit/s"]);
    assert_names(&message(&[("traffic.rate", "3GHz")]), &["traffic.rate = \"3GHz\"", "pps"]);
    assert_names(&message(&[("cost.cycles.TX", "288ns")]), &["cost.cycles.TX = \"288ns\"", "cycles"]);
    assert_names(&message(&[("cpu.caches.memory_latency", "160cycles")]), &["cpu.caches.memory_latency", "ns"]);
}

#[test]
fn zero_and_negative_sizes_are_rejected() {
    assert_names(&message(&[("traffic.size", "0B")]), &["traffic.size = \"0B\"", "64B"]);
    assert_names(&message(&[("traffic.size", "40B")]), &["traffic.size = \"40B\"", "64B to 9216B"]);
    assert_names(&message(&[("traffic.size", "-64B")]), &["traffic.size", "negative"]);
    assert_names(&message(&[("cpu.cores", "0")]), &["cpu.cores = 0", "from 1"]);
    assert_names(&message(&[("cpu.cores", "-2")]), &["cpu.cores", "-2"]);
    assert_names(&message(&[("traffic.flows", "0")]), &["traffic.flows = 0", "from 1"]);
    assert_names(&message(&[("cpu.frequency", "0GHz")]), &["cpu.frequency", "above 0"]);
    assert_names(&message(&[("link.rate", "0Gbit/s")]), &["link.rate", "above 0"]);
    assert_names(&message(&[("fib.routes", "0")]), &["fib.routes = 0", "at least 1"]);
    assert_names(&message(&[("traffic.rate", "0Mpps")]), &["traffic.rate", "above 0"]);
}

#[test]
fn nan_and_infinity_are_rejected() {
    assert_names(&message(&[("cpu.frequency", "NaN GHz")]), &["cpu.frequency", "frequency"]);
    assert_names(&message(&[("traffic.rate", "inf Mpps")]), &["traffic.rate", "pps"]);
    assert_names(&message(&[("fib.misses_per_lookup", "nan")]), &["fib.misses_per_lookup", "finite"]);
    assert_names(&message(&[("traffic.rate", "nan")]), &["traffic.rate = NaN", "unit"]);
}

#[test]
fn offered_rate_above_line_rate_is_impossible() {
    let msg = message(&[("traffic.rate", "20Mpps")]);
    assert_names(&msg, &["traffic.rate = \"20Mpps\"", "line rate", "14.880952 Mpps"]);
    // Just at line rate is fine; so is 100%.
    assert!(load_with(&[("traffic.rate", "14.88Mpps")]).is_ok());
    assert!(load_with(&[("traffic.rate", "100%")]).is_ok());
    assert_names(&message(&[("traffic.rate", "101%")]), &["traffic.rate = \"101%\"", "line rate"]);
    // Bits: 64 B frames carry 512 bits; 9.6 Gbit/s of frames is 18.75 Mpps > line rate.
    assert_names(&message(&[("traffic.rate", "9.6Gbit/s")]), &["traffic.rate", "line rate"]);
}

#[test]
fn inconsistent_values_are_rejected() {
    assert_names(&message(&[("cpu.caches.l2", "64MiB")]), &["cpu.caches", "l1d <= l2 <= l3"]);
    assert_names(&message(&[("traffic.pattern", "bursty")]), &["traffic.pattern = \"bursty\"", "cbr", "poisson"]);
    assert_names(
        &message(&[("cost.profile", "no-such-profile")]),
        &["cost.profile = \"no-such-profile\"", "raumer2015-64B"],
    );
}

#[test]
fn sources_must_share_the_whole_rate() {
    let text = format!("{BASE}\n[[traffic.sources]]\nshare = \"30%\"\n[[traffic.sources]]\nshare = \"60%\"\n");
    let e = Scenario::load_toml(&text, "sc.toml", Path::new("."), &[]).unwrap_err().to_string();
    assert_names(&e, &["traffic.sources", "90%", "100%"]);
    let text = format!("{BASE}\n[[traffic.sources]]\nshare = \"30%\"\nsize=\"1500B\"\n[[traffic.sources]]\nshare = \"70%\"\nsize = \"12B\"\n");
    let e = Scenario::load_toml(&text, "sc.toml", Path::new("."), &[]).unwrap_err().to_string();
    assert_names(&e, &["traffic.sources[1].size", "12B"]);
}

#[test]
fn the_total_rate_is_split_by_share_and_sizes_mix() {
    // traffic.rate is the total; with 30% at 1500 B and 70% at 64 B the mean frame is 494.8 B.
    let text =
        format!("{BASE}\n[[traffic.sources]]\nshare = \"30%\"\nsize=\"1500B\"\n[[traffic.sources]]\nshare = \"70%\"\n");
    let sc = Scenario::load_toml(&text, "sc.toml", Path::new("."), &[]).unwrap();
    assert!((sc.mean_frame_bytes() - (0.3 * 1500.0 + 0.7 * 64.0)).abs() < 1e-9);
    assert_eq!(sc.offered_pps(), 1e6);
}

#[test]
fn toml_syntax_errors_give_line_and_column() {
    let e = Scenario::load_toml("[cpu\nfrequency = \"1GHz\"", "bad.toml", Path::new("."), &[]).unwrap_err().to_string();
    assert!(e.starts_with("bad.toml:1:"), "{e}");
}

#[test]
fn json_input_uses_the_same_schema() {
    let json = r#"{"cpu": {"frequency": "3.3GHz"}, "link": {"rate": "10Gbit/s"},
                   "traffic": {"rate": "1Mpps"}, "cost": {"profile": "raumer2015-64B"}}"#;
    let sc = Scenario::load_json(json, "<dict>", Path::new("."), &[]).unwrap();
    assert_eq!(sc.offered_pps(), 1e6);
    let bad = r#"{"cpu": {"frequency": 3.3}, "link": {"rate": "10Gbit/s"}, "traffic": {}, "cost": {"profile": "raumer2015-64B"}}"#;
    let e = Scenario::load_json(bad, "<dict>", Path::new("."), &[]).unwrap_err().to_string();
    assert!(e.starts_with("<dict>: cpu.frequency = 3.3"), "{e}");
    let null = r#"{"cpu": {"frequency": null}}"#;
    let e = Scenario::load_json(null, "<dict>", Path::new("."), &[]).unwrap_err().to_string();
    assert!(e.contains("cpu.frequency = null"), "{e}");
}

#[test]
fn set_overrides_reach_nested_keys_and_refuse_to_clobber_values() {
    let sc = load_with(&[("seed", "42"), ("cpu.cores", "4"), ("traffic.rate", "2.5Mpps")]).unwrap();
    assert_eq!(sc.scenario.seed, 42);
    assert_eq!(sc.scenario.cpu.cores, 4);
    assert_eq!(sc.offered_pps(), 2.5e6);
    let e = message(&[("cpu.frequency.x", "1")]);
    assert!(e.contains("cpu.frequency") && e.contains("plain value"), "{e}");
}

#[test]
fn missing_required_tables_are_named() {
    let e =
        Scenario::load_toml("[cpu]\nfrequency = \"3GHz\"\n", "x.toml", Path::new("."), &[]).unwrap_err().to_string();
    assert!(e.contains("x.toml: link") && e.contains("required"), "{e}");
}

#[test]
fn thread_timing_needs_the_threaded_napi_mode() {
    let msg = message(&[("host.thread.wake_latency", "10us")]);
    assert_names(&msg, &["host.thread", "threaded-napi"]);
    assert!(load_with(&[("host.io", "threaded-napi"), ("host.thread.wake_latency", "10us")]).is_ok());
    let msg = message(&[("host.io", "threaded-napi"), ("host.thread.t_wakeup", "10")]);
    assert_names(&msg, &["host.thread.t_wakeup", "10"]);
}

#[test]
fn deferral_belongs_to_napi_and_its_timeout_to_the_engines_range() {
    assert_names(
        &message(&[("host.io", "server"), ("nic.napi.defer_hard_irqs", "2")]),
        &["nic.napi.defer_hard_irqs", "napi"],
    );
    assert_names(
        &message(&[("host.io", "busy-poll"), ("host.batch.t_empty", "10ns"), ("nic.napi.gro_flush_timeout", "50us")]),
        &["nic.napi.gro_flush_timeout", "napi"],
    );
    assert_names(&message(&[("nic.napi.gro_flush_timeout", "20s")]), &["nic.napi.gro_flush_timeout"]);
    assert_names(&message(&[("nic.napi.defer_hard_irqs", "3000000000")]), &["nic.napi.defer_hard_irqs"]);
    // The sysfs name is accepted too.
    assert!(load_with(&[("nic.napi.napi_defer_hard_irqs", "2"), ("nic.napi.gro_flush_timeout", "50us")]).is_ok());
}

/// Linux's names for kernel and NIC knobs load as the canonical keys; both at once is an
/// error naming the key; a near miss of a Linux name is told the name.
#[test]
fn linux_names_are_aliases_of_the_canonical_keys() {
    let canon = load_with(&[
        ("host.budget", "600"),
        ("host.budget_time", "4ms"),
        ("nic.qdisc_len", "10"),
        ("nic.itr.mode", "static"),
        ("nic.itr.interval", "50us"),
    ])
    .unwrap();
    let linux = load_with(&[
        ("host.netdev_budget", "600"),
        ("host.netdev_budget_usecs", "4000us"),
        ("nic.txqueuelen", "10"),
        ("nic.itr.mode", "static"),
        ("nic.itr.rx_usecs", "50us"),
    ])
    .unwrap();
    assert_eq!(canon.scenario, linux.scenario);
    assert_names(
        &message(&[("host.budget", "300"), ("host.netdev_budget", "600")]),
        &["host.budget", "given twice", "netdev_budget"],
    );
    assert_names(&message(&[("host.netdev_budgte", "600")]), &["host.netdev_budgte", "did you mean `netdev_budget`"]);
}

/// A key only some I/O modes read, given with another, is refused: the message names the
/// key, the mode and the modes that read it. With a mode that reads it, it is taken.
#[test]
fn keys_a_mode_does_not_read_are_refused() {
    // A mode, with what it needs (a busy poller's empty calls cost something).
    let with = |m: &'static str, key: &'static str, value: &'static str| {
        let mut sets = vec![("host.io", m), (key, value)];
        if m == "busy-poll" && key != "host.batch.t_empty" {
            sets.push(("host.batch.t_empty", "50ns"));
        }
        sets
    };
    // (key, value, a mode that does not read it, one that does, the path the message names)
    let cases: [(&str, &str, &str, &str, &str); 14] = [
        ("host.t_irq", "5us", "server", "napi", "host.t_irq = \"5us\""),
        ("host.t_irq", "5us", "busy-poll", "batched-syscall", "host.t_irq"),
        ("host.t_irq", "5us", "threaded-napi", "xdp", "host.t_irq"),
        ("host.t_poll", "1us", "server", "threaded-napi", "host.t_poll = \"1us\""),
        ("host.weight", "16", "busy-poll", "napi", "host.weight = 16"),
        ("host.budget", "100", "threaded-napi", "napi", "host.budget = 100"),
        ("host.budget_time", "1ms", "server", "xdp", "host.budget_time"),
        ("host.net_rx_action", "legacy", "batched-syscall", "napi", "host.net_rx_action = \"legacy\""),
        ("host.gro_normal_batch", "4", "napi", "threaded-napi", "host.gro_normal_batch = 4"),
        ("host.strategy.kind", "quota", "napi", "server", "host.strategy"),
        ("host.batch.size", "8", "napi", "busy-poll", "host.batch"),
        ("host.batch.t_empty", "50ns", "batched-syscall", "busy-poll", "host.batch.t_empty"),
        ("host.batch.t_wakeup", "2us", "busy-poll", "batched-syscall", "host.batch.t_wakeup"),
        ("nic.itr.mode", "off", "server", "napi", "nic.itr"),
    ];
    for (key, value, wrong, right, path) in cases {
        let refused = message(&with(wrong, key, value));
        assert_names(&refused, &[path, &format!("host.io = \"{wrong}\""), &format!("\"{right}\""), "read"]);
        let taken = load_with(&with(right, key, value));
        assert!(taken.is_ok(), "{key} with {right}: {:?}", taken.err().map(|e| e.to_string()));
    }
    // Batched I/O reads host.t_irq, but its interrupt wakes a sleeping thread: it never finds
    // its core running, and a cost for that is refused rather than ignored.
    let busy = message(&with("batched-syscall", "host.t_irq_busy", "5us"));
    assert_names(&busy, &["host.t_irq_busy = \"5us\"", "expected 0", "batched-syscall"]);
    assert!(load_with(&with("napi", "host.t_irq_busy", "5us")).is_ok());
    // One strategy per core is a strategy too.
    let per_core =
        [("host.io", "napi"), ("cpu.cores", "2"), ("host.core_strategies", "[{ kind = \"sq\" }, { kind = \"sq\" }]")];
    assert_names(&message(&per_core), &["host.core_strategies", "host.io = \"napi\"", "host.io = \"server\""]);
}

/// An override that switches `host.io` (modes compared on one file) puts the file's keys
/// the new mode does not read back to their defaults, Linux names included, and names them
/// in a note: the scenario is the one of a file without them. A key an override gives
/// itself is still refused, an override to the file's own mode changes nothing, and a file
/// is held to its own mode's keys.
#[test]
fn an_override_of_the_mode_leaves_out_the_files_keys_it_does_not_read() {
    let napi = format!("{BASE}[host]\nio = \"napi\"\nt_irq = \"1us\"\nnetdev_budget = 600\nnet_rx_action = \"legacy\"\nt_proc = \"300ns\"\n[nic.itr]\nmode = \"off\"\n");
    let load = |text: &str, sets: &[(&str, &str)]| {
        let sets: Vec<(String, String)> = sets.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        Scenario::load_toml(text, "sc.toml", Path::new("."), &sets)
    };
    let switched = load(&napi, &[("host.io", "server")]).unwrap();
    let plain = load(&format!("{BASE}[host]\nio = \"server\"\nt_proc = \"300ns\"\n"), &[]).unwrap();
    assert_eq!(switched.scenario, plain.scenario);
    assert!(plain.notes.is_empty());
    assert_eq!(switched.notes.len(), 1, "{:?}", switched.notes);
    assert_names(
        &format!("sc.toml: {}", switched.notes[0]),
        &["host.io = \"server\"", "\"napi\"", "host.net_rx_action, host.netdev_budget, host.t_irq, nic.itr left out"],
    );
    // The note reaches the run's report.
    let report = pktsim_core::engine::run(
        &load(&napi, &[("host.io", "server"), ("measure.duration", "1ms")]).unwrap(),
        Default::default(),
    )
    .unwrap();
    assert!(report.notes.iter().any(|n| n.contains("host.t_irq")), "{:?}", report.notes);
    // Given by the override itself: refused.
    assert_names(
        &load(&napi, &[("host.io", "server"), ("host.t_irq", "2us")]).err().unwrap().to_string(),
        &["host.t_irq = \"2us\"", "host.io = \"server\""],
    );
    assert_names(
        &load(&napi, &[("host.io", "server"), ("nic.itr.mode", "static"), ("nic.itr.interval", "50us")])
            .err()
            .unwrap()
            .to_string(),
        &["nic.itr", "host.io = \"server\""],
    );
    // (A key of another moderation policy than the file's is refused by the section itself.)
    assert_names(
        &load(&napi, &[("nic.itr.bulk_rate", "12000")]).err().unwrap().to_string(),
        &["nic.itr.bulk_rate = 12000", "nic.itr.mode = \"off\"", "only nic.itr.mode = \"dynamic\" reads it"],
    );
    // The file's own mode: its keys stay, no note.
    let same = load(&napi, &[("host.io", "napi")]).unwrap();
    assert_eq!(same.scenario, load(&napi, &[]).unwrap().scenario);
    assert!(same.notes.is_empty());
    // A file is held to its own mode's keys.
    let server_file = format!("{BASE}[host]\nio = \"server\"\nt_irq = \"1us\"\n");
    assert_names(
        &load(&server_file, &[]).err().unwrap().to_string(),
        &["host.t_irq = \"1us\"", "host.io = \"server\""],
    );
    // A key the overrides give by its Linux name is theirs too: refused, not reset.
    assert_names(
        &load(&napi, &[("host.io", "server"), ("host.netdev_budget", "600")]).err().unwrap().to_string(),
        &["host.netdev_budget = 600", "host.io = \"server\""],
    );
    // The sections of other modes: an XDP program, a NAPI thread (and the device NAPI's
    // thread it needs, both left out together), deferral.
    let xdp = format!("{BASE}[host]\nio = \"xdp\"\nt_proc = \"300ns\"\n[host.xdp]\naction = \"drop\"\nt_prog = \"5ns\"\nt_driver = \"35ns\"\n");
    let to_napi = load(&xdp, &[("host.io", "napi")]).unwrap();
    assert_eq!(to_napi.scenario.host.io.xdp(), None);
    assert_names(&format!("sc.toml: {}", to_napi.notes[0]), &["host.xdp left out"]);
    let threaded = format!("{BASE}[host]\nio = \"napi\"\nt_proc = \"300ns\"\n[host.thread]\nwake_latency = \"5us\"\n[nic.napi]\nthreaded = true\ndefer_hard_irqs = 2\ngro_flush_timeout = \"20us\"\n");
    let to_server = load(&threaded, &[("host.io", "server")]).unwrap();
    assert_eq!(
        (to_server.scenario.host.io.thread(), to_server.scenario.nic.napi.clone()),
        (Default::default(), Default::default())
    );
    assert_names(
        &format!("sc.toml: {}", to_server.notes[0]),
        &["nic.napi.defer_hard_irqs", "nic.napi.gro_flush_timeout", "nic.napi.threaded", "host.thread"],
    );
    assert_eq!(
        to_server.scenario,
        load(&format!("{BASE}[host]\nio = \"server\"\nt_proc = \"300ns\"\n"), &[]).unwrap().scenario
    );
}

/// `host.t_proc` is a frame's whole time: per-group cycles beside it (other than
/// routing's, the FIB model's base) are refused, and so is a per-byte part without it.
#[test]
fn explicit_times_and_group_cycles_are_one_or_the_other() {
    let explicit = ("host.t_proc", "1us");
    assert_names(
        &message(&[explicit, ("cost.cycles.TX", "500cycles")]),
        &["cost.cycles.TX = \"500cycles\"", "host.t_proc"],
    );
    assert_names(&message(&[explicit, ("cost.per_byte.RX", "1cycles/B")]), &["cost.per_byte.RX", "host.t_proc"]);
    assert!(load_with(&[explicit, ("cost.cycles.routing", "200cycles")]).is_ok());
    assert!(load_with(&[explicit, ("host.t_proc_per_byte", "2ns/B")]).is_ok());
    assert_names(
        &message(&[("host.t_proc_per_byte", "2ns/B")]),
        &["host.t_proc_per_byte = \"2000ps/B\"", "only with host.t_proc"],
    );
}

/// An override that switches a tagged section's tag (`nic.itr.mode`) leaves out the file's
/// keys the new alternative does not read, with a note, as one of `host.io` does: the
/// scenario is the one of a file written that way. Keys the overrides give stay, and a key
/// of another alternative is refused, naming the alternatives that read it.
#[test]
fn an_override_of_a_tag_leaves_out_the_files_keys_the_new_alternative_does_not_read() {
    let dim = format!("{BASE}[nic.itr]\nmode = \"dim\"\nprofile = \"mlx5-cqe\"\n");
    let load = |text: &str, sets: &[(&str, &str)]| {
        let sets: Vec<(String, String)> = sets.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        Scenario::load_toml(text, "sc.toml", Path::new("."), &sets)
    };
    let switched = load(&dim, &[("nic.itr.mode", "static"), ("nic.itr.interval", "50us")]).unwrap();
    let plain = load(&format!("{BASE}[nic.itr]\nmode = \"static\"\ninterval = \"50us\"\n"), &[]).unwrap();
    assert_eq!(switched.scenario, plain.scenario);
    assert_eq!(
        switched.notes,
        ["nic.itr.mode = \"static\" (set over the file's \"dim\"): the file's nic.itr.profile left out, as \"static\" does not read it"]
    );
    // To the default alternative, by its name; a tag the file leaves out is the default.
    let to_dynamic = load(&dim, &[("nic.itr.mode", "dynamic")]).unwrap();
    assert_eq!(to_dynamic.scenario, load(BASE, &[]).unwrap().scenario);
    let off = load(&format!("{BASE}[nic.itr]\nbulk_rate = 12000\n"), &[("nic.itr.mode", "off")]).unwrap();
    assert_names(&format!("sc.toml: {}", off.notes[0]), &["over the file's \"dynamic\"", "nic.itr.bulk_rate left out"]);
    // What the new alternative needs and nobody gave: refused.
    assert_names(
        &load(&dim, &[("nic.itr.mode", "static")]).err().unwrap().to_string(),
        &["nic.itr.interval", "mode = \"static\""],
    );
    // A key the overrides give themselves is theirs: refused, not left out.
    assert_names(
        &load(&dim, &[("nic.itr.mode", "off"), ("nic.itr.profile", "ice")]).err().unwrap().to_string(),
        &[
            "nic.itr.profile = \"ice\"",
            "no nic.itr.profile with nic.itr.mode = \"off\"",
            "only nic.itr.mode = \"dim\" reads it",
        ],
    );
    // The file's own tag: its keys stay, no note; a file is held to its own tag's keys.
    let same = load(&dim, &[("nic.itr.mode", "dim")]).unwrap();
    assert_eq!((same.scenario.clone(), same.notes.len()), (load(&dim, &[]).unwrap().scenario, 0));
    let wrong = format!("{BASE}[nic.itr]\nmode = \"off\"\nprofile = \"ice\"\n");
    assert_names(&load(&wrong, &[]).err().unwrap().to_string(), &["nic.itr.profile = \"ice\"", "mode = \"off\""]);
    // The note reaches the run's report.
    let report = pktsim_core::engine::run(
        &load(&dim, &[("nic.itr.mode", "off"), ("measure.duration", "1ms")]).unwrap(),
        Default::default(),
    )
    .unwrap();
    assert!(report.notes.iter().any(|n| n.contains("nic.itr.profile left out")), "{:?}", report.notes);
}

/// A switch of `host.io` leaves out keys inside a part's own table the new mode does not
/// read (a sleeper's wake-up under a busy poller) and keeps the others (the calls), and a
/// key a mode reads only beside another (a device NAPI's thread, with nic.napi.threaded)
/// stays where that one is given.
#[test]
fn a_switch_leaves_out_keys_of_a_parts_table_and_keys_read_only_beside_another() {
    let load = |text: &str, sets: &[(&str, &str)]| {
        let sets: Vec<(String, String)> = sets.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        Scenario::load_toml(text, "sc.toml", Path::new("."), &sets)
    };
    let syscall = format!("{BASE}[host]\nio = \"batched-syscall\"\nt_irq = \"1us\"\n[host.batch]\nsize = 8\nt_call = \"1us\"\nt_wakeup = \"2us\"\n");
    let spin = load(&syscall, &[("host.io", "busy-poll")]).unwrap();
    assert_eq!(spin.scenario.host.io.batch().map(|b| (b.size, b.t_call.ps)), Some((8, 1_000_000)));
    assert_eq!(
        spin.notes,
        ["host.io = \"busy-poll\" (set over the file's \"batched-syscall\"): the file's host.batch.t_wakeup, host.t_irq left out, as \"busy-poll\" does not read them"]
    );
    let threaded =
        format!("{BASE}[host]\nio = \"threaded-napi\"\nt_proc = \"1us\"\n[host.thread]\nwake_latency = \"5us\"\n");
    let napi = load(&threaded, &[("host.io", "napi")]).unwrap();
    assert_eq!(napi.scenario.host.io.thread(), Default::default());
    assert!(napi.notes[0].contains("the file's host.thread left out"), "{:?}", napi.notes);
    let device_thread = load(&threaded, &[("host.io", "napi"), ("nic.napi.threaded", "true")]).unwrap();
    assert_eq!(device_thread.scenario.host.io.thread().wake_latency.ps, 5_000_000);
    assert!(device_thread.notes.is_empty(), "{:?}", device_thread.notes);
}

/// `[traffic]` is a tagged section too (`traffic.kind`, implied by `traffic.pcap`): a file
/// that gives `pcap` replays it; an override that gives `pcap` on a synthetic file, or
/// switches a trace file back with `kind = "synthetic"`, leaves out the file's keys the new
/// kind does not read, with a note; a key of the other kind is refused, naming it.
#[test]
fn the_traffic_kind_is_a_tag_implied_by_pcap() {
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples");
    let load = |text: &str, sets: &[(&str, &str)]| {
        let sets: Vec<(String, String)> = sets.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        Scenario::load_toml(text, "sc.toml", &examples, &sets)
    };
    let head = "name = \"t\"\n[cpu]\nfrequency = \"3.3GHz\"\n[link]\nrate = \"10Gbit/s\"\n[cost]\nprofile = \"raumer2015-64B\"\n";
    let synthetic = format!("{head}[traffic]\nsize = \"1500B\"\npattern = \"poisson\"\nflows = 4\n");
    let trace = format!("{head}[traffic]\npcap = \"trace-small.pcap\"\nloop = true\n");
    let replay = load(&trace, &[]).unwrap();
    assert!(replay.trace.is_some() && replay.scenario.traffic.pcap().is_some_and(|p| p.looped));
    // The file's synthetic keys left out where an override gives a trace.
    let to_trace = load(&synthetic, &[("traffic.pcap", "trace-small.pcap"), ("traffic.loop", "true")]).unwrap();
    assert_eq!(to_trace.scenario, replay.scenario);
    assert_eq!(
        to_trace.notes,
        ["traffic.kind = \"pcap\" (implied by the keys set over the file's \"synthetic\"): the file's traffic.flows, traffic.pattern, traffic.size left out, as \"pcap\" does not read them"]
    );
    // And back, by the tag.
    let back = load(&trace, &[("traffic.kind", "synthetic")]).unwrap();
    assert!(back.trace.is_none());
    assert_names(&format!("sc.toml: {}", back.notes[0]), &["traffic.loop, traffic.pcap left out"]);
    // A key of the other kind, in a file or given by an override: refused, naming the kind.
    assert_names(
        &load(&format!("{trace}pattern = \"cbr\"\n"), &[]).err().unwrap().to_string(),
        &[
            "traffic.pattern",
            "no traffic.pattern with traffic.kind = \"pcap\"",
            "only traffic.kind = \"synthetic\" reads it",
        ],
    );
    assert_names(
        &load(&synthetic, &[("traffic.kind", "synthetic"), ("traffic.rate_scale", "2")]).err().unwrap().to_string(),
        &["traffic.rate_scale", "only traffic.kind = \"pcap\" reads it"],
    );
    assert_names(
        &load(&trace, &[("traffic.kind", "synthetic"), ("traffic.pcap", "trace-small.pcap")])
            .err()
            .unwrap()
            .to_string(),
        &["traffic.pcap", "traffic.kind = \"synthetic\""],
    );
    // A trace kind with no trace: the key it needs.
    assert_names(
        &load(&synthetic, &[("traffic.kind", "pcap")]).err().unwrap().to_string(),
        &["traffic.pcap", "kind = \"pcap\", which has no default for it"],
    );
}

/// AF_XDP's rings, umem, waiting and forwarding: each key in range, read only where the
/// socket uses it, and no setting that would loop without time passing.
#[test]
fn an_af_xdp_socket_is_refused_what_it_cannot_be() {
    let xsk = |extra: &[(&'static str, &'static str)]| {
        let mut sets = vec![
            ("host.io", "af-xdp"),
            ("host.xdp.action", "redirect"),
            ("host.t_poll", "200ns"),
            ("app.t_packet", "10ns"),
        ];
        sets.extend_from_slice(extra);
        sets
    };
    assert!(load_with(&xsk(&[("host.af_xdp.role", "l2fwd"), ("host.af_xdp.t_xmit_zc", "20ns")])).is_ok());
    type Case<'a> = (&'a [(&'a str, &'a str)], &'a [&'a str]);
    let cases: &[Case] = &[
        (&[("host.af_xdp.busy_poll", "true")], &["host.af_xdp.busy_poll", "duration"]),
        (&[("host.af_xdp.wait", "sleep")], &["host.af_xdp.wait", "poll", "spin"]),
        (&[("host.af_xdp.umem_frames", "0")], &["host.af_xdp.umem_frames", "from 1"]),
        (&[("host.af_xdp.fill_size", "1000")], &["host.af_xdp.fill_size", "1000", "power of two"]),
        (&[("host.af_xdp.tx_size", "1024")], &["host.af_xdp.tx_size", "rxdrop"]),
        (&[("host.af_xdp.t_xmit_copy", "1us")], &["host.af_xdp.t_xmit_copy", "zero_copy = false"]),
        (
            &[("host.af_xdp.zero_copy", "false"), ("host.af_xdp.rx_full", "stop")],
            &["host.af_xdp.rx_full", "need_wakeup"],
        ),
        (&[("host.af_xdp.wait", "spin"), ("app.t_call", "0ns")], &["app.t_call", "spin"]),
        (
            &[
                ("host.af_xdp.role", "l2fwd"),
                ("host.af_xdp.t_xmit_zc", "20ns"),
                ("app.t_call", "0ns"),
                ("host.af_xdp.t_syscall", "0ns"),
            ],
            &["app.t_call", "l2fwd"],
        ),
        (&[("host.af_xdp.role", "l2fwd")], &["host.af_xdp.t_xmit_zc", "no measured default"]),
        (&[("host.af_xdp.need_wakeup", "false"), ("host.t_poll", "0ns")], &["host.t_poll", "need_wakeup"]),
    ];
    for (extra, parts) in cases {
        assert_names(&message(&xsk(extra)), parts);
    }
}
