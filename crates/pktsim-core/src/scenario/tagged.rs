//! Tagged sections: a table whose one key, its tag (`nic.itr.mode`), picks which of its
//! alternatives the table is; each alternative is a type of its own, reading only its own
//! keys (`static` reads `interval`, `dim` reads `profile`).
//!
//! ```toml
//! [nic.itr]
//! mode = "static"     # the tag: which alternative (left out: the section's default)
//! interval = "50us"   # a key of that alternative
//! ```
//!
//! One rule serves every tagged section, registered in `scenario::TAGGED` (`scenario/mod.rs`):
//!
//! - **Reading** ([`deserialize`]): a key that another alternative reads is refused, naming
//!   the alternatives that read it (`no profile with mode = "static" (only mode = "dim"
//!   reads it)`); a key no alternative reads is refused as unknown; the alternative itself
//!   is read with serde, its errors keeping their whole key path (`nic.itr.interval`).
//! - **Switching** ([`switch`]): where `--set` (or a chain's keys for its node) changes a
//!   tag, the file's keys that the new alternative does not read are left out, each named
//!   in a note; those the overrides give themselves stay, and are refused as above.
//!
//! The keys an alternative reads come from its type ([`keys_of`]: serde's own list of the
//! names and aliases it accepts), so no list of them is kept by hand.

use serde::de::{DeserializeOwned, Deserializer, Error as _, Visitor};
use serde::Deserialize;

use crate::error::{join_path, nest, PATH_SEP, VALUE_SEP};

/// A tagged section's type.
pub trait Tagged: Sized {
    /// The tag's key inside the section (`mode`).
    const TAG: &'static str;
    /// The alternative of a section that gives no tag.
    const DEFAULT: &'static str;
    /// Each alternative's tag value and the keys it reads ([`keys_of`] its type).
    fn alternatives() -> Vec<(&'static str, &'static [&'static str])>;
    /// The named alternative, read from the section's other keys with [`part`].
    fn build(name: &str, rest: toml::Value) -> Result<Self, String>;
}

/// A tagged section, as the format's tables hold it.
pub struct Section {
    /// Its key path (`nic.itr`).
    pub path: &'static str,
    pub tag: &'static str,
    pub default: &'static str,
    pub alternatives: fn() -> Vec<(&'static str, &'static [&'static str])>,
}

impl Section {
    pub const fn of<T: Tagged>(path: &'static str) -> Section {
        Section { path, tag: T::TAG, default: T::DEFAULT, alternatives: T::alternatives }
    }
}

/// Read a tagged section: the tag (or the default), then the keys, each read by the chosen
/// alternative or refused (see the module's header).
pub fn deserialize<'de, T: Tagged, D: Deserializer<'de>>(d: D) -> Result<T, D::Error> {
    let mut table = toml::Table::deserialize(d)?;
    let alternatives = T::alternatives();
    let names = || alternatives.iter().map(|(n, _)| format!("`{n}`")).collect::<Vec<_>>().join(", ");
    let name = match table.remove(T::TAG) {
        None => T::DEFAULT.to_string(),
        Some(toml::Value::String(s)) if alternatives.iter().any(|(n, _)| *n == s) => s,
        Some(toml::Value::String(s)) => {
            return Err(D::Error::custom(nest(T::TAG, &format!("unknown variant `{s}`, expected one of {}", names()))))
        }
        Some(v) => {
            return Err(D::Error::custom(nest(T::TAG, &format!("{v}{VALUE_SEP}a string, one of {}", names()))));
        }
    };
    let reads = alternatives.iter().find(|(n, _)| *n == name).map_or(&[][..], |(_, k)| *k);
    for (key, value) in &table {
        if reads.contains(&key.as_str()) {
            continue;
        }
        let readers: Vec<String> = alternatives
            .iter()
            .filter(|(_, k)| k.contains(&key.as_str()))
            .map(|(n, _)| format!("{} = \"{n}\"", T::TAG))
            .collect();
        let message = if readers.is_empty() {
            let known: Vec<String> =
                std::iter::once(T::TAG).chain(reads.iter().copied()).map(|k| format!("`{k}`")).collect();
            format!("unknown field `{key}`, expected one of {}", known.join(", "))
        } else {
            let only = readers.join(" or ");
            format!("{value}{VALUE_SEP}no {key} with {} = \"{name}\" (only {only} reads it)", T::TAG)
        };
        return Err(D::Error::custom(nest(key, &message)));
    }
    T::build(&name, toml::Value::Table(table)).map_err(|e| {
        // A key the alternative needs and has no default for.
        match e.split(PATH_SEP).nth(2).and_then(|m| m.strip_prefix("missing field `")) {
            Some(rest) => {
                let key = rest.split('`').next().unwrap_or_default();
                D::Error::custom(nest(
                    key,
                    &format!("a value with {} = \"{name}\", which has no default for it", T::TAG),
                ))
            }
            None => D::Error::custom(e),
        }
    })
}

/// Read one alternative from a tagged section's other keys; an error carries the key path
/// inside the section.
pub fn part<T: DeserializeOwned>(rest: toml::Value) -> Result<T, String> {
    serde_path_to_error::deserialize(rest).map_err(|e| {
        let path = e.path().to_string();
        let message = e.inner().to_string();
        // (toml ends its messages with its own "in `key`"; the path says it.)
        let message = message.split("\nin `").next().unwrap_or_default().trim();
        nest(if path == "." { "" } else { &path }, message)
    })
}

/// The keys a struct reads: serde's list of the names and aliases its derived
/// `Deserialize` accepts.
pub fn keys_of<T: DeserializeOwned>() -> &'static [&'static str] {
    struct Fields<'a>(&'a mut &'static [&'static str]);
    impl<'de> Deserializer<'de> for Fields<'_> {
        type Error = serde::de::value::Error;
        fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Self::Error> {
            Err(Self::Error::custom("a struct"))
        }
        fn deserialize_struct<V: Visitor<'de>>(
            self,
            _: &'static str,
            fields: &'static [&'static str],
            _: V,
        ) -> Result<V::Value, Self::Error> {
            *self.0 = fields;
            Err(Self::Error::custom("fields taken"))
        }
        serde::forward_to_deserialize_any! {
            bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf option unit
            unit_struct newtype_struct seq tuple tuple_struct map enum identifier ignored_any
        }
    }
    let mut fields: &'static [&'static str] = &[];
    let _ = T::deserialize(Fields(&mut fields));
    fields
}

/// Each of `sections`' tag as `table` gives it (None: not given, the default).
pub fn tags(sections: &[Section], table: &toml::Table) -> Vec<Option<toml::Value>> {
    sections.iter().map(|s| lookup(table, &join_path(s.path, s.tag)).cloned()).collect()
}

/// Where the overrides (`given`, a table of the keys they give) change a tagged section's
/// tag from the one the file gave (`before`, its [`tags`]), the file's keys the new
/// alternative does not read left out of `table` (the file with the overrides applied): a
/// note for each section that lost some. Keys the overrides give themselves stay, to be
/// refused.
pub fn switch(
    sections: &[Section],
    before: &[Option<toml::Value>],
    table: &mut toml::Table,
    given: &toml::Table,
) -> Vec<String> {
    let mut notes = Vec::new();
    for (s, before) in sections.iter().zip(before) {
        let tag_path = join_path(s.path, s.tag);
        if !crate::loader::gives(given, &tag_path) {
            continue;
        }
        let name = |v: Option<&toml::Value>| v.map_or(Some(s.default.to_string()), |v| v.as_str().map(str::to_string));
        let (Some(from), Some(to)) = (name(before.as_ref()), name(lookup(table, &tag_path))) else { continue };
        let alternatives = (s.alternatives)();
        let Some((_, reads)) = alternatives.iter().find(|(n, _)| *n == to) else { continue };
        let Some(toml::Value::Table(section)) = lookup_mut(table, s.path) else { continue };
        if from == to {
            continue;
        }
        let left: Vec<String> = section
            .keys()
            .filter(|k| *k != s.tag && !reads.contains(&k.as_str()))
            .filter(|k| !crate::loader::gives(given, &join_path(s.path, k)))
            .cloned()
            .collect();
        for k in &left {
            section.remove(k);
        }
        if left.is_empty() {
            continue;
        }
        let keys: Vec<String> = left.iter().map(|k| join_path(s.path, k)).collect();
        notes.push(format!(
            "{tag_path} = \"{to}\" (set over the file's \"{from}\"): the file's {} left out, as \"{to}\" does not read {}",
            keys.join(", "),
            if keys.len() == 1 { "it" } else { "them" }
        ));
    }
    notes
}

fn lookup<'a>(t: &'a toml::Table, path: &str) -> Option<&'a toml::Value> {
    let (head, rest) = path.split_once('.').map_or((path, None), |(h, r)| (h, Some(r)));
    match (t.get(head)?, rest) {
        (v, None) => Some(v),
        (toml::Value::Table(inner), Some(r)) => lookup(inner, r),
        _ => None,
    }
}

fn lookup_mut<'a>(t: &'a mut toml::Table, path: &str) -> Option<&'a mut toml::Value> {
    let (head, rest) = path.split_once('.').map_or((path, None), |(h, r)| (h, Some(r)));
    match (t.get_mut(head)?, rest) {
        (v, None) => Some(v),
        (toml::Value::Table(inner), Some(r)) => lookup_mut(inner, r),
        _ => None,
    }
}

/// A tagged section's JSON Schema (`#[schemars(transform = ...)]`): one alternative per
/// tag value, as schemars writes an internally tagged enum, with the tag of the default
/// alternative optional, as the reader has it.
pub fn schema_default<T: Tagged>(schema: &mut schemars::Schema) {
    let Some(alternatives) = schema.get_mut("oneOf").and_then(|v| v.as_array_mut()) else { return };
    for alt in alternatives {
        let tag = alt.pointer(&format!("/properties/{}", T::TAG));
        let is_default = tag.is_some_and(|t| {
            t.get("const").and_then(|c| c.as_str()) == Some(T::DEFAULT)
                || t.get("enum").is_some_and(|e| e.as_array().is_some_and(|e| e.len() == 1 && e[0] == T::DEFAULT))
        });
        if let (true, Some(required)) = (is_default, alt.get_mut("required").and_then(|r| r.as_array_mut())) {
            required.retain(|k| k != T::TAG);
        }
    }
}
