//! An HTTP GET through `wasi:http/outgoing-handler`, the way a connector calling a
//! REST API would: the host makes the connection, after checking its grant.
//! Every step's error is returned as text for the probe's record.

use wasi::http::outgoing_handler;
use wasi::http::types::{Fields, IncomingBody, OutgoingBody, OutgoingRequest, Scheme};
use wasi::io::streams::StreamError;

/// GET `http://{authority}/probe`; the status and body of the answer.
pub fn get(authority: &str) -> Result<String, String> {
    let request = OutgoingRequest::new(Fields::new());
    request.set_scheme(Some(&Scheme::Http)).map_err(|()| "set_scheme refused")?;
    request.set_authority(Some(authority)).map_err(|()| format!("set_authority {authority:?} refused"))?;
    request.set_path_with_query(Some("/probe")).map_err(|()| "set_path_with_query refused")?;
    let body = request.body().map_err(|()| "the request has no body")?;
    let pending = outgoing_handler::handle(request, None).map_err(|e| format!("handle: {e:?}"))?;
    OutgoingBody::finish(body, None).map_err(|e| format!("finishing the request body: {e:?}"))?;
    let ready = pending.subscribe();
    ready.block();
    drop(ready);
    let response = pending
        .get()
        .ok_or("no response after it was ready")?
        .map_err(|()| "the response was taken twice")?
        .map_err(|e| format!("response: {e:?}"))?;
    let status = response.status();
    let body = response.consume().map_err(|()| "the response body was taken")?;
    let stream = body.stream().map_err(|()| "the response stream was taken")?;
    let mut bytes = Vec::new();
    loop {
        match stream.blocking_read(4096) {
            Ok(chunk) => bytes.extend(chunk),
            Err(StreamError::Closed) => break,
            Err(e) => return Err(format!("reading the body: {e:?}")),
        }
    }
    drop(stream);
    drop(IncomingBody::finish(body));
    Ok(format!("{status} {}", String::from_utf8_lossy(&bytes)))
}
