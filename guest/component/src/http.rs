//! World `http-gate`: the gate's HTTP API (docs/http-api.yaml) as a wasi:http handler. The
//! API is `interlock_core::http_api`; this file only moves bytes between wasi:http and it,
//! and performs its outgoing requests and sleeps.

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

use interlock_core::http_api::{self, Fetch, Fetched, Io, Request, Response};

use crate::exports::wasi::http::incoming_handler::Guest;
use crate::wasi::cli::environment;
use crate::wasi::clocks0_2_12::monotonic_clock;
use crate::wasi::http::outgoing_handler;
use crate::wasi::http::types::{
    Fields, IncomingBody, IncomingRequest, Method, OutgoingBody, OutgoingRequest, OutgoingResponse,
    RequestOptions, ResponseOutparam, Scheme,
};
use crate::wasi::io::streams::{InputStream, StreamError};
use crate::{with_journal, Component};

/// The largest request or target answer read, in bytes (the API's; the gate refuses a
/// proposal far smaller).
const MAX_BODY: usize = http_api::MAX_BODY_BYTES;

pub(crate) fn env(name: &str) -> Option<String> {
    environment::get_environment()
        .into_iter()
        .find_map(|(k, v)| (k == name).then_some(v))
}

/// Why a body could not be read.
struct Unread {
    too_large: bool,
    problem: String,
}

impl From<String> for Unread {
    fn from(problem: String) -> Unread {
        Unread {
            too_large: false,
            problem,
        }
    }
}

/// Reads a stream to its end; `Err` past `MAX_BODY` or on a failed read.
fn read_all(stream: &InputStream) -> Result<Vec<u8>, Unread> {
    let mut out = Vec::new();
    loop {
        match stream.blocking_read(64 * 1024) {
            Ok(chunk) => {
                out.extend_from_slice(&chunk);
                if out.len() > MAX_BODY {
                    return Err(Unread {
                        too_large: true,
                        problem: format!("larger than {MAX_BODY} bytes"),
                    });
                }
            }
            Err(StreamError::Closed) => return Ok(out),
            Err(StreamError::LastOperationFailed(e)) => return Err(e.to_debug_string().into()),
        }
    }
}

/// The request's bytes, whole; the API decodes them (strictly, as UTF-8).
fn request_body(req: &IncomingRequest) -> Result<Vec<u8>, Unread> {
    let body = req
        .consume()
        .map_err(|()| Unread::from(String::from("the body was taken")))?;
    let bytes = {
        let stream = body
            .stream()
            .map_err(|()| Unread::from(String::from("the body has no stream")))?;
        read_all(&stream)?
    };
    drop(IncomingBody::finish(body));
    Ok(bytes)
}

fn write_body(body: &OutgoingBody, bytes: &[u8]) -> Result<(), String> {
    let stream = body
        .write()
        .map_err(|()| String::from("the body stream was taken"))?;
    for chunk in bytes.chunks(4096) {
        stream
            .blocking_write_and_flush(chunk)
            .map_err(|e| format!("{e:?}"))?;
    }
    Ok(())
}

fn respond(out: ResponseOutparam, r: Response) {
    let mut headers: Vec<(String, Vec<u8>)> = Vec::new();
    if !r.content_type.is_empty() {
        headers.push(("content-type".into(), r.content_type.as_bytes().to_vec()));
    }
    if r.challenge {
        headers.push(("www-authenticate".into(), b"Bearer".to_vec()));
    }
    let fields = Fields::from_list(&headers).expect("constant header names are valid");
    let resp = OutgoingResponse::new(fields);
    resp.set_status_code(r.status)
        .expect("the API answers only valid status codes");
    let body = resp.body().expect("a new response has a body");
    ResponseOutparam::set(out, Ok(resp));
    // The client may have gone: nothing more to tell it, and the journal already holds
    // whatever was decided.
    let _ = write_body(&body, r.body.as_bytes());
    let _ = OutgoingBody::finish(body, None);
}

/// `scheme://authority/path?query` split for an outgoing request.
fn split_url(url: &str) -> Result<(Scheme, &str, &str), String> {
    let (scheme, rest) = if let Some(r) = url.strip_prefix("http://") {
        (Scheme::Http, r)
    } else if let Some(r) = url.strip_prefix("https://") {
        (Scheme::Https, r)
    } else {
        return Err(format!("not an http(s) URL: {url}"));
    };
    let at = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, path) = rest.split_at(at);
    Ok((scheme, authority, if path.is_empty() { "/" } else { path }))
}

fn method(m: &str) -> Method {
    match m {
        "GET" => Method::Get,
        "POST" => Method::Post,
        "PUT" => Method::Put,
        "PATCH" => Method::Patch,
        "DELETE" => Method::Delete,
        other => Method::Other(other.into()),
    }
}

/// The runtime as the API sees it: wasi:http out, the monotonic clock to sleep on.
struct WasiIo;

impl Io for WasiIo {
    fn fetch(&mut self, f: &Fetch) -> Result<Fetched, String> {
        let (scheme, authority, path) = split_url(&f.url)?;
        let headers: Vec<(String, Vec<u8>)> = f
            .headers
            .iter()
            .map(|(k, v)| (k.clone(), v.as_bytes().to_vec()))
            .collect();
        let fields = Fields::from_list(&headers).map_err(|e| format!("bad header: {e:?}"))?;
        let req = OutgoingRequest::new(fields);
        let bad = |what: &str| format!("{what} not accepted: {}", f.url);
        req.set_method(&method(&f.method))
            .map_err(|()| bad("method"))?;
        req.set_scheme(Some(&scheme)).map_err(|()| bad("scheme"))?;
        req.set_authority(Some(authority))
            .map_err(|()| bad("authority"))?;
        req.set_path_with_query(Some(path))
            .map_err(|()| bad("path"))?;
        let options = RequestOptions::new();
        if let Some(ms) = f.timeout_ms {
            let ns = ms.saturating_mul(1_000_000);
            // No answer within the send's timeout: the runtime gives up, the gate hears
            // `unknown`. Each is a whole-timeout bound; a runtime may refuse to set one.
            let _ = options.set_connect_timeout(Some(ns));
            let _ = options.set_first_byte_timeout(Some(ns));
            let _ = options.set_between_bytes_timeout(Some(ns));
        }
        let body = req.body().map_err(|()| String::from("no request body"))?;
        let pending = outgoing_handler::handle(req, Some(options)).map_err(|e| format!("{e:?}"))?;
        write_body(&body, f.body.as_deref().unwrap_or("").as_bytes())?;
        OutgoingBody::finish(body, None).map_err(|e| format!("{e:?}"))?;
        pending.subscribe().block();
        let resp = match pending.get() {
            Some(Ok(Ok(r))) => r,
            Some(Ok(Err(e))) => return Err(format!("{e:?}")),
            Some(Err(())) | None => return Err(String::from("no response")),
        };
        let status = resp.status();
        let body = resp
            .consume()
            .map_err(|()| String::from("the response body was taken"))?;
        let bytes = {
            let stream = body
                .stream()
                .map_err(|()| String::from("the response has no stream"))?;
            read_all(&stream).map_err(|u| u.problem)?
        };
        drop(IncomingBody::finish(body));
        Ok(Fetched {
            status,
            body: String::from_utf8_lossy(&bytes).into_owned(),
        })
    }

    fn sleep_ms(&mut self, ms: u64) {
        monotonic_clock::subscribe_duration(ms.saturating_mul(1_000_000)).block();
    }

    fn now_ms(&mut self) -> u64 {
        crate::now_ms()
    }
}

impl Guest for Component {
    fn handle(request: IncomingRequest, out: ResponseOutparam) {
        let method = match request.method() {
            Method::Get => String::from("GET"),
            Method::Post => String::from("POST"),
            Method::Put => String::from("PUT"),
            Method::Delete => String::from("DELETE"),
            Method::Patch => String::from("PATCH"),
            Method::Head => String::from("HEAD"),
            Method::Options => String::from("OPTIONS"),
            Method::Connect => String::from("CONNECT"),
            Method::Trace => String::from("TRACE"),
            Method::Other(m) => m,
        };
        let target = request.path_with_query().unwrap_or_default();
        let path = String::from(target.split('?').next().unwrap_or(""));
        let headers: Vec<(String, String)> = request
            .headers()
            .entries()
            .into_iter()
            .filter_map(|(k, v)| Some((k.to_ascii_lowercase(), String::from_utf8(v).ok()?)))
            .collect();
        let authorization = headers
            .iter()
            .find(|(k, _)| k == "authorization")
            .map(|(_, v)| v.clone());
        let body = request_body(&request);
        drop(request);
        // The instance's one server (`http-api`'s), from the environment at first.
        let response = crate::api::with_api(|server| match body {
            Ok(body) => with_journal(|j| {
                http_api::run(
                    server,
                    j,
                    &mut WasiIo,
                    &Request {
                        method: &method,
                        path: &path,
                        authorization: authorization.as_deref(),
                        headers: &headers,
                        body: &body,
                    },
                )
            }),
            Err(u) => server.unreadable(&path, authorization.as_deref(), u.too_large, &u.problem),
        });
        respond(out, response);
    }
}
