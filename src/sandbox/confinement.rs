//! The kernel filters of one session, built once from its layout and applied to each of its
//! processes between fork and exec by the process layer.

use super::{SandboxError, SandboxLayout};

/// A session's prepared confinement.
#[derive(Debug)]
pub struct Confinement {
    layout: SandboxLayout,
}

impl Confinement {
    /// Builds the session's filters; fails closed when a mechanism is missing.
    pub fn prepare(layout: SandboxLayout) -> Result<Confinement, SandboxError> {
        Err(SandboxError::Unavailable {
            mode: layout.mode,
            missing: "kernel confinement is not built into this binary".to_string(),
        })
    }

    /// The layout the filters were built from.
    pub fn layout(&self) -> &SandboxLayout {
        &self.layout
    }
}
