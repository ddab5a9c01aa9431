//! The cluster secret on the gateway's admin endpoints: the header that carries it, its
//! constant-time check and the answer to a request without it. Shared by every admin route
//! (`process`, `class_admin`); must not know any route.

/// Header carrying the cluster secret on the admin calls that change or export state.
pub const SECRET_HEADER: &str = "x-lowtail-secret";

/// Whether `headers` carry the cluster secret.
pub(crate) fn has_secret(headers: &axum::http::HeaderMap, secret: &str) -> bool {
    headers
        .get(SECRET_HEADER)
        .is_some_and(|v| bool::from(subtle::ConstantTimeEq::ct_eq(v.as_bytes(), secret.as_bytes())))
}

/// The answer to an admin call that needs the cluster secret and came without it (or a wrong one).
pub(crate) fn refused() -> axum::response::Response {
    use axum::response::IntoResponse;
    (axum::http::StatusCode::FORBIDDEN, format!("missing or wrong {SECRET_HEADER} header")).into_response()
}
