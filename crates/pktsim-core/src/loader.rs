//! Reading configuration text: TOML and JSON into TOML tables, tables into serde types with
//! every error naming its key path, and the `--set key=value` overrides.
//!
//! The loader knows nothing of what a scenario or a cost profile contains; [`crate::scenario`]
//! and [`crate::cost`] both read their files through it.

use serde::de::{DeserializeOwned, Deserializer};

use crate::error::{join_path, ConfigError, Error, Result};

// ---------------------------------------------------------------------------------------
// Deserialization with key paths

fn path_string(path: &serde_path_to_error::Path) -> String {
    let s = path.to_string();
    if s == "." {
        String::new()
    } else {
        s
    }
}

/// Deserialize any serde value tree, reporting errors by key path.
pub fn deserialize_value<'de, T: DeserializeOwned, D>(deserializer: D, origin: &str) -> Result<T>
where
    D: Deserializer<'de>,
    D::Error: std::fmt::Display,
{
    serde_path_to_error::deserialize(deserializer).map_err(|e| {
        // toml's messages end with its own "in `key`" context; the path already says it.
        let message = e.inner().to_string();
        let message = message.split("\nin `").next().unwrap_or_default().trim();
        // (A tagged section's message carries the key path inside it.)
        let (path, message) = crate::error::unnest(path_string(e.path()), message);
        Error::Config(ConfigError::from_serde(origin, path, &message))
    })
}

/// Parse TOML text into a table, with line and column on syntax errors.
pub fn parse_toml_table(text: &str, origin: &str) -> Result<toml::Table> {
    text.parse::<toml::Table>().map_err(|e| {
        let position = e.span().map(|span| line_col(text, span.start));
        let message = e.message().trim();
        // A duplicate key (or table): named, from the text the error points at.
        let named = match e.span() {
            Some(span) if message.starts_with("duplicate key") || message.contains("duplicate") => {
                let at = text.get(span.clone()).unwrap_or("").trim();
                let key = at.split(['=', '\n']).next().unwrap_or("").trim().trim_matches(['[', ']']).trim();
                if key.is_empty() {
                    String::new()
                } else {
                    format!(": `{key}` is given twice; keep one")
                }
            }
            _ => String::new(),
        };
        Error::Config(ConfigError {
            origin: origin.to_string(),
            path: String::new(),
            value: None,
            expected: format!("valid TOML ({message}{named})"),
            position,
        })
    })
}

fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..offset.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, col)
}

/// Parse and deserialize TOML text.
pub fn deserialize_toml<T: DeserializeOwned>(text: &str, origin: &str) -> Result<T> {
    let table = parse_toml_table(text, origin)?;
    deserialize_value(toml::Value::Table(table), origin)
}

/// Parse JSON text (what Python sends) into a TOML table, with line and column on syntax
/// errors. Going through TOML lets `--set` and the TOML path share one code path; JSON null
/// has no TOML form and is rejected with its key.
pub fn parse_json_table(text: &str, origin: &str) -> Result<toml::Table> {
    let value: serde_json::Value = serde_json::from_str(text).map_err(|e| {
        Error::Config(ConfigError {
            origin: origin.into(),
            path: String::new(),
            value: None,
            expected: format!("valid JSON ({e})"),
            position: Some((e.line(), e.column())),
        })
    })?;
    match json_to_toml(&value, origin, "")? {
        toml::Value::Table(t) => Ok(t),
        _ => Err(ConfigError::new(origin, "", None, "a table (a dict) at the top level").into()),
    }
}

fn json_to_toml(v: &serde_json::Value, origin: &str, path: &str) -> Result<toml::Value> {
    use serde_json::Value as J;
    Ok(match v {
        J::Null => {
            return Err(ConfigError::new(
                origin,
                path,
                Some("null".into()),
                "a value (leave the key out instead of null)",
            )
            .into())
        }
        J::Bool(b) => toml::Value::Boolean(*b),
        J::Number(n) => {
            if let Some(i) = n.as_i64() {
                toml::Value::Integer(i)
            } else if let Some(u) = n.as_u64() {
                // Larger than i64: keep as float so it is rejected with a key path later.
                toml::Value::Float(u as f64)
            } else {
                toml::Value::Float(n.as_f64().unwrap_or(f64::NAN))
            }
        }
        J::String(s) => toml::Value::String(s.clone()),
        J::Array(a) => toml::Value::Array(
            a.iter()
                .enumerate()
                .map(|(i, x)| json_to_toml(x, origin, &format!("{path}[{i}]")))
                .collect::<Result<_>>()?,
        ),
        J::Object(m) => {
            let mut t = toml::Table::new();
            for (k, x) in m {
                t.insert(k.clone(), json_to_toml(x, origin, &join_path(path, k))?);
            }
            toml::Value::Table(t)
        }
    })
}

// ---------------------------------------------------------------------------------------
// --set overrides

/// Parse the value of a `--set key=value`: a TOML value if it is one (`5`, `true`,
/// `"x"`, `[1, 2]`), otherwise the text itself as a string (`1.2Mpps`).
pub fn parse_set_value(text: &str) -> toml::Value {
    let snippet = format!("v = {text}");
    if let Ok(t) = snippet.parse::<toml::Table>() {
        if let Some(v) = t.get("v") {
            return v.clone();
        }
    }
    toml::Value::String(text.to_string())
}

/// Apply `key.path=value` overrides to a TOML table, creating tables as needed.
pub fn apply_sets(table: &mut toml::Table, sets: &[(String, String)]) -> Result<()> {
    let mut root = toml::Value::Table(std::mem::take(table));
    let result = sets.iter().try_for_each(|(key, value)| set_one(&mut root, key, value));
    if let toml::Value::Table(t) = root {
        *table = t;
    }
    result
}

/// Keys of one table that exclude each other: a `--set` of one replaces the other the file
/// gives (`--set cpu.idle.states=[...]` on a file with `cpu.idle.table`), as any set
/// replaces the value it sets. (Table path, key, the key it replaces.)
const REPLACES: &[(&str, &str, &str)] = &[("cpu.idle", "states", "table"), ("cpu.idle", "table", "states")];

/// Set one dotted key, walking tables by name and arrays by index
/// (`traffic.sources.0.share`, or as error messages write it, `traffic.sources[0].share`).
fn set_one(root: &mut toml::Value, key: &str, value: &str) -> Result<()> {
    let dotted = dotted(key);
    let parts: Vec<&str> = dotted.split('.').collect();
    if key.is_empty() || parts.iter().any(|p| p.is_empty()) {
        return Err(
            ConfigError::new("--set", key, Some(value.to_string()), "a dotted key path such as traffic.rate").into()
        );
    }
    let mut cur = root;
    for (i, part) in parts.iter().enumerate() {
        let last = i + 1 == parts.len();
        cur = match cur {
            toml::Value::Table(t) => {
                if last {
                    let table_path = parts[..i].join(".");
                    for (at, k, other) in REPLACES {
                        let here = table_path == *at || table_path.ends_with(&format!(".{at}"));
                        if here && part == k {
                            t.remove(*other);
                        }
                    }
                    t.insert(part.to_string(), parse_set_value(value));
                    return Ok(());
                }
                t.entry(part.to_string()).or_insert_with(|| toml::Value::Table(toml::Table::new()))
            }
            toml::Value::Array(a) => {
                let n = a.len();
                let Some(idx) = part.parse::<usize>().ok().filter(|&j| j < n) else {
                    return Err(ConfigError::new(
                        "--set",
                        parts[..=i].join("."),
                        Some(value.to_string()),
                        format!("an index from 0 to {} into this list", n.saturating_sub(1)),
                    )
                    .into());
                };
                if last {
                    a[idx] = parse_set_value(value);
                    return Ok(());
                }
                &mut a[idx]
            }
            _ => {
                return Err(ConfigError::new(
                    "--set",
                    parts[..i].join("."),
                    Some(value.to_string()),
                    format!("a table to hold {key}, but it is a plain value"),
                )
                .into())
            }
        };
    }
    Ok(())
}

/// A key path with its list indices written as dots (`traffic.sources[0].cv` ->
/// `traffic.sources.0.cv`).
pub fn dotted(key: &str) -> String {
    key.replace('[', ".").replace(']', "")
}

/// The keys `sets` give, as a table of their own (which keys an override gives, see
/// [`gives`]; a set that cannot be applied to an empty table is left out).
pub fn sets_table(sets: &[(String, String)]) -> toml::Table {
    let mut t = toml::Table::new();
    for set in sets {
        let _ = apply_sets(&mut t, std::slice::from_ref(set));
    }
    t
}

/// Whether `table` gives the dotted `key` (a value, or a table holding some of its keys).
pub fn gives(table: &toml::Table, key: &str) -> bool {
    let mut cur = table;
    let mut parts = key.split('.').peekable();
    while let Some(part) = parts.next() {
        match cur.get(part) {
            None => return false,
            Some(toml::Value::Table(t)) if parts.peek().is_some() => cur = t,
            Some(_) => return true,
        }
    }
    true
}

/// Split `key=value` strings.
pub fn split_sets(sets: &[String]) -> Result<Vec<(String, String)>> {
    sets.iter()
        .map(|s| match s.split_once('=') {
            Some((k, v)) => Ok((k.trim().to_string(), v.trim().to_string())),
            None => Err(ConfigError::new("--set", s.clone(), None, "key=value, e.g. traffic.rate=1.2Mpps").into()),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::config_error;

    const TEXT: &str = "[nic]\nqueues = [\"hi\", \"lo\"]\n[traffic]\nrate = \"1Mpps\"\n[[traffic.sources]]\nshare = \"30%\"\n[[traffic.sources]]\nshare = \"70%\"\n";

    fn sets(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn set_walks_arrays_by_index() {
        let mut t = parse_toml_table(TEXT, "t.toml").unwrap();
        apply_sets(&mut t, &sets(&[("traffic.sources.1.share", "60%"), ("traffic.sources.0.flows", "4")])).unwrap();
        let sources = t["traffic"]["sources"].as_array().unwrap();
        assert_eq!(sources[1]["share"].as_str(), Some("60%"));
        assert_eq!(sources[0]["flows"].as_integer(), Some(4));
        assert_eq!(sources[0]["share"].as_str(), Some("30%"));
        // The last part may index the list itself.
        apply_sets(&mut t, &sets(&[("nic.queues.1", "bulk")])).unwrap();
        assert_eq!(t["nic"]["queues"], toml::Value::Array(vec!["hi".into(), "bulk".into()]));
        // An index may be written as error messages write it.
        apply_sets(&mut t, &sets(&[("traffic.sources[1].flows", "9"), ("nic.queues[0]", "rt")])).unwrap();
        assert_eq!(t["traffic"]["sources"][1]["flows"].as_integer(), Some(9));
        assert_eq!(t["nic"]["queues"][0].as_str(), Some("rt"));
    }

    #[test]
    fn set_rejects_an_index_past_the_end() {
        let mut t = parse_toml_table(TEXT, "t.toml").unwrap();
        let e = config_error(apply_sets(&mut t, &sets(&[("traffic.sources.2.share", "60%")])));
        assert_eq!((e.origin.as_str(), e.path.as_str()), ("--set", "traffic.sources.2"));
        assert_eq!(e.expected, "an index from 0 to 1 into this list");
    }

    #[test]
    fn set_into_a_plain_value_names_the_key() {
        let mut t = parse_toml_table(TEXT, "t.toml").unwrap();
        let e = config_error(apply_sets(&mut t, &sets(&[("traffic.rate.x", "1")])));
        assert_eq!(
            e.to_string(),
            "--set: traffic.rate = 1: expected a table to hold traffic.rate.x, but it is a plain value"
        );
        // The table is left as it was.
        assert_eq!(t["traffic"]["rate"].as_str(), Some("1Mpps"));
    }

    #[test]
    fn a_set_of_one_of_two_exclusive_keys_replaces_the_other() {
        let mut t: toml::Table = "[cpu.idle]\ntable = \"kvm-haltpoll\"\ngovernor = \"haltpoll\"".parse().unwrap();
        apply_sets(
            &mut t,
            &[("cpu.idle.states".into(), "[{name = \"POLL\", latency = \"0ns\", residency = \"0ns\"}]".into())],
        )
        .unwrap();
        let idle = t["cpu"]["idle"].as_table().unwrap();
        assert!(idle.get("table").is_none() && idle.get("states").is_some() && idle.get("governor").is_some());
        apply_sets(&mut t, &[("cpu.idle.table".into(), "poll".into())]).unwrap();
        let idle = t["cpu"]["idle"].as_table().unwrap();
        assert!(idle.get("states").is_none() && idle["table"].as_str() == Some("poll"));
        // Another table's `states` is left alone.
        let mut u: toml::Table = "[x]\ntable = 1".parse().unwrap();
        apply_sets(&mut u, &[("x.states".into(), "2".into())]).unwrap();
        assert!(u["x"].get("table").is_some());
    }

    #[test]
    fn set_values_are_toml_or_else_text() {
        assert_eq!(parse_set_value("5"), toml::Value::Integer(5));
        assert_eq!(parse_set_value("\"x\""), toml::Value::String("x".into()));
        assert_eq!(parse_set_value("1.2Mpps"), toml::Value::String("1.2Mpps".into()));
        assert!(split_sets(&["traffic.rate".into()]).is_err());
        assert_eq!(split_sets(&["a = b=c".into()]).unwrap(), sets(&[("a", "b=c")]));
    }

    #[test]
    fn json_null_is_rejected_with_its_key_path() {
        let e = parse_json_table(r#"{"traffic": {"sources": [{"share": null}]}}"#, "<dict>").unwrap_err().to_string();
        assert_eq!(e, "<dict>: traffic.sources[0].share = null: expected a value (leave the key out instead of null)");
        let e = parse_json_table("[1]", "<dict>").unwrap_err().to_string();
        assert_eq!(e, "<dict>: a table (a dict) at the top level");
    }

    #[test]
    fn toml_syntax_errors_have_line_and_column() {
        let e = parse_toml_table("a = 1\nb = = 2", "t.toml").unwrap_err().to_string();
        assert!(e.starts_with("t.toml:2:5: valid TOML"), "{e}");
    }

    #[test]
    fn a_duplicate_key_is_named() {
        let e = parse_toml_table("[traffic]\nrate = \"1Mpps\"\nrate = \"2Mpps\"\n", "t.toml").unwrap_err().to_string();
        assert!(e.starts_with("t.toml:3:1: valid TOML") && e.contains("`rate` is given twice"), "{e}");
    }
}
