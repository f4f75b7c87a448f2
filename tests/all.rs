//! The integration tests, as one test binary: `tests/suite/` holds the tests (one module per
//! area), `tests/common/` the helpers they share. One binary links the library once instead of
//! once per file, and every helper is compiled beside every test that could use it.
//!
//! Tests run as threads of one process. A test that changes process-wide state (a signal
//! disposition, the environment, a resource limit) runs its body in a child process of its own
//! with `common::own_process` (see there), so it cannot leak into the tests beside it.

// The items of this test crate are `pub` for the modules beside them; none is an API.
#![allow(unreachable_pub)]

// `cfg(test)` is always set here; saying so lets clippy's `allow-unwrap-in-tests` and
// `allow-expect-in-tests` (clippy.toml) see the helpers as test code too.
#[cfg(test)]
mod common;
#[cfg(test)]
mod suite;
