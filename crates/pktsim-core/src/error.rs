//! Errors a user can see. Each names where the bad input came from (file or origin), the key
//! path inside it, the value, and what was expected — with units.

use std::fmt;

/// Separates value and expectation inside a deserializer message, so that the key path
/// (known only to the caller) can be put between origin and value.
pub(crate) const VALUE_SEP: char = '\u{1f}';

/// Opens and closes a key path inside a deserializer's message: where a type reads its keys
/// itself (a tagged section, `scenario/tagged.rs`), the path of the key inside it, which
/// [`unnest`] joins to the path the message was raised at.
pub(crate) const PATH_SEP: char = '\u{1e}';

/// `message`, raised at `path` inside the value being read.
pub(crate) fn nest(path: &str, message: &str) -> String {
    format!("{PATH_SEP}{path}{PATH_SEP}{message}")
}

/// Stands in a tagged section's message for the section's own path (`host.`), which only
/// [`unnest`] knows: `no \u{1d}batch.t_empty with \u{1d}io = ...` reads `no host.batch.t_empty
/// with host.io = ...`.
pub(crate) const SECTION_MARK: char = '\u{1d}';

/// A deserializer's message with the paths [`nest`]ed in it joined onto `path`, the path
/// the message was raised at (the section's, where [`SECTION_MARK`] stands).
pub(crate) fn unnest(mut path: String, mut message: &str) -> (String, String) {
    let section = if path.is_empty() { String::new() } else { format!("{path}.") };
    while let Some(rest) = message.strip_prefix(PATH_SEP) {
        let Some((inner, after)) = rest.split_once(PATH_SEP) else { break };
        if !inner.is_empty() {
            path = join_path(&path, inner);
        }
        message = after;
    }
    (path, message.replace(SECTION_MARK, &section))
}

/// A rejected scenario, cost profile or command-line value.
#[derive(Debug, Clone, PartialEq)]
pub struct ConfigError {
    /// File name, or a description such as `"<python dict>"` or `"--set"`.
    pub origin: String,
    /// Dotted key path, e.g. `traffic.rate`; empty for whole-file problems.
    pub path: String,
    /// The offending value as written, if there is one.
    pub value: Option<String>,
    /// What would have been accepted (or what is wrong).
    pub expected: String,
    /// Line and column for syntax errors.
    pub position: Option<(usize, usize)>,
}

impl ConfigError {
    pub fn new(
        origin: impl Into<String>,
        path: impl Into<String>,
        value: Option<String>,
        expected: impl Into<String>,
    ) -> Self {
        ConfigError { origin: origin.into(), path: path.into(), value, expected: expected.into(), position: None }
    }

    /// Build from a serde message and a key path, splitting value from expectation where the
    /// message came from one of pktsim's own deserializers.
    pub(crate) fn from_serde(origin: &str, path: String, message: &str) -> Self {
        if let Some((value, expected)) = message.split_once(VALUE_SEP) {
            return ConfigError::new(origin, path, Some(value.to_string()), expected.to_string());
        }
        // serde's own messages: rephrase the common ones so they point at the exact key.
        if let Some(rest) = message.strip_prefix("unknown field `") {
            if let Some((field, tail)) = rest.split_once('`') {
                let known = tail.trim_start_matches(", ").replace("expected one of ", "").replace("expected ", "");
                // serde_path_to_error may or may not have pushed the unknown key already.
                let full = if path == field || path.ends_with(&format!(".{field}")) {
                    path.clone()
                } else {
                    join_path(&path, field)
                };
                let hint = did_you_mean(field, &known).map_or(String::new(), |k| format!(": did you mean `{k}`?"));
                return ConfigError::new(origin, full, None, format!("no such key here{hint} (known keys: {known})"));
            }
        }
        if let Some(rest) = message.strip_prefix("duplicate field `") {
            if let Some((field, _)) = rest.split_once('`') {
                let full = if path == field || path.ends_with(&format!(".{field}")) {
                    path.clone()
                } else {
                    join_path(&path, field)
                };
                return ConfigError::new(origin, full, None, "one value: this key is given twice, under its own name and its Linux name (e.g. budget and netdev_budget); keep one");
            }
        }
        if let Some(rest) = message.strip_prefix("missing field `") {
            if let Some((field, _)) = rest.split_once('`') {
                return ConfigError::new(origin, join_path(&path, field), None, "this key is required but missing");
            }
        }
        if let Some(rest) = message.strip_prefix("unknown variant `") {
            if let Some((variant, tail)) = rest.split_once('`') {
                let known = tail.trim_start_matches(", ").replace("expected one of ", "").replace("expected ", "");
                let hint = did_you_mean(variant, &known).map_or(String::new(), |k| format!(" (did you mean `{k}`?)"));
                return ConfigError::new(origin, path, Some(format!("{variant:?}")), format!("one of {known}{hint}"));
            }
        }
        if let Some(rest) = message.strip_prefix("invalid type: ") {
            if let Some((found, expected)) = rest.split_once(", expected ") {
                return ConfigError::new(origin, path, Some(found.to_string()), in_words(expected));
            }
        }
        if let Some(rest) = message.strip_prefix("invalid value: ") {
            if let Some((found, expected)) = rest.split_once(", expected ") {
                return ConfigError::new(origin, path, Some(found.to_string()), in_words(expected));
            }
        }
        ConfigError::new(origin, path, None, message.to_string())
    }
}

/// serde's name of a Rust type in an expectation ("u32", "a boolean"), in the words of a
/// scenario's user: a whole number and its range.
fn in_words(expected: &str) -> String {
    let range = |lo: &str, hi: &str| format!("a whole number from {lo} to {hi}");
    match expected {
        "u8" => range("0", "255"),
        "u16" => range("0", "65535"),
        "u32" => range("0", "4294967295"),
        "u64" | "usize" => range("0", "18446744073709551615"),
        "i8" => range("-128", "127"),
        "i16" => range("-32768", "32767"),
        "i32" => range("-2147483648", "2147483647"),
        "i64" | "isize" => range("-9223372036854775808", "9223372036854775807"),
        "f32" | "f64" => "a number".to_string(),
        other => other.to_string(),
    }
}

/// The known name (from serde's "`a`, `b`, `c`" list) closest to `given`, if it is close:
/// at most one edit per three letters (case ignored).
fn did_you_mean(given: &str, known: &str) -> Option<String> {
    let given_l = given.to_lowercase();
    known
        .split('`')
        .skip(1)
        .step_by(2)
        .map(|k| (edit_distance(&given_l, &k.to_lowercase()), k))
        .filter(|(d, _)| *d <= (given.chars().count() / 3).max(1))
        .min_by_key(|(d, _)| *d)
        .map(|(_, k)| k.to_string())
}

/// Levenshtein distance between two short names.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let cur = row[j + 1];
            row[j + 1] = (prev + (ca != *cb) as usize).min(row[j] + 1).min(cur + 1);
            prev = cur;
        }
    }
    row[b.len()]
}

pub(crate) fn join_path(parent: &str, key: &str) -> String {
    if parent.is_empty() || parent == "." {
        key.to_string()
    } else {
        format!("{parent}.{key}")
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.origin)?;
        if let Some((line, col)) = self.position {
            write!(f, ":{line}:{col}")?;
        }
        write!(f, ": ")?;
        match (&self.path.is_empty(), &self.value) {
            (false, Some(v)) => write!(f, "{} = {}: expected {}", self.path, v, self.expected),
            (false, None) => write!(f, "{}: {}", self.path, self.expected),
            (true, Some(v)) => write!(f, "{}: expected {}", v, self.expected),
            (true, None) => write!(f, "{}", self.expected),
        }
    }
}

impl std::error::Error for ConfigError {}

/// Every error pktsim-core returns.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{0}")]
    Config(#[from] ConfigError),
    #[error("{path}: {source}")]
    Io { path: String, source: std::io::Error },
    #[error("{0}")]
    Invalid(String),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// The `ConfigError` of a rejected input; panics if it was accepted (for tests of checks).
#[cfg(test)]
pub(crate) fn config_error<T: std::fmt::Debug>(r: Result<T>) -> ConfigError {
    match r {
        Err(Error::Config(e)) => e,
        other => panic!("expected a ConfigError, got {other:?}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_near_miss_gets_a_suggestion_and_a_far_one_does_not() {
        let known = "`rate`, `pattern`, `size`, `flows`, `sources`";
        assert_eq!(did_you_mean("ratee", known).as_deref(), Some("rate"));
        assert_eq!(did_you_mean("Flow", known).as_deref(), Some("flows"));
        assert_eq!(did_you_mean("colour", known), None);
        assert_eq!(edit_distance("kitten", "sitting"), 3);
        let e = ConfigError::from_serde(
            "s.toml",
            "traffic".into(),
            "unknown field `ratee`, expected one of `rate`, `pattern`",
        );
        assert!(e.to_string().contains("traffic.ratee: no such key here: did you mean `rate`?"), "{e}");
        let v = ConfigError::from_serde(
            "s.toml",
            "nic.itr.mode".into(),
            "unknown variant `statc`, expected one of `off`, `static`, `dynamic`",
        );
        assert!(v.to_string().contains("(did you mean `static`?)"), "{v}");
    }
}
