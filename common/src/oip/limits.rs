//! The request-size limits the master and its workers share, defined once so that a
//! request the master accepts is never refused by its members for its size.

/// Largest request body accepted, in bytes (HTTP body or gRPC message).
pub const MAX_BODY_BYTES: usize = 10 * 1024 * 1024;
/// Most items one request may carry (its batch dimension).
pub const MAX_ITEMS: usize = 64;
/// Longest text item accepted, in characters.
pub const MAX_TEXT_CHARS: usize = 10_000;
