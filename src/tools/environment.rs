//! The close-out (stub, being written).
