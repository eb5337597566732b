//! A component that exports `iggy:connector/source@0.2.1` with `poll` of the wrong
//! type (it returns a `u32` where the contract has a batch). Ferry must refuse it and
//! name `poll`.

wit_bindgen::generate!({
    inline: r#"
        package iggy:connector@0.2.1;

        interface source {
            record error { message: string }
            variant batch-result { ack, nack(string) }

            open: func(config: string, committed-state: option<list<u8>>) -> result<_, error>;
            poll: func() -> result<option<u32>, error>;
            on-batch-result: func(id: u64, %result: batch-result);
            close: func();
        }

        world mistyped {
            export source;
        }
    "#,
});

use exports::iggy::connector::source::{BatchResult, Error, Guest};

struct Mistyped;

impl Guest for Mistyped {
    fn open(_config: String, _state: Option<Vec<u8>>) -> Result<(), Error> {
        Ok(())
    }

    fn poll() -> Result<Option<u32>, Error> {
        Ok(Some(7))
    }

    fn on_batch_result(_id: u64, _result: BatchResult) {}

    fn close() {}
}

export!(Mistyped);
