//! Cost profiles: CPU cycles per packet by processing group (000, section IV).
//!
//! A profile gives, for each group `RX, alloc, prerouting, routing, postrouting, free, TX,
//! other`, a fixed cost in cycles and an optional per-byte cost, so that the cost of a packet
//! of `S` bytes in group `i` is `C_i(S) = cycles_i + per_byte_i * S` and
//! `C_total = sum_i C_i` (000 Eq. 2).
//!
//! A profile also records the FIB it was measured with (`reference_routes`,
//! `reference_flows`) so that the routing group can be moved to another FIB size by the
//! FIB/cache model in [`crate::fib`].
//!
//! Profile file format (the same file `pktsim calibrate` writes):
//!
//! ```toml
//! [profile]
//! name = "raumer2015-64B"
//! source = "000 Table II, 64 B"
//! frequency = "3.3GHz"      # where it was measured (informational)
//! reference_routes = 1
//! reference_flows = 1
//!
//! [cycles]
//! RX = "408cycles"
//! # ...
//!
//! [per_byte]              # optional
//! RX = "0.024cycles/B"
//! ```

use std::path::Path;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::error::{ConfigError, Result};
use crate::units::{Cycles, CyclesPerByte, Frequency};

/// The processing groups of 000, in the order a packet meets them.
pub const GROUP_NAMES: [&str; 8] = ["RX", "alloc", "prerouting", "routing", "postrouting", "free", "TX", "other"];

/// Index of a group in [`GROUP_NAMES`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Group {
    Rx = 0,
    Alloc = 1,
    Prerouting = 2,
    Routing = 3,
    Postrouting = 4,
    Free = 5,
    Tx = 6,
    Other = 7,
}

/// One optional value per group, as written in TOML (`RX = "408cycles"`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Groups<T> {
    /// Reception by the NIC and its driver (000: C_RX).
    #[serde(rename = "RX", default, skip_serializing_if = "Option::is_none")]
    pub rx: Option<T>,
    /// Buffer allocation and transfer to memory (C_alloc).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alloc: Option<T>,
    /// Processing before the routing decision: ip_rcv, netfilter PREROUTING (C_prerouting).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prerouting: Option<T>,
    /// FIB lookup (C_routing).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub routing: Option<T>,
    /// ip_forward, POSTROUTING, neighbour resolution (C_postrouting).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub postrouting: Option<T>,
    /// Buffer deallocation (C_free).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub free: Option<T>,
    /// Transmission: qdisc, driver xmit, tx clean (C_TX).
    #[serde(rename = "TX", default, skip_serializing_if = "Option::is_none")]
    pub tx: Option<T>,
    /// Everything no group claims: locks, IRQ save/restore, idle functions (C_other).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub other: Option<T>,
}

impl<T: Copy> Groups<T> {
    pub fn as_array(&self) -> [Option<T>; 8] {
        [self.rx, self.alloc, self.prerouting, self.routing, self.postrouting, self.free, self.tx, self.other]
    }
    pub fn from_array(a: [Option<T>; 8]) -> Self {
        Groups {
            rx: a[0],
            alloc: a[1],
            prerouting: a[2],
            routing: a[3],
            postrouting: a[4],
            free: a[5],
            tx: a[6],
            other: a[7],
        }
    }
}

/// Cycles per packet in each group, as plain numbers (the engine's form of a profile).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct GroupCycles(pub [f64; 8]);

impl GroupCycles {
    pub fn total(&self) -> f64 {
        self.0.iter().sum()
    }
    pub fn get(&self, g: Group) -> f64 {
        self.0[g as usize]
    }
    pub fn set(&mut self, g: Group, v: f64) {
        self.0[g as usize] = v;
    }
    /// `(group name, cycles)` pairs in packet order.
    pub fn named(&self) -> impl Iterator<Item = (&'static str, f64)> + '_ {
        GROUP_NAMES.iter().copied().zip(self.0.iter().copied())
    }
}

/// Header of a profile file.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ProfileInfo {
    /// A short name for tables and plots.
    #[serde(default)]
    pub name: Option<String>,
    /// Where the numbers come from (paper and table, or the profile that was calibrated).
    #[serde(default)]
    pub source: Option<String>,
    /// Clock frequency of the machine the profile was measured on (informational).
    #[serde(default)]
    pub frequency: Option<Frequency>,
    /// Number of routes in the FIB when the profile was measured (default 1).
    #[serde(default)]
    pub reference_routes: Option<u64>,
    /// Number of distinct flows (destinations) in the measured traffic (default 1).
    #[serde(default)]
    pub reference_flows: Option<u64>,
}

/// A cost-profile file.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CostProfileFile {
    #[serde(default)]
    pub profile: ProfileInfo,
    /// Fixed cycles per packet per group.
    #[serde(default)]
    pub cycles: Groups<Cycles>,
    /// Cycles per byte of packet per group.
    #[serde(default)]
    pub per_byte: Groups<CyclesPerByte>,
}

/// A resolved cost profile.
#[derive(Debug, Clone, PartialEq)]
pub struct CostProfile {
    pub name: String,
    pub source: String,
    pub fixed: GroupCycles,
    pub per_byte: GroupCycles,
    pub reference_routes: u64,
    pub reference_flows: u64,
}

impl CostProfile {
    pub fn from_file(file: CostProfileFile, default_name: &str) -> Self {
        let fixed = GroupCycles(file.cycles.as_array().map(|c| c.map_or(0.0, |c| c.cycles)));
        let per_byte = GroupCycles(file.per_byte.as_array().map(|c| c.map_or(0.0, |c| c.cycles_per_byte)));
        CostProfile {
            name: file.profile.name.unwrap_or_else(|| default_name.to_string()),
            source: file.profile.source.unwrap_or_default(),
            fixed,
            per_byte,
            reference_routes: file.profile.reference_routes.unwrap_or(1),
            reference_flows: file.profile.reference_flows.unwrap_or(1),
        }
    }

    /// Cycles per group for a packet of `size_bytes` (000 Eq. 2 terms, before any FIB move).
    pub fn cycles_for_size(&self, size_bytes: f64) -> GroupCycles {
        let mut out = self.fixed;
        for i in 0..8 {
            out.0[i] += self.per_byte.0[i] * size_bytes;
        }
        out
    }

    /// Overlay per-group values given in a scenario (`[cost.cycles]`, `[cost.per_byte]`).
    pub fn with_overrides(mut self, cycles: &Groups<Cycles>, per_byte: &Groups<CyclesPerByte>) -> Self {
        for (i, c) in cycles.as_array().iter().enumerate() {
            if let Some(c) = c {
                self.fixed.0[i] = c.cycles;
            }
        }
        for (i, c) in per_byte.as_array().iter().enumerate() {
            if let Some(c) = c {
                self.per_byte.0[i] = c.cycles_per_byte;
            }
        }
        self
    }

    pub fn to_file(&self) -> CostProfileFile {
        let cyc = |a: &GroupCycles| Groups::from_array(a.0.map(|v| Some(Cycles::new(v))));
        let any_per_byte = self.per_byte.0.iter().any(|v| *v != 0.0);
        CostProfileFile {
            profile: ProfileInfo {
                name: Some(self.name.clone()),
                source: if self.source.is_empty() { None } else { Some(self.source.clone()) },
                frequency: None,
                reference_routes: Some(self.reference_routes),
                reference_flows: Some(self.reference_flows),
            },
            cycles: cyc(&self.fixed),
            per_byte: if any_per_byte {
                Groups::from_array(self.per_byte.0.map(|v| Some(CyclesPerByte { cycles_per_byte: v })))
            } else {
                Groups::default()
            },
        }
    }
}

/// Profiles shipped with pktsim: `(name, TOML text)`.
pub const BUNDLED: &[(&str, &str)] = &[
    ("raumer2015-64B", include_str!("../profiles/raumer2015-64B.toml")),
    ("raumer2015-512B", include_str!("../profiles/raumer2015-512B.toml")),
    ("raumer2015-1024B", include_str!("../profiles/raumer2015-1024B.toml")),
    ("raumer2015-1500B", include_str!("../profiles/raumer2015-1500B.toml")),
    ("raumer2015-flows-1", include_str!("../profiles/raumer2015-flows-1.toml")),
    ("raumer2015-flows-256", include_str!("../profiles/raumer2015-flows-256.toml")),
    ("raumer2015-flows-16384", include_str!("../profiles/raumer2015-flows-16384.toml")),
    ("raumer2015-flows-1048576", include_str!("../profiles/raumer2015-flows-1048576.toml")),
];

/// Names of the bundled profiles.
pub fn bundled_names() -> Vec<&'static str> {
    BUNDLED.iter().map(|(n, _)| *n).collect()
}

/// Parse a cost-profile TOML text. `origin` names it in errors.
pub fn parse_profile(text: &str, origin: &str, default_name: &str) -> Result<CostProfile> {
    let file: CostProfileFile = crate::loader::deserialize_toml(text, origin)?;
    let profile = CostProfile::from_file(file, default_name);
    if !(profile.fixed.total() > 0.0) {
        return Err(ConfigError::new(
            origin,
            "cycles",
            None,
            "a profile whose groups add up to more than 0 cycles per packet",
        )
        .into());
    }
    Ok(profile)
}

/// Find a profile by bundled name or by path (relative paths against `base_dir`).
pub fn load_profile(name_or_path: &str, base_dir: &Path, origin: &str, key: &str) -> Result<CostProfile> {
    if let Some((name, text)) = BUNDLED.iter().find(|(n, _)| *n == name_or_path) {
        return parse_profile(text, &format!("<bundled profile {name}>"), name);
    }
    let path = base_dir.join(name_or_path);
    if path.exists() {
        if let Some(why) = crate::input::why_not_regular(&path) {
            return Err(ConfigError::new(
                origin,
                key,
                Some(format!("{name_or_path:?}")),
                format!("a profile file ({why})"),
            )
            .into());
        }
        let text = crate::input::read_text(&path)?;
        let stem = path.file_stem().map(|s| s.to_string_lossy().to_string()).unwrap_or_default();
        return parse_profile(&text, &path.display().to_string(), &stem);
    }
    Err(ConfigError::new(
        origin,
        key,
        Some(format!("{name_or_path:?}")),
        format!("a bundled profile ({}) or a profile file (not found: {})", bundled_names().join(", "), path.display()),
    )
    .into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bundled_profiles_sum_to_000_table_totals() {
        // 000 Table II and IV, last column (C_total). The printed groups add up to the printed
        // totals only within rounding (512 B: 1965 vs 1969), so allow 0.25%.
        let expect = [
            ("raumer2015-64B", 1979.0),
            ("raumer2015-512B", 1969.0),
            ("raumer2015-1024B", 2056.0),
            ("raumer2015-1500B", 2203.0),
            ("raumer2015-flows-1", 1979.0),
            ("raumer2015-flows-256", 2048.0),
            ("raumer2015-flows-16384", 2093.0),
            ("raumer2015-flows-1048576", 2420.0),
        ];
        for (name, total) in expect {
            let p = load_profile(name, Path::new("."), "test", "cost.profile").unwrap();
            assert!((p.fixed.total() - total).abs() / total <= 0.0025, "{name}: {} vs {total}", p.fixed.total());
        }
    }

    #[test]
    fn per_byte_terms_add_linearly_in_size() {
        let mut p = load_profile("raumer2015-64B", Path::new("."), "t", "k").unwrap();
        p.per_byte.set(Group::Rx, 0.5);
        let c64 = p.cycles_for_size(64.0);
        let c1500 = p.cycles_for_size(1500.0);
        assert_eq!(c64.get(Group::Rx), 408.0 + 32.0);
        assert_eq!(c1500.get(Group::Rx) - c64.get(Group::Rx), 0.5 * (1500.0 - 64.0));
        assert_eq!(c1500.get(Group::Tx), c64.get(Group::Tx));
    }

    #[test]
    fn unknown_profile_names_list_the_bundled_ones() {
        let e = load_profile("nope", Path::new("/nonexistent"), "s.toml", "cost.profile").unwrap_err();
        let msg = e.to_string();
        assert!(msg.contains("cost.profile") && msg.contains("raumer2015-64B") && msg.contains("s.toml"), "{msg}");
    }
}
