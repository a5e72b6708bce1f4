//! Physical quantities with units, as they appear in scenario files.
//!
//! Every value a user writes carries its unit: `"3.3GHz"`, `"479ns"`, `"1979cycles"`,
//! `"10Gbit/s"`, `"1.5Mpps"`, `"64B"`, `"8MiB"`, `"75%"`. A bare number where a quantity is
//! expected is rejected, and so is a unit of the wrong kind (`"3.3GHz"` for a duration).
//!
//! Internally the engine uses integers where exactness matters (time in picoseconds, sizes
//! in bytes) and `f64` for rates and cycle counts, which are model parameters rather than
//! clocks.

use std::fmt;

use schemars::JsonSchema;
use serde::de::{self, Deserializer, Visitor};
use serde::{Serialize, Serializer};

/// Why a quantity string was rejected. `expected` says what would have been accepted.
#[derive(Debug, Clone, PartialEq)]
pub struct QuantityError {
    pub value: String,
    pub expected: String,
}

impl fmt::Display for QuantityError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}: expected {}", self.value, self.expected)
    }
}

impl std::error::Error for QuantityError {}

/// One unit of a quantity kind: its spellings and its factor to the base unit.
struct Unit {
    names: &'static [&'static str],
    factor: f64,
}

/// Split `"1.5 Mpps"` into the number `1.5` and the unit `"Mpps"`.
///
/// Only plain decimal notation (optionally with an exponent) is accepted; `NaN`, `inf` and
/// hexadecimal are not numbers here.
fn split_number(text: &str) -> Option<(f64, &str)> {
    let s = text.trim();
    let bytes = s.as_bytes();
    let mut i = 0;
    if i < bytes.len() && (bytes[i] == b'+' || bytes[i] == b'-') {
        i += 1;
    }
    let digits_start = i;
    while i < bytes.len() && (bytes[i].is_ascii_digit() || bytes[i] == b'_') {
        i += 1;
    }
    if i < bytes.len() && bytes[i] == b'.' {
        i += 1;
        while i < bytes.len() && bytes[i].is_ascii_digit() {
            i += 1;
        }
    }
    if i == digits_start || (i == digits_start + 1 && bytes[digits_start] == b'.') {
        return None;
    }
    // Exponent, but only when followed by digits (so "1e" is not eaten from "1eB"...).
    if i < bytes.len() && (bytes[i] == b'e' || bytes[i] == b'E') {
        let mut j = i + 1;
        if j < bytes.len() && (bytes[j] == b'+' || bytes[j] == b'-') {
            j += 1;
        }
        let exp_digits = j;
        while j < bytes.len() && bytes[j].is_ascii_digit() {
            j += 1;
        }
        if j > exp_digits {
            i = j;
        }
    }
    let number: f64 = s[..i].replace('_', "").parse().ok()?;
    Some((number, s[i..].trim()))
}

fn parse_with(text: &str, units: &[Unit], expected: &str) -> Result<f64, QuantityError> {
    let err = || QuantityError { value: text.to_string(), expected: expected.to_string() };
    let (number, unit) = split_number(text).ok_or_else(err)?;
    let unit_def = units.iter().find(|u| u.names.contains(&unit)).ok_or_else(err)?;
    let value = number * unit_def.factor;
    if !value.is_finite() {
        return Err(err());
    }
    if value < 0.0 {
        return Err(QuantityError { value: text.to_string(), expected: format!("{expected} (must not be negative)") });
    }
    Ok(value)
}

/// Format `value` (in base units) with the largest unit whose magnitude keeps it >= 1.
fn format_scaled(value: f64, ladder: &[(&str, f64)]) -> String {
    let mut chosen = ladder[0];
    for &(name, factor) in ladder {
        if value.abs() >= factor {
            chosen = (name, factor);
        }
    }
    let scaled = value / chosen.1;
    // Shortest representation that parses back to the same f64.
    format!("{}{}", trim_float(scaled), chosen.0)
}

fn trim_float(x: f64) -> String {
    format!("{x}")
}

macro_rules! quantity_serde {
    ($ty:ident, $expected:expr, $example:expr, $pattern:expr) => {
        quantity_serde!($ty, $expected, $example, $pattern, |x: $ty| Ok::<$ty, QuantityError>(x));
    };
    ($ty:ident, $expected:expr, $example:expr, $pattern:expr, $accept:expr) => {
        impl<'de> serde::Deserialize<'de> for $ty {
            fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                struct V;
                impl<'de> Visitor<'de> for V {
                    type Value = $ty;
                    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                        write!(f, "{}", $expected)
                    }
                    fn visit_str<E: de::Error>(self, v: &str) -> Result<$ty, E> {
                        $ty::parse(v).and_then($accept).map_err(|e| {
                            E::custom(format!("{:?}{}{}", e.value, crate::error::VALUE_SEP, e.expected))
                        })
                    }
                    fn visit_i64<E: de::Error>(self, v: i64) -> Result<$ty, E> {
                        Err(E::custom(format!(
                            "{v}{}{} written as a string with its unit, e.g. {:?} (a bare number has no unit)",
                            crate::error::VALUE_SEP, $expected, $example
                        )))
                    }
                    fn visit_u64<E: de::Error>(self, v: u64) -> Result<$ty, E> {
                        self.visit_i64(v as i64)
                    }
                    fn visit_f64<E: de::Error>(self, v: f64) -> Result<$ty, E> {
                        Err(E::custom(format!(
                            "{v}{}{} written as a string with its unit, e.g. {:?} (a bare number has no unit)",
                            crate::error::VALUE_SEP, $expected, $example
                        )))
                    }
                }
                deserializer.deserialize_any(V)
            }
        }

        impl Serialize for $ty {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(&self.to_string())
            }
        }

        impl JsonSchema for $ty {
            fn schema_name() -> std::borrow::Cow<'static, str> {
                stringify!($ty).into()
            }
            fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
                schemars::json_schema!({
                    "type": "string",
                    "description": format!("{}, e.g. {:?}", $expected, $example),
                    "pattern": $pattern,
                    "examples": [$example],
                })
            }
        }

        impl std::str::FromStr for $ty {
            type Err = QuantityError;
            fn from_str(s: &str) -> Result<Self, Self::Err> {
                $ty::parse(s)
            }
        }
    };
}

// ---------------------------------------------------------------------------------------
// Duration (integer picoseconds)

/// A span of time, held as an integer number of picoseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Duration {
    pub ps: u64,
}

const DURATION_UNITS: &[Unit] = &[
    Unit { names: &["ps"], factor: 1.0 },
    Unit { names: &["ns"], factor: 1e3 },
    Unit { names: &["us", "µs", "μs"], factor: 1e6 },
    Unit { names: &["ms"], factor: 1e9 },
    Unit { names: &["s"], factor: 1e12 },
];

impl Duration {
    pub const EXPECTED: &'static str = "a duration in ps, ns, us, ms or s";

    pub const fn from_ps(ps: u64) -> Self {
        Duration { ps }
    }
    pub fn from_ns(ns: f64) -> Self {
        Duration { ps: (ns * 1e3).round() as u64 }
    }
    pub fn parse(text: &str) -> Result<Self, QuantityError> {
        let ps = parse_with(text, DURATION_UNITS, Self::EXPECTED)?;
        if ps > u64::MAX as f64 / 2.0 {
            return Err(QuantityError {
                value: text.into(),
                expected: format!("{} (at most about 106 days)", Self::EXPECTED),
            });
        }
        Ok(Duration { ps: ps.round() as u64 })
    }
    /// No time at all (serde's skip test for keys whose default is "0ns").
    pub fn is_zero(&self) -> bool {
        self.ps == 0
    }
    pub fn as_ns(self) -> f64 {
        self.ps as f64 / 1e3
    }
    pub fn as_secs(self) -> f64 {
        self.ps as f64 / 1e12
    }
}

impl fmt::Display for Duration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ps = self.ps;
        // Integer formatting: pick the largest unit that divides exactly, so that the
        // string parses back to the same integer.
        for (name, factor) in [("s", 1_000_000_000_000u64), ("ms", 1_000_000_000), ("us", 1_000_000), ("ns", 1_000)] {
            if ps >= factor && ps.is_multiple_of(factor) {
                return write!(f, "{}{}", ps / factor, name);
            }
        }
        if ps >= 1_000 {
            return write!(f, "{}ns", trim_float(ps as f64 / 1e3));
        }
        write!(f, "{ps}ps")
    }
}

quantity_serde!(
    Duration,
    Duration::EXPECTED,
    "479ns",
    "^\\s*\\+?[0-9_]*\\.?[0-9]+([eE][+-]?[0-9]+)?\\s*(ps|ns|us|µs|μs|ms|s)\\s*$",
    Duration::within_a_step
);

/// The longest single cost or delay a scenario may give (10 s): every time the simulator
/// adds up then fits its integer picoseconds (see `scenario/limits.rs`).
pub const MAX_STEP_PS: u64 = 10 * 1_000_000_000_000;

impl Duration {
    /// A cost or delay the simulator takes as one step: at most [`MAX_STEP_PS`]. Every
    /// `Duration` key of the scenario format is one; a run's length and a trace's window are
    /// [`TimeSpan`]s.
    pub fn within_a_step(self) -> Result<Self, QuantityError> {
        if self.ps > MAX_STEP_PS {
            return Err(QuantityError {
                value: self.to_string(),
                expected: "at most 10s (the longest single cost or delay the simulator takes)".into(),
            });
        }
        Ok(self)
    }
}

/// A stretch of time with no bound of one step: a run's warm-up and length, the interval of
/// its time series, a trace's window (held as integer picoseconds, written as a
/// [`Duration`] is).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct TimeSpan {
    pub ps: u64,
}

impl TimeSpan {
    pub const EXPECTED: &'static str = Duration::EXPECTED;

    pub const fn from_ps(ps: u64) -> Self {
        TimeSpan { ps }
    }
    pub fn parse(text: &str) -> Result<Self, QuantityError> {
        Duration::parse(text).map(|d| TimeSpan { ps: d.ps })
    }
    pub fn as_secs(self) -> f64 {
        self.ps as f64 / 1e12
    }
}

impl fmt::Display for TimeSpan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        Duration::from_ps(self.ps).fmt(f)
    }
}

impl From<TimeSpan> for Duration {
    fn from(t: TimeSpan) -> Duration {
        Duration::from_ps(t.ps)
    }
}

quantity_serde!(
    TimeSpan,
    TimeSpan::EXPECTED,
    "10ms",
    "^\\s*\\+?[0-9_]*\\.?[0-9]+([eE][+-]?[0-9]+)?\\s*(ps|ns|us|µs|μs|ms|s)\\s*$"
);

// ---------------------------------------------------------------------------------------
// Frequency

/// A clock frequency in hertz.
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd, Default)]
pub struct Frequency {
    pub hz: f64,
}

const FREQUENCY_UNITS: &[Unit] = &[
    Unit { names: &["Hz"], factor: 1.0 },
    Unit { names: &["kHz"], factor: 1e3 },
    Unit { names: &["MHz"], factor: 1e6 },
    Unit { names: &["GHz"], factor: 1e9 },
];

impl Frequency {
    pub const EXPECTED: &'static str = "a frequency in Hz, kHz, MHz or GHz";
    pub fn from_hz(hz: f64) -> Self {
        Frequency { hz }
    }
    pub fn parse(text: &str) -> Result<Self, QuantityError> {
        Ok(Frequency { hz: parse_with(text, FREQUENCY_UNITS, Self::EXPECTED)? })
    }
}

impl fmt::Display for Frequency {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&format_scaled(self.hz, &[("Hz", 1.0), ("kHz", 1e3), ("MHz", 1e6), ("GHz", 1e9)]))
    }
}

quantity_serde!(
    Frequency,
    Frequency::EXPECTED,
    "3.3GHz",
    "^\\s*\\+?[0-9_]*\\.?[0-9]+([eE][+-]?[0-9]+)?\\s*(Hz|kHz|MHz|GHz)\\s*$"
);

// ---------------------------------------------------------------------------------------
// Bit rate

/// A bit rate in bits per second.
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd, Default)]
pub struct BitRate {
    pub bps: f64,
}

const BITRATE_UNITS: &[Unit] = &[
    Unit { names: &["bit/s", "b/s", "bps"], factor: 1.0 },
    Unit { names: &["kbit/s", "kb/s", "kbps"], factor: 1e3 },
    Unit { names: &["Mbit/s", "Mb/s", "Mbps"], factor: 1e6 },
    Unit { names: &["Gbit/s", "Gb/s", "Gbps"], factor: 1e9 },
    Unit { names: &["Tbit/s", "Tb/s", "Tbps"], factor: 1e12 },
];

impl BitRate {
    pub const EXPECTED: &'static str = "a bit rate in bit/s, kbit/s, Mbit/s, Gbit/s or Tbit/s";
    pub fn from_bps(bps: f64) -> Self {
        BitRate { bps }
    }
    pub fn parse(text: &str) -> Result<Self, QuantityError> {
        Ok(BitRate { bps: parse_with(text, BITRATE_UNITS, Self::EXPECTED)? })
    }
}

impl fmt::Display for BitRate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&format_scaled(
            self.bps,
            &[("bit/s", 1.0), ("kbit/s", 1e3), ("Mbit/s", 1e6), ("Gbit/s", 1e9), ("Tbit/s", 1e12)],
        ))
    }
}

quantity_serde!(BitRate, BitRate::EXPECTED, "10Gbit/s", "^\\s*\\+?[0-9_]*\\.?[0-9]+([eE][+-]?[0-9]+)?\\s*(bit/s|b/s|bps|kbit/s|kb/s|kbps|Mbit/s|Mb/s|Mbps|Gbit/s|Gb/s|Gbps|Tbit/s|Tb/s|Tbps)\\s*$");

// ---------------------------------------------------------------------------------------
// Packet rate

/// A packet rate in packets per second.
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd, Default)]
pub struct PacketRate {
    pub pps: f64,
}

const PACKETRATE_UNITS: &[Unit] = &[
    Unit { names: &["pps"], factor: 1.0 },
    Unit { names: &["kpps"], factor: 1e3 },
    Unit { names: &["Mpps"], factor: 1e6 },
    Unit { names: &["Gpps"], factor: 1e9 },
];

impl PacketRate {
    pub const EXPECTED: &'static str = "a packet rate in pps, kpps, Mpps or Gpps";
    pub fn from_pps(pps: f64) -> Self {
        PacketRate { pps }
    }
    pub fn parse(text: &str) -> Result<Self, QuantityError> {
        Ok(PacketRate { pps: parse_with(text, PACKETRATE_UNITS, Self::EXPECTED)? })
    }
}

impl fmt::Display for PacketRate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&format_scaled(self.pps, &[("pps", 1.0), ("kpps", 1e3), ("Mpps", 1e6), ("Gpps", 1e9)]))
    }
}

quantity_serde!(
    PacketRate,
    PacketRate::EXPECTED,
    "1.5Mpps",
    "^\\s*\\+?[0-9_]*\\.?[0-9]+([eE][+-]?[0-9]+)?\\s*(pps|kpps|Mpps|Gpps)\\s*$"
);

// ---------------------------------------------------------------------------------------
// Size in bytes

/// A size in bytes (integer). Binary (KiB, MiB, GiB) and decimal (kB, MB, GB) prefixes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Bytes {
    pub bytes: u64,
}

const BYTES_UNITS: &[Unit] = &[
    Unit { names: &["B"], factor: 1.0 },
    Unit { names: &["KiB"], factor: 1024.0 },
    Unit { names: &["MiB"], factor: 1024.0 * 1024.0 },
    Unit { names: &["GiB"], factor: 1024.0 * 1024.0 * 1024.0 },
    Unit { names: &["kB"], factor: 1e3 },
    Unit { names: &["MB"], factor: 1e6 },
    Unit { names: &["GB"], factor: 1e9 },
];

impl Bytes {
    pub const EXPECTED: &'static str = "a size in B, KiB, MiB, GiB, kB, MB or GB";
    pub const fn new(bytes: u64) -> Self {
        Bytes { bytes }
    }
    pub fn parse(text: &str) -> Result<Self, QuantityError> {
        let b = parse_with(text, BYTES_UNITS, Self::EXPECTED)?;
        if b.fract() != 0.0 {
            return Err(QuantityError {
                value: text.into(),
                expected: format!("{} that is a whole number of bytes", Self::EXPECTED),
            });
        }
        Ok(Bytes { bytes: b as u64 })
    }
}

impl fmt::Display for Bytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = self.bytes;
        for (name, factor) in [("GiB", 1u64 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)] {
            if b >= factor && b.is_multiple_of(factor) {
                return write!(f, "{}{}", b / factor, name);
            }
        }
        write!(f, "{b}B")
    }
}

quantity_serde!(
    Bytes,
    Bytes::EXPECTED,
    "64B",
    "^\\s*\\+?[0-9_]*\\.?[0-9]+([eE][+-]?[0-9]+)?\\s*(B|KiB|MiB|GiB|kB|MB|GB)\\s*$"
);

// ---------------------------------------------------------------------------------------
// CPU cycles

/// A number of CPU cycles (a cost, not a clock: fractional values are allowed).
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd, Default)]
pub struct Cycles {
    pub cycles: f64,
}

const CYCLES_UNITS: &[Unit] =
    &[Unit { names: &["cycles", "cycle", "cyc"], factor: 1.0 }, Unit { names: &["kcycles"], factor: 1e3 }];

impl Cycles {
    pub const EXPECTED: &'static str = "a number of CPU cycles, e.g. \"1979cycles\"";
    pub fn new(cycles: f64) -> Self {
        Cycles { cycles }
    }
    pub fn parse(text: &str) -> Result<Self, QuantityError> {
        Ok(Cycles { cycles: parse_with(text, CYCLES_UNITS, Self::EXPECTED)? })
    }
}

impl fmt::Display for Cycles {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}cycles", trim_float(self.cycles))
    }
}

quantity_serde!(
    Cycles,
    "a number of CPU cycles",
    "1979cycles",
    "^\\s*\\+?[0-9_]*\\.?[0-9]+([eE][+-]?[0-9]+)?\\s*(cycles|cycle|cyc|kcycles)\\s*$"
);

// ---------------------------------------------------------------------------------------
// CPU cycles per byte

/// A per-byte cost in CPU cycles per byte of packet.
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd, Default)]
pub struct CyclesPerByte {
    pub cycles_per_byte: f64,
}

const CPB_UNITS: &[Unit] = &[Unit { names: &["cycles/B", "cycle/B", "cyc/B"], factor: 1.0 }];

impl CyclesPerByte {
    pub const EXPECTED: &'static str = "a per-byte cost in cycles/B, e.g. \"0.025cycles/B\"";
    pub fn parse(text: &str) -> Result<Self, QuantityError> {
        Ok(CyclesPerByte { cycles_per_byte: parse_with(text, CPB_UNITS, Self::EXPECTED)? })
    }
}

impl fmt::Display for CyclesPerByte {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}cycles/B", trim_float(self.cycles_per_byte))
    }
}

quantity_serde!(
    CyclesPerByte,
    "a per-byte cost in cycles/B",
    "0.025cycles/B",
    "^\\s*\\+?[0-9_]*\\.?[0-9]+([eE][+-]?[0-9]+)?\\s*(cycles/B|cycle/B|cyc/B)\\s*$"
);

// ---------------------------------------------------------------------------------------
// Time per byte

/// A per-byte processing time, held in femtoseconds per byte (integer: exact sums).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct TimePerByte {
    pub fs_per_byte: u64,
}

const TPB_UNITS: &[Unit] = &[
    Unit { names: &["ps/B"], factor: 1e3 },
    Unit { names: &["ns/B"], factor: 1e6 },
    Unit { names: &["us/B", "µs/B"], factor: 1e9 },
];

impl TimePerByte {
    pub const EXPECTED: &'static str = "a time per byte in ps/B, ns/B or us/B, e.g. \"2ns/B\"";
    pub fn parse(text: &str) -> Result<Self, QuantityError> {
        Ok(TimePerByte { fs_per_byte: parse_with(text, TPB_UNITS, Self::EXPECTED)?.round() as u64 })
    }
}

impl fmt::Display for TimePerByte {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}ps/B", trim_float(self.fs_per_byte as f64 / 1e3))
    }
}

quantity_serde!(
    TimePerByte,
    "a time per byte",
    "2ns/B",
    "^\\s*\\+?[0-9_]*\\.?[0-9]+([eE][+-]?[0-9]+)?\\s*(ps/B|ns/B|us/B|µs/B)\\s*$"
);

// ---------------------------------------------------------------------------------------
// Fractions written as percentages

/// A fraction written as a percentage: `"75%"` is 0.75.
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd, Default)]
pub struct Percent {
    pub fraction: f64,
}

const PERCENT_UNITS: &[Unit] = &[Unit { names: &["%"], factor: 0.01 }];

impl Percent {
    pub const EXPECTED: &'static str = "a percentage, e.g. \"75%\"";
    pub fn parse(text: &str) -> Result<Self, QuantityError> {
        Ok(Percent { fraction: parse_with(text, PERCENT_UNITS, Self::EXPECTED)? })
    }
}

impl fmt::Display for Percent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}%", trim_float(self.fraction * 100.0))
    }
}

quantity_serde!(Percent, "a percentage", "75%", "^\\s*\\+?[0-9_]*\\.?[0-9]+([eE][+-]?[0-9]+)?\\s*%\\s*$");

// ---------------------------------------------------------------------------------------
// An offered traffic rate: packets per second, bits per second, or a share of the line rate.

/// How the offered rate of traffic is given. Bit rates count the bits of the Ethernet frame
/// (FCS included, preamble and inter-frame gap excluded), as packet generators report them;
/// a percentage is a share of the link's line rate for the traffic's frame sizes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum OfferedRate {
    Packets(PacketRate),
    Bits(BitRate),
    LineShare(Percent),
}

impl OfferedRate {
    pub const EXPECTED: &'static str =
        "an offered rate in packets per second (\"1.5Mpps\"), in frame bits per second (\"5Gbit/s\") or as a share of the line rate (\"80%\")";

    pub fn parse(text: &str) -> Result<Self, QuantityError> {
        if let Ok(p) = PacketRate::parse(text) {
            return Ok(OfferedRate::Packets(p));
        }
        if let Ok(b) = BitRate::parse(text) {
            return Ok(OfferedRate::Bits(b));
        }
        if let Ok(p) = Percent::parse(text) {
            return Ok(OfferedRate::LineShare(p));
        }
        // A negative value is reported as such rather than as an unknown unit.
        for e in [PacketRate::parse(text).err(), BitRate::parse(text).err(), Percent::parse(text).err()]
            .into_iter()
            .flatten()
        {
            if e.expected.contains("negative") {
                return Err(QuantityError {
                    value: text.into(),
                    expected: format!("{} (must not be negative)", Self::EXPECTED),
                });
            }
        }
        Err(QuantityError { value: text.into(), expected: Self::EXPECTED.into() })
    }

    /// Packets per second for frames of `mean_frame_bytes`, given the line rate in pps.
    pub fn to_pps(self, mean_frame_bytes: f64, line_rate_pps: f64) -> f64 {
        match self {
            OfferedRate::Packets(p) => p.pps,
            OfferedRate::Bits(b) => b.bps / (8.0 * mean_frame_bytes),
            OfferedRate::LineShare(s) => s.fraction * line_rate_pps,
        }
    }
}

impl fmt::Display for OfferedRate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OfferedRate::Packets(p) => p.fmt(f),
            OfferedRate::Bits(b) => b.fmt(f),
            OfferedRate::LineShare(s) => s.fmt(f),
        }
    }
}

quantity_serde!(OfferedRate, OfferedRate::EXPECTED, "1.5Mpps", "^\\s*\\+?[0-9_]*\\.?[0-9]+([eE][+-]?[0-9]+)?\\s*(pps|kpps|Mpps|Gpps|bit/s|kbit/s|Mbit/s|Gbit/s|Tbit/s|b/s|kb/s|Mb/s|Gb/s|Tb/s|bps|kbps|Mbps|Gbps|Tbps|%)\\s*$");

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_to_integer_picoseconds() {
        assert_eq!(Duration::parse("479ns").unwrap().ps, 479_000);
        assert_eq!(Duration::parse("2.048us").unwrap().ps, 2_048_000);
        assert_eq!(Duration::parse("2.048µs").unwrap().ps, 2_048_000);
        assert_eq!(Duration::parse("2 ms").unwrap().ps, 2_000_000_000);
        assert_eq!(Duration::parse("7521ns").unwrap().ps, 7_521_000);
        assert_eq!(Duration::parse("1s").unwrap().ps, 1_000_000_000_000);
        assert_eq!(Duration::parse("1e3ns").unwrap().ps, 1_000_000);
    }

    #[test]
    fn every_kind_round_trips_through_its_display() {
        for s in ["479ns", "2.048us", "85ns", "7521ns", "1ps", "3s", "1.5ps"] {
            let d = Duration::parse(s).unwrap();
            assert_eq!(Duration::parse(&d.to_string()).unwrap(), d, "{s}");
        }
        for s in ["3.3GHz", "2.4GHz", "800MHz", "1Hz"] {
            let x = Frequency::parse(s).unwrap();
            assert_eq!(Frequency::parse(&x.to_string()).unwrap(), x, "{s}");
        }
        for s in ["10Gbit/s", "1Gbit/s", "40Gbit/s", "100Mbit/s", "2.5Gbps"] {
            let x = BitRate::parse(s).unwrap();
            assert_eq!(BitRate::parse(&x.to_string()).unwrap(), x, "{s}");
        }
        for s in ["1.5Mpps", "14.88Mpps", "446kpps", "0.05Mpps", "1pps"] {
            let x = PacketRate::parse(s).unwrap();
            assert_eq!(PacketRate::parse(&x.to_string()).unwrap(), x, "{s}");
        }
        for s in ["64B", "8MiB", "32KiB", "1500B", "1GiB", "1kB"] {
            let x = Bytes::parse(s).unwrap();
            assert_eq!(Bytes::parse(&x.to_string()).unwrap(), x, "{s}");
        }
        for s in ["1979cycles", "47.25cycles", "0cycles"] {
            let x = Cycles::parse(s).unwrap();
            assert_eq!(Cycles::parse(&x.to_string()).unwrap(), x, "{s}");
        }
        for s in ["75%", "100%", "0.5%"] {
            let x = Percent::parse(s).unwrap();
            assert_eq!(Percent::parse(&x.to_string()).unwrap(), x, "{s}");
        }
    }

    #[test]
    fn values_are_scaled_by_their_prefix() {
        assert_eq!(Frequency::parse("3.3GHz").unwrap().hz, 3.3e9);
        assert_eq!(BitRate::parse("10Gbit/s").unwrap().bps, 1e10);
        assert_eq!(PacketRate::parse("1.5Mpps").unwrap().pps, 1.5e6);
        assert_eq!(Bytes::parse("8MiB").unwrap().bytes, 8 << 20);
        assert_eq!(Bytes::parse("1kB").unwrap().bytes, 1000);
        assert_eq!(Cycles::parse("1979cycles").unwrap().cycles, 1979.0);
        assert_eq!(CyclesPerByte::parse("0.025cycles/B").unwrap().cycles_per_byte, 0.025);
        assert_eq!(Percent::parse("75%").unwrap().fraction, 0.75);
    }

    #[test]
    fn bare_numbers_wrong_units_and_junk_are_rejected() {
        for s in ["", "479", "ns", "479 nsec", "3.3GHz", "NaN ns", "inf ns", "0x10ns", "1.2.3ns", "--1ns"] {
            assert!(Duration::parse(s).is_err(), "{s:?} should not be a duration");
        }
        assert!(Frequency::parse("3.3Ghz").is_err());
        assert!(Frequency::parse("479ns").is_err());
        assert!(Bytes::parse("1.5B").is_err());
        assert!(Bytes::parse("64b").is_err(), "lower-case b means bits, not bytes");
        assert!(PacketRate::parse("1.5Gbit/s").is_err());
    }

    #[test]
    fn negative_values_say_so() {
        let e = Duration::parse("-5ns").unwrap_err();
        assert!(e.expected.contains("negative"), "{e}");
        let e = OfferedRate::parse("-1Mpps").unwrap_err();
        assert!(e.expected.contains("negative"), "{e}");
    }

    #[test]
    fn offered_rate_accepts_packets_bits_and_line_share() {
        assert_eq!(OfferedRate::parse("1.5Mpps").unwrap(), OfferedRate::Packets(PacketRate::from_pps(1.5e6)));
        let bits = OfferedRate::parse("5Gbit/s").unwrap();
        // 5 Gbit/s of 64 B frames (frame bits) = 9.765625 Mpps.
        assert!((bits.to_pps(64.0, 14.88e6) - 9_765_625.0).abs() < 1e-6);
        let share = OfferedRate::parse("50%").unwrap();
        assert!((share.to_pps(64.0, 14.88e6) - 7.44e6).abs() < 1e-6);
        assert!(OfferedRate::parse("5GHz").is_err());
    }
}
