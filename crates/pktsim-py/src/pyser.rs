//! A serde `Serializer` that builds Python objects (dict, list, str, int, float, bool,
//! None) directly, with serde_json's data model: what `json.loads(serde_json::to_string(v))`
//! gives, without the text in between.
//!
//! The same as serde_json, on purpose (the `--json` contract): NaN and infinities become
//! None (JSON null); unit, unit structs and `None` become None; tuples and byte strings
//! become lists; an enum's unit variant is its name, any other variant a one-key dict; map
//! keys become strings (integers and booleans written out, as serde_json does). Python
//! floats and serde_json's shortest round-trip text of an `f64` denote the same number, so
//! a value is carried bit for bit. `tests/test_python_api.py` holds this against
//! serde_json's own text for every bundled scenario.
//!
//! (pythonize and serde-pyobject do the same job but keep NaN, turn tuples into tuples and
//! unit into `()`, and leave integer keys as integers; pythonize also pins an older PyO3.)

use std::fmt::Display;

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyString};
use pyo3::IntoPyObjectExt;
use serde::ser::{self, Serialize};

/// A serialization error: a Python exception, or a message from the value's `Serialize`.
#[derive(Debug)]
pub struct Error(pub PyErr);

impl Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl std::error::Error for Error {}

impl ser::Error for Error {
    fn custom<T: Display>(msg: T) -> Self {
        Error(pyo3::exceptions::PyValueError::new_err(msg.to_string()))
    }
}

impl From<PyErr> for Error {
    fn from(e: PyErr) -> Self {
        Error(e)
    }
}

type Result<T> = std::result::Result<T, Error>;

/// `value` as a Python object, as `json.loads(serde_json::to_string(value))` would give it.
pub fn to_py<'py, T: ?Sized + Serialize>(py: Python<'py>, value: &T) -> PyResult<Bound<'py, PyAny>> {
    value.serialize(Ser { py }).map_err(|e| e.0)
}

#[derive(Clone, Copy)]
struct Ser<'py> {
    py: Python<'py>,
}

impl<'py> Ser<'py> {
    fn obj<T: IntoPyObject<'py>>(self, v: T) -> Result<Bound<'py, PyAny>> {
        Ok(v.into_bound_py_any(self.py)?)
    }

    fn none(self) -> Result<Bound<'py, PyAny>> {
        Ok(self.py.None().into_bound(self.py))
    }

    fn f64(self, v: f64) -> Result<Bound<'py, PyAny>> {
        if v.is_finite() {
            self.obj(v)
        } else {
            self.none()
        }
    }

    /// `{variant: value}`, serde_json's externally tagged enum.
    fn tagged(self, variant: &'static str, value: Bound<'py, PyAny>) -> Result<Bound<'py, PyAny>> {
        let d = PyDict::new(self.py);
        d.set_item(key(self.py, variant), value)?;
        Ok(d.into_any())
    }
}

/// Field names and variants are `&'static str`: interned, as `json.loads` shares its keys.
fn key<'py>(py: Python<'py>, name: &'static str) -> Bound<'py, PyString> {
    PyString::intern(py, name)
}

/// An f32 as serde_json writes it (its shortest decimal text), read back as Python reads it.
fn f32_value(v: f32) -> f64 {
    format!("{v}").parse().unwrap_or(f64::NAN)
}

impl<'py> ser::Serializer for Ser<'py> {
    type Ok = Bound<'py, PyAny>;
    type Error = Error;
    type SerializeSeq = Seq<'py>;
    type SerializeTuple = Seq<'py>;
    type SerializeTupleStruct = Seq<'py>;
    type SerializeTupleVariant = Tagged<Seq<'py>>;
    type SerializeMap = Map<'py>;
    type SerializeStruct = Map<'py>;
    type SerializeStructVariant = Tagged<Map<'py>>;

    fn serialize_bool(self, v: bool) -> Result<Self::Ok> {
        self.obj(v)
    }
    fn serialize_i8(self, v: i8) -> Result<Self::Ok> {
        self.obj(v)
    }
    fn serialize_i16(self, v: i16) -> Result<Self::Ok> {
        self.obj(v)
    }
    fn serialize_i32(self, v: i32) -> Result<Self::Ok> {
        self.obj(v)
    }
    fn serialize_i64(self, v: i64) -> Result<Self::Ok> {
        self.obj(v)
    }
    fn serialize_i128(self, v: i128) -> Result<Self::Ok> {
        self.obj(v)
    }
    fn serialize_u8(self, v: u8) -> Result<Self::Ok> {
        self.obj(v)
    }
    fn serialize_u16(self, v: u16) -> Result<Self::Ok> {
        self.obj(v)
    }
    fn serialize_u32(self, v: u32) -> Result<Self::Ok> {
        self.obj(v)
    }
    fn serialize_u64(self, v: u64) -> Result<Self::Ok> {
        self.obj(v)
    }
    fn serialize_u128(self, v: u128) -> Result<Self::Ok> {
        self.obj(v)
    }
    fn serialize_f32(self, v: f32) -> Result<Self::Ok> {
        if v.is_finite() {
            self.obj(f32_value(v))
        } else {
            self.none()
        }
    }
    fn serialize_f64(self, v: f64) -> Result<Self::Ok> {
        self.f64(v)
    }
    fn serialize_char(self, v: char) -> Result<Self::Ok> {
        self.obj(v.to_string())
    }
    fn serialize_str(self, v: &str) -> Result<Self::Ok> {
        Ok(PyString::new(self.py, v).into_any())
    }
    fn serialize_bytes(self, v: &[u8]) -> Result<Self::Ok> {
        Ok(PyList::new(self.py, v.iter().copied())?.into_any())
    }
    fn serialize_none(self) -> Result<Self::Ok> {
        self.none()
    }
    fn serialize_some<T: ?Sized + Serialize>(self, value: &T) -> Result<Self::Ok> {
        value.serialize(self)
    }
    fn serialize_unit(self) -> Result<Self::Ok> {
        self.none()
    }
    fn serialize_unit_struct(self, _name: &'static str) -> Result<Self::Ok> {
        self.none()
    }
    fn serialize_unit_variant(self, _name: &'static str, _index: u32, variant: &'static str) -> Result<Self::Ok> {
        Ok(key(self.py, variant).into_any())
    }
    fn serialize_newtype_struct<T: ?Sized + Serialize>(self, _name: &'static str, value: &T) -> Result<Self::Ok> {
        value.serialize(self)
    }
    fn serialize_newtype_variant<T: ?Sized + Serialize>(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        value: &T,
    ) -> Result<Self::Ok> {
        let v = value.serialize(self)?;
        self.tagged(variant, v)
    }
    fn serialize_seq(self, _len: Option<usize>) -> Result<Self::SerializeSeq> {
        Ok(Seq { ser: self, list: PyList::empty(self.py) })
    }
    fn serialize_tuple(self, len: usize) -> Result<Self::SerializeTuple> {
        self.serialize_seq(Some(len))
    }
    fn serialize_tuple_struct(self, _name: &'static str, len: usize) -> Result<Self::SerializeTupleStruct> {
        self.serialize_seq(Some(len))
    }
    fn serialize_tuple_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        len: usize,
    ) -> Result<Self::SerializeTupleVariant> {
        Ok(Tagged { variant, inner: self.serialize_seq(Some(len))? })
    }
    fn serialize_map(self, _len: Option<usize>) -> Result<Self::SerializeMap> {
        Ok(Map { ser: self, dict: PyDict::new(self.py), key: None })
    }
    fn serialize_struct(self, _name: &'static str, len: usize) -> Result<Self::SerializeStruct> {
        self.serialize_map(Some(len))
    }
    fn serialize_struct_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        len: usize,
    ) -> Result<Self::SerializeStructVariant> {
        Ok(Tagged { variant, inner: self.serialize_map(Some(len))? })
    }
    fn collect_str<T: ?Sized + Display>(self, value: &T) -> Result<Self::Ok> {
        self.serialize_str(&value.to_string())
    }
}

pub struct Seq<'py> {
    ser: Ser<'py>,
    list: Bound<'py, PyList>,
}

impl<'py> Seq<'py> {
    fn push<T: ?Sized + Serialize>(&mut self, value: &T) -> Result<()> {
        self.list.append(value.serialize(self.ser)?)?;
        Ok(())
    }
}

/// A sequence, a tuple and a tuple struct all become a list.
macro_rules! seq_like {
    ($($trait:ident :: $method:ident),*) => {$(
        impl<'py> ser::$trait for Seq<'py> {
            type Ok = Bound<'py, PyAny>;
            type Error = Error;
            fn $method<T: ?Sized + Serialize>(&mut self, value: &T) -> Result<()> {
                self.push(value)
            }
            fn end(self) -> Result<Self::Ok> {
                Ok(self.list.into_any())
            }
        }
    )*};
}
seq_like!(SerializeSeq::serialize_element, SerializeTuple::serialize_element, SerializeTupleStruct::serialize_field);

pub struct Map<'py> {
    ser: Ser<'py>,
    dict: Bound<'py, PyDict>,
    key: Option<Bound<'py, PyAny>>,
}

impl<'py> ser::SerializeMap for Map<'py> {
    type Ok = Bound<'py, PyAny>;
    type Error = Error;
    fn serialize_key<T: ?Sized + Serialize>(&mut self, key: &T) -> Result<()> {
        self.key = Some(key.serialize(KeySer { py: self.ser.py })?);
        Ok(())
    }
    fn serialize_value<T: ?Sized + Serialize>(&mut self, value: &T) -> Result<()> {
        let k = self.key.take().ok_or_else(|| <Error as ser::Error>::custom("a map value without its key"))?;
        self.dict.set_item(k, value.serialize(self.ser)?)?;
        Ok(())
    }
    fn end(self) -> Result<Self::Ok> {
        Ok(self.dict.into_any())
    }
}

impl<'py> ser::SerializeStruct for Map<'py> {
    type Ok = Bound<'py, PyAny>;
    type Error = Error;
    fn serialize_field<T: ?Sized + Serialize>(&mut self, name: &'static str, value: &T) -> Result<()> {
        self.dict.set_item(key(self.ser.py, name), value.serialize(self.ser)?)?;
        Ok(())
    }
    fn end(self) -> Result<Self::Ok> {
        Ok(self.dict.into_any())
    }
}

/// A tuple or struct variant: `{variant: [...]}` or `{variant: {...}}`.
pub struct Tagged<S> {
    variant: &'static str,
    inner: S,
}

impl<'py> ser::SerializeTupleVariant for Tagged<Seq<'py>> {
    type Ok = Bound<'py, PyAny>;
    type Error = Error;
    fn serialize_field<T: ?Sized + Serialize>(&mut self, value: &T) -> Result<()> {
        self.inner.push(value)
    }
    fn end(self) -> Result<Self::Ok> {
        let ser = self.inner.ser;
        ser.tagged(self.variant, self.inner.list.into_any())
    }
}

impl<'py> ser::SerializeStructVariant for Tagged<Map<'py>> {
    type Ok = Bound<'py, PyAny>;
    type Error = Error;
    fn serialize_field<T: ?Sized + Serialize>(&mut self, name: &'static str, value: &T) -> Result<()> {
        ser::SerializeStruct::serialize_field(&mut self.inner, name, value)
    }
    fn end(self) -> Result<Self::Ok> {
        let ser = self.inner.ser;
        ser.tagged(self.variant, self.inner.dict.into_any())
    }
}

/// Map keys, as serde_json writes them: strings, and integers, booleans and finite floats
/// written out as strings; anything else is an error ("key must be a string").
struct KeySer<'py> {
    py: Python<'py>,
}

fn key_must_be_a_string() -> Error {
    <Error as ser::Error>::custom("key must be a string")
}

impl<'py> KeySer<'py> {
    fn text(self, s: &str) -> Result<Bound<'py, PyAny>> {
        Ok(PyString::new(self.py, s).into_any())
    }
}

/// Integer keys are written out in decimal.
macro_rules! integer_keys {
    ($($method:ident: $t:ty),*) => {$(
        fn $method(self, v: $t) -> Result<Self::Ok> {
            self.text(&v.to_string())
        }
    )*};
}

impl<'py> ser::Serializer for KeySer<'py> {
    type Ok = Bound<'py, PyAny>;
    type Error = Error;
    type SerializeSeq = ser::Impossible<Self::Ok, Error>;
    type SerializeTuple = ser::Impossible<Self::Ok, Error>;
    type SerializeTupleStruct = ser::Impossible<Self::Ok, Error>;
    type SerializeTupleVariant = ser::Impossible<Self::Ok, Error>;
    type SerializeMap = ser::Impossible<Self::Ok, Error>;
    type SerializeStruct = ser::Impossible<Self::Ok, Error>;
    type SerializeStructVariant = ser::Impossible<Self::Ok, Error>;

    fn serialize_bool(self, v: bool) -> Result<Self::Ok> {
        self.text(if v { "true" } else { "false" })
    }
    integer_keys!(serialize_i8: i8, serialize_i16: i16, serialize_i32: i32, serialize_i64: i64, serialize_i128: i128);
    integer_keys!(serialize_u8: u8, serialize_u16: u16, serialize_u32: u32, serialize_u64: u64, serialize_u128: u128);
    fn serialize_f32(self, v: f32) -> Result<Self::Ok> {
        if !v.is_finite() {
            return Err(<Error as ser::Error>::custom("float key must be finite (got NaN or +/-inf)"));
        }
        self.text(&serde_json::to_string(&v).map_err(<Error as ser::Error>::custom)?)
    }
    fn serialize_f64(self, v: f64) -> Result<Self::Ok> {
        if !v.is_finite() {
            return Err(<Error as ser::Error>::custom("float key must be finite (got NaN or +/-inf)"));
        }
        self.text(&serde_json::to_string(&v).map_err(<Error as ser::Error>::custom)?)
    }
    fn serialize_char(self, v: char) -> Result<Self::Ok> {
        self.text(v.encode_utf8(&mut [0u8; 4]))
    }
    fn serialize_str(self, v: &str) -> Result<Self::Ok> {
        self.text(v)
    }
    fn serialize_bytes(self, _v: &[u8]) -> Result<Self::Ok> {
        Err(key_must_be_a_string())
    }
    fn serialize_none(self) -> Result<Self::Ok> {
        Err(key_must_be_a_string())
    }
    fn serialize_some<T: ?Sized + Serialize>(self, value: &T) -> Result<Self::Ok> {
        value.serialize(self)
    }
    fn serialize_unit(self) -> Result<Self::Ok> {
        Err(key_must_be_a_string())
    }
    fn serialize_unit_struct(self, _name: &'static str) -> Result<Self::Ok> {
        Err(key_must_be_a_string())
    }
    fn serialize_unit_variant(self, _name: &'static str, _index: u32, variant: &'static str) -> Result<Self::Ok> {
        Ok(key(self.py, variant).into_any())
    }
    fn serialize_newtype_struct<T: ?Sized + Serialize>(self, _name: &'static str, value: &T) -> Result<Self::Ok> {
        value.serialize(self)
    }
    fn serialize_newtype_variant<T: ?Sized + Serialize>(
        self,
        _name: &'static str,
        _index: u32,
        _variant: &'static str,
        _value: &T,
    ) -> Result<Self::Ok> {
        Err(key_must_be_a_string())
    }
    fn serialize_seq(self, _len: Option<usize>) -> Result<Self::SerializeSeq> {
        Err(key_must_be_a_string())
    }
    fn serialize_tuple(self, _len: usize) -> Result<Self::SerializeTuple> {
        Err(key_must_be_a_string())
    }
    fn serialize_tuple_struct(self, _name: &'static str, _len: usize) -> Result<Self::SerializeTupleStruct> {
        Err(key_must_be_a_string())
    }
    fn serialize_tuple_variant(
        self,
        _name: &'static str,
        _index: u32,
        _variant: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeTupleVariant> {
        Err(key_must_be_a_string())
    }
    fn serialize_map(self, _len: Option<usize>) -> Result<Self::SerializeMap> {
        Err(key_must_be_a_string())
    }
    fn serialize_struct(self, _name: &'static str, _len: usize) -> Result<Self::SerializeStruct> {
        Err(key_must_be_a_string())
    }
    fn serialize_struct_variant(
        self,
        _name: &'static str,
        _index: u32,
        _variant: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeStructVariant> {
        Err(key_must_be_a_string())
    }
    fn collect_str<T: ?Sized + Display>(self, value: &T) -> Result<Self::Ok> {
        self.text(&value.to_string())
    }
}
