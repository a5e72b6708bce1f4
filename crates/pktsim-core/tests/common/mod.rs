//! Fixtures shared by the integration tests: a scenario from a TOML snippet with
//! `--set`-style overrides, its simulation, and a relative comparison of figures.

#![allow(dead_code)]

use std::path::Path;

use pktsim_core::engine::{run, SimResult};
use pktsim_core::{ResolvedScenario, Scenario};

/// The scenario `toml` describes with `sets` applied (`origin` names it in errors).
pub fn load(toml: &str, origin: &str, sets: &[(&str, &str)]) -> ResolvedScenario {
    let sets: Vec<(String, String)> = sets.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    Scenario::load_toml(toml, origin, Path::new("."), &sets).unwrap_or_else(|e| panic!("{e}"))
}

/// Simulate the scenario `toml` describes with `sets` applied.
pub fn simulate(toml: &str, origin: &str, sets: &[(&str, &str)]) -> SimResult {
    sim(&load(toml, origin, sets))
}

/// Simulate a loaded scenario.
pub fn sim(sc: &ResolvedScenario) -> SimResult {
    run(sc, Default::default()).unwrap_or_else(|e| panic!("{e}"))
}

/// `a` within `rel` (relative) of `b`.
pub fn close(a: f64, b: f64, rel: f64) -> bool {
    (a - b).abs() <= rel * b.abs()
}
