//! Cross-origin requests (`[http.cors]`, Iggy's keys): which web pages a browser
//! lets call the API. Off unless enabled; then a browser's preflight is answered
//! here, before the API key is asked for (a browser sends none with it), and the
//! answers to the origins named carry the headers that let the page read them.

use axum::http::{HeaderName, HeaderValue, Method};
use ferry_config::CorsConfig;
use tower_http::cors::{AllowOrigin, CorsLayer};

/// The layer `cors` asks for, or none when it is off. The config was checked when
/// read; what still cannot be made into a header is named here all the same.
pub(crate) fn layer(cors: &CorsConfig) -> Result<Option<CorsLayer>, String> {
    if !cors.enabled {
        return Ok(None);
    }
    let origins = match cors.allowed_origins.as_slice() {
        [any] if any == "*" => AllowOrigin::any(),
        origins => AllowOrigin::list(
            origins
                .iter()
                .map(|origin| {
                    HeaderValue::from_str(origin)
                        .map_err(|_| format!("[http.cors] allowed_origins: {origin:?} cannot be a header's value"))
                })
                .collect::<Result<Vec<_>, _>>()?,
        ),
    };
    let methods = cors
        .allowed_methods
        .iter()
        .map(|method| {
            Method::from_bytes(method.to_ascii_uppercase().as_bytes())
                .map_err(|_| format!("[http.cors] allowed_methods: {method:?} is not a method"))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let names = |key: &str, names: &[String]| {
        names
            .iter()
            .map(|name| {
                HeaderName::from_bytes(name.as_bytes())
                    .map_err(|_| format!("[http.cors] {key}: {name:?} is not a header name"))
            })
            .collect::<Result<Vec<_>, _>>()
    };
    Ok(Some(
        CorsLayer::new()
            .allow_origin(origins)
            .allow_methods(methods)
            .allow_headers(names("allowed_headers", &cors.allowed_headers)?)
            .expose_headers(names("exposed_headers", &cors.exposed_headers)?)
            .allow_credentials(cors.allow_credentials)
            .allow_private_network(cors.allow_private_network),
    ))
}
