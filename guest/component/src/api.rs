//! World `gate-api` (`--features api`): the gate's HTTP API (`interlock_core::http_api`)
//! as the `http-api` export, for a server that performs its own I/O (the Worker). World
//! `http-gate` (`--features http`) has it too, its settings from the environment.

use alloc::string::String;
use alloc::vec::Vec;
use core::cell::RefCell;

use crate::exports::interlock::gate::http_api as ha;
use crate::{now_ms, with_journal, Component};
use interlock_core::http_api as api;

/// The component's HTTP API server (one journal: this instance's), made by `configure`.
struct OneApi(RefCell<Option<api::Server>>);
unsafe impl Sync for OneApi {}
static API: OneApi = OneApi(RefCell::new(None));

pub(crate) fn with_api<R>(f: impl FnOnce(&mut api::Server) -> R) -> R {
    let mut slot = API.0.borrow_mut();
    f(slot.get_or_insert_with(first_server))
}

/// The server before `configure`: world http-gate reads its settings from the environment;
/// world gate-api answers 500 until it is configured.
fn first_server() -> api::Server {
    #[cfg(feature = "http")]
    return api::Server::new(api::Settings::from_env(crate::http::env));
    #[cfg(not(feature = "http"))]
    api::Server::new(Err(String::from(
        "not configured (http-api.configure was not called)",
    )))
}

fn api_step(s: api::ApiStep) -> ha::ApiStep {
    let next = match s.next {
        api::Next::Respond(r) => ha::Next::Respond(api_response(r)),
        api::Next::Fetch(f) => ha::Next::Fetch(ha::Fetch {
            method: f.method,
            url: f.url,
            headers: f.headers,
            body: f.body,
            timeout_ms: f.timeout_ms,
        }),
        api::Next::Sleep(ms) => ha::Next::Sleep(ms),
    };
    ha::ApiStep { id: s.id, next }
}

fn api_response(r: api::Response) -> ha::Response {
    ha::Response {
        status: r.status,
        content_type: String::from(r.content_type),
        body: r.body,
        challenge: r.challenge,
    }
}

impl ha::Guest for Component {
    fn configure(settings: Vec<(String, String)>) -> Result<(), String> {
        let get = |k: &str| {
            settings
                .iter()
                .find(|(n, _)| n == k)
                .map(|(_, v)| v.clone())
        };
        let parsed = api::Settings::from_env(get);
        let result = parsed.as_ref().map(|_| ()).map_err(Clone::clone);
        *API.0.borrow_mut() = Some(api::Server::new(parsed));
        result
    }
    fn handle(request: ha::Request) -> ha::ApiStep {
        let step = with_api(|s| {
            with_journal(|j| {
                s.handle(
                    j,
                    now_ms(),
                    &api::Request {
                        method: &request.method,
                        path: &request.path,
                        authorization: request.authorization.as_deref(),
                        headers: &request.headers,
                        body: &request.body,
                    },
                )
            })
        });
        api_step(step)
    }
    fn resume(id: u64, answer: Option<Result<ha::Fetched, String>>) -> ha::ApiStep {
        let answer = answer.map(|a| {
            a.map(|f| api::Fetched {
                status: f.status,
                body: f.body,
            })
        });
        api_step(with_api(|s| {
            with_journal(|j| s.resume(j, now_ms(), id, answer))
        }))
    }
    fn refusal(path: String, authorization: Option<String>) -> Option<ha::Response> {
        with_api(|s| s.refusal(&path, authorization.as_deref())).map(api_response)
    }
    fn abandon(id: u64) {
        with_api(|s| s.abandon(id))
    }
    fn unreadable(
        path: String,
        authorization: Option<String>,
        too_large: bool,
        problem: String,
    ) -> ha::Response {
        api_response(with_api(|s| {
            s.unreadable(&path, authorization.as_deref(), too_large, &problem)
        }))
    }
}
