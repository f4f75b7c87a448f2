//! The scripted model (stub, being written).
