//! A transform for Ferry's own tests, on `{"seq":N}` records (the faulty and random
//! sources'), configured by its `plugin_config` to misbehave on purpose:
//!
//! * `tag = "..."`: add the field `"tag"` with this value to every record;
//! * `drop_multiples_of = N`: drop every record whose `seq` is a multiple of `N`;
//! * `fail_on_seq = N` (with `fail_times = K`, default 1): answer an error for the
//!   batch holding `seq` N, the first K times this instance sees it;
//! * `trap_on_call = N`: trap on this instance's N-th call (every fresh instance
//!   counts again, so a chain with it makes progress between traps);
//! * `answer_one_less = true`: answer one entry too few (a bug the host must catch).
//!
//! It implements the interface with the raw bindings rather than the SDK's
//! `Transform`, so that it can break the rule of one entry per record.

use ferry_guest::bindings::iggy::connector::types::Error;
use ferry_guest::bindings::transform::exports::iggy::connector::transform::{Guest, Incoming, Outgoing};
use serde::Deserialize;
use std::cell::RefCell;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct Config {
    tag: Option<String>,
    drop_multiples_of: Option<u64>,
    fail_on_seq: Option<u64>,
    #[serde(default = "one")]
    fail_times: u32,
    trap_on_call: Option<u64>,
    #[serde(default)]
    answer_one_less: bool,
}

fn one() -> u32 {
    1
}

#[derive(Default)]
struct State {
    config: Config,
    calls: u64,
    failures: u32,
}

thread_local! {
    static STATE: RefCell<State> = RefCell::new(State::default());
}

struct FaultyTransform;

impl Guest for FaultyTransform {
    fn open(config: String) -> Result<(), Error> {
        let config: Config =
            serde_json::from_str(&config).map_err(|e| Error { message: format!("invalid plugin_config: {e}") })?;
        STATE.with(|state| state.borrow_mut().config = config);
        Ok(())
    }

    fn transform(records: Vec<Incoming>) -> Result<Vec<Option<Outgoing>>, Error> {
        STATE.with(|state| {
            let mut state = state.borrow_mut();
            state.calls += 1;
            if state.config.trap_on_call == Some(state.calls) {
                panic!("trapping on call {} as configured", state.calls);
            }
            let seq_of = |payload: &[u8]| {
                serde_json::from_slice::<serde_json::Value>(payload).ok().and_then(|v| v["seq"].as_u64())
            };
            if let Some(fail) = state.config.fail_on_seq
                && state.failures < state.config.fail_times
                && records.iter().any(|r| seq_of(&r.payload) == Some(fail))
            {
                state.failures += 1;
                return Err(Error { message: format!("refusing the batch with seq {fail} as configured") });
            }
            let mut out: Vec<Option<Outgoing>> = records
                .into_iter()
                .map(|record| {
                    let Ok(mut value) = serde_json::from_slice::<serde_json::Value>(&record.payload) else {
                        // Not JSON: passed on as it is.
                        let Incoming { headers, payload, origin_timestamp, .. } = record;
                        return Some(Outgoing { headers, payload, origin_timestamp });
                    };
                    let seq = value["seq"].as_u64();
                    if let (Some(n), Some(seq)) = (state.config.drop_multiples_of, seq)
                        && seq % n == 0
                    {
                        return None;
                    }
                    if let Some(tag) = &state.config.tag {
                        value["tag"] = tag.clone().into();
                    }
                    Some(Outgoing {
                        headers: record.headers,
                        payload: serde_json::to_vec(&value).unwrap(),
                        origin_timestamp: record.origin_timestamp,
                    })
                })
                .collect();
            if state.config.answer_one_less {
                out.pop();
            }
            Ok(out)
        })
    }
}

ferry_guest::bindings::transform::__export_transform_component!(FaultyTransform with_types_in ferry_guest::bindings::transform);
