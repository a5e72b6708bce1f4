//! `[sweep]`: the scenario keys `pktsim sweep` varies. Read by the sweep driver (Python's
//! `pktsim sweep`), which checks the keys and values; resolving a scenario does not.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Keys to sweep and how often to repeat each point.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SweepSpec {
    /// Scenario key -> values: "START:STOP:STEP" with units, or a list.
    #[serde(default)]
    pub params: std::collections::BTreeMap<String, SweepValues>,
    /// Runs per point, with seeds seed, seed + 1, ...
    #[serde(default = "one_u32")]
    pub replications: u32,
}

fn one_u32() -> u32 {
    1
}

/// Values of a swept key.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum SweepValues {
    Range(String),
    List(Vec<serde_json::Value>),
}
