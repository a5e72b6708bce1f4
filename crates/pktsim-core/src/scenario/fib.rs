//! The checks of `[fib]`. Its parameters, [`FibParams`], are defined with the FIB/cache
//! model in [`crate::fib`].

use crate::error::{ConfigError, Result};
use crate::fib::FibParams;

/// A FIB entry above 0 B, a finite number of misses per lookup >= 0, and at least one route.
pub(super) fn validate(fib: &FibParams, origin: &str) -> Result<()> {
    if fib.entry_size.bytes == 0 {
        return Err(ConfigError::new(
            origin,
            "fib.entry_size",
            Some(format!("{:?}", fib.entry_size.to_string())),
            "a size above 0 B",
        )
        .into());
    }
    if !(fib.misses_per_lookup.is_finite() && fib.misses_per_lookup >= 0.0) {
        return Err(ConfigError::new(
            origin,
            "fib.misses_per_lookup",
            Some(fib.misses_per_lookup.to_string()),
            "a finite number >= 0",
        )
        .into());
    }
    if fib.routes == Some(0) {
        return Err(ConfigError::new(origin, "fib.routes", Some("0".into()), "at least 1 route").into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::config_error;
    use crate::units::Bytes;

    #[test]
    fn zero_routes_and_empty_entries_are_rejected() {
        assert!(validate(&FibParams::default(), "t").is_ok());
        let fib = FibParams { routes: Some(0), ..FibParams::default() };
        assert_eq!(config_error(validate(&fib, "t")).to_string(), "t: fib.routes = 0: expected at least 1 route");
        let fib = FibParams { entry_size: Bytes::new(0), ..FibParams::default() };
        assert_eq!(config_error(validate(&fib, "t")).path, "fib.entry_size");
    }

    #[test]
    fn misses_per_lookup_is_finite_and_not_negative() {
        for bad in [-0.1, f64::NAN, f64::INFINITY] {
            let fib = FibParams { misses_per_lookup: bad, ..FibParams::default() };
            assert_eq!(config_error(validate(&fib, "t")).path, "fib.misses_per_lookup");
        }
    }
}
