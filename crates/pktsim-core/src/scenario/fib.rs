//! The checks of `[fib]`. Its parameters, [`FibParams`], are defined with the FIB/cache
//! model in [`crate::fib`].

use crate::error::{ConfigError, Result};
use crate::fib::FibParams;

/// A FIB entry above 0 B, a finite number of misses per lookup >= 0, and at least one route.
pub(super) fn validate(fib: &FibParams, origin: &str) -> Result<()> {
    if fib.entry_size.bytes == 0 {
        return Err(ConfigError::new(origin, "fib.entry_size", Some(format!("{:?}", fib.entry_size.to_string())), "a size above 0 B").into());
    }
    if !(fib.misses_per_lookup.is_finite() && fib.misses_per_lookup >= 0.0) {
        return Err(ConfigError::new(origin, "fib.misses_per_lookup", Some(fib.misses_per_lookup.to_string()), "a finite number >= 0").into());
    }
    if fib.routes == Some(0) {
        return Err(ConfigError::new(origin, "fib.routes", Some("0".into()), "at least 1 route").into());
    }
    Ok(())
}
