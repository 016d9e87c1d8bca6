//! The layer's overhead per request (placeholder).
fn main() {}
