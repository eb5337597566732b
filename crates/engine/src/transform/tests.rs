//! Each transform on records, as Iggy's runtime applies it, and the pipeline's order.

use ferry_config::transforms::Transforms;
use serde_json::{Value, json};

use super::Pipeline;

fn transforms(text: &str) -> Transforms {
    #[derive(serde::Deserialize)]
    struct Holder {
        transforms: Transforms,
    }
    toml::from_str::<Holder>(text).unwrap().transforms
}

fn pipeline(text: &str) -> Pipeline {
    Pipeline::new(&transforms(text).0).expect("some transforms")
}

fn apply(pipeline: &Pipeline, record: Value) -> Value {
    let bytes = pipeline.apply(&serde_json::to_vec(&record).unwrap()).expect("a JSON object is transformed");
    serde_json::from_slice(&bytes).unwrap()
}

#[test]
fn no_transforms_is_no_pipeline() {
    assert!(Pipeline::new(&Transforms::default().0).is_none());
    let disabled = transforms("[transforms.add_fields]\nenabled = false\nfields = [{ key = \"a\", value.static = 1 }]");
    assert!(Pipeline::new(&disabled.0).is_none());
}

#[test]
fn fields_are_added_updated_by_condition_and_deleted() {
    let p = pipeline(
        r#"
[transforms.add_fields]
enabled = true
fields = [{ key = "source", value.static = "orders" }, { key = "id", value.static = { nested = [1, 2] } }]

[transforms.update_fields]
enabled = true
fields = [
  { key = "status", value.static = "seen", condition = "key_exists" },
  { key = "missing", value.static = "x", condition = "key_exists" },
  { key = "source", value.static = "never", condition = "key_not_exists" },
  { key = "fresh", value.static = true, condition = "key_not_exists" },
  { key = "always", value.static = 1.5 },
]

[transforms.delete_fields]
enabled = true
fields = ["secret", "not_there"]
"#,
    );
    let out = apply(&p, json!({"id": 7, "status": "new", "secret": "s3", "keep": null}));
    assert_eq!(
        out,
        json!({"id": {"nested": [1, 2]}, "status": "seen", "keep": null, "source": "orders", "fresh": true,
               "always": 1.5})
    );
}

#[test]
fn computed_values_are_worked_out_for_each_record() {
    let p = pipeline(
        r#"
[transforms.add_fields]
enabled = true
fields = [
  { key = "at", value.computed = "date_time" },
  { key = "ns", value.computed = "timestamp_nanos" },
  { key = "us", value.computed = "timestamp_micros" },
  { key = "ms", value.computed = "timestamp_millis" },
  { key = "s", value.computed = "timestamp_seconds" },
  { key = "v4", value.computed = "uuid_v4" },
  { key = "v7", value.computed = "uuid_v7" },
]
"#,
    );
    let before = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap();
    let (a, b) = (apply(&p, json!({})), apply(&p, json!({})));
    let after = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap();
    let at = a["at"].as_str().unwrap();
    assert!(at.ends_with("+00:00") && humantime::parse_rfc3339(&at.replace("+00:00", "Z")).is_ok(), "{at}");
    let ms = a["ms"].as_u64().unwrap();
    assert!(before.as_millis() as u64 <= ms && ms <= after.as_millis() as u64, "{ms}");
    // Each is worked out on its own, so a clock tick may fall between two of them.
    assert!(a["ns"].as_u64().unwrap() / 1_000_000 >= ms && a["us"].as_u64().unwrap() / 1_000 >= ms);
    assert!(a["s"].as_u64().unwrap() >= ms / 1000 && a["s"].as_u64().unwrap() <= after.as_secs());
    for (key, version) in [("v4", 4), ("v7", 7)] {
        let uuid = uuid::Uuid::parse_str(a[key].as_str().unwrap()).unwrap();
        assert_eq!(uuid.get_version_num(), version);
        assert_ne!(a[key], b[key], "a new {key} for every record");
    }
}

#[test]
fn filter_fields_keeps_by_name_key_and_value_patterns() {
    let keep_matching = pipeline(
        r#"
[transforms.filter_fields]
enabled = true
keep_fields = ["id"]
patterns = [
  { key_pattern.starts_with = "meta_" },
  { key_pattern.regex = "_at$", value_pattern = "is_string" },
  { value_pattern.between = [10, 20] },
  { key_pattern.exact = "flag", value_pattern.equals = true },
]
"#,
    );
    let record = json!({"id": 1, "meta_a": 0, "created_at": "2026", "updated_at": 5, "n": 15, "m": 15.5,
                        "big": 25, "flag": true, "other": "x"});
    assert_eq!(
        apply(&keep_matching, record.clone()),
        json!({"id": 1, "meta_a": 0, "created_at": "2026", "n": 15, "m": 15.5, "flag": true}),
        "integers are numbers too (Iggy's runtime compares floats only)"
    );

    let drop_matching = pipeline(
        r#"
[transforms.filter_fields]
enabled = true
keep_fields = ["meta_keep"]
include_matching = false
patterns = [{ key_pattern.contains = "meta" }, { value_pattern.regex = "^x" }, { value_pattern.greater_than = 20 }]
"#,
    );
    assert_eq!(
        apply(&drop_matching, json!({"meta_a": 1, "meta_keep": 2, "other": "x", "n": 15, "big": 25})),
        json!({"meta_keep": 2, "n": 15})
    );
}

#[test]
fn unwrap_envelope_replaces_the_record_and_other_records_pass_unchanged() {
    let p = pipeline(
        r#"
[transforms.unwrap_envelope]
enabled = true
field = "data"

[transforms.add_fields]
enabled = true
fields = [{ key = "unwrapped", value.static = true }]
"#,
    );
    // In the order written: unwrapped first, then the field added to what was inside.
    assert_eq!(apply(&p, json!({"data": {"a": 1}, "meta": 2})), json!({"a": 1, "unwrapped": true}));
    // No envelope field: the record stays, and is still transformed.
    assert_eq!(apply(&p, json!({"a": 1})), json!({"a": 1, "unwrapped": true}));
    // What is inside need not be an object: the field transforms after it leave it.
    assert_eq!(apply(&p, json!({"data": [1, 2]})), json!([1, 2]));
    // Not JSON, or not an object: unchanged, as in Iggy.
    for record in [&b"plain text"[..], b"[1,2]", b"42", b"{\"a\": "] {
        assert_eq!(p.apply(record), None, "{}", String::from_utf8_lossy(record));
    }
}

mod schemas {
    //! Stream schemas and converting transforms in a chain: what cannot be read is
    //! reported by its index in the batch, never dropped unsaid.

    use std::collections::HashMap;

    use ferry_config::schema::Schema;
    use ferry_contract::Uint128;
    use serde_json::{Value, json};

    use super::transforms;
    use crate::sink::input::{SinkBatch, StoredMessage};
    use crate::transform::codec::Codec;
    use crate::transform::{Chain, Schemas};

    const POINT: &str = r#"{"type": "record", "name": "P", "fields": [{"name": "x", "type": "long"}]}"#;

    fn avro() -> Codec {
        Codec::new(Schema::Avro, Some(POINT)).unwrap().unwrap()
    }

    fn stored(offset: u64, payload: Vec<u8>) -> StoredMessage {
        StoredMessage {
            offset,
            id: Uint128::from(u128::from(offset)),
            timestamp: 0,
            origin_timestamp: None,
            headers: vec![],
            payload,
        }
    }

    fn block_on<F: std::future::Future>(future: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(future)
    }

    #[test]
    fn a_sinks_records_are_decoded_by_their_topics_schema_and_an_undecodable_one_is_reported() {
        let datum = |x: i64| avro().encode(json!({"x": x}).to_string().as_bytes()).unwrap().unwrap();
        let codecs = HashMap::from([(("s".to_string(), "t".to_string()), avro())]);
        let chain = Chain::new(
            Schemas::Decode(codecs),
            &transforms(
                "[transforms.add_fields]\nenabled = true\nfields = [{ key = \"seen\", value.static = true }]\n\
                 [transforms.proto_convert]\nenabled = true\nsource_format = \"json\"\ntarget_format = \"proto\"",
            ),
            |_| unreachable!("no components"),
        )
        .unwrap()
        .unwrap();
        let batch = SinkBatch {
            stream: "s".into(),
            topic: "t".into(),
            partition: 1,
            messages: vec![stored(10, datum(1)), stored(11, datum(2)), stored(12, vec![0xff]), stored(13, datum(4))],
        };
        let out = block_on(chain.batch(&batch)).unwrap();
        assert_eq!(out.dropped, 0);
        assert_eq!(out.rejected.len(), 1);
        assert_eq!(out.rejected[0].0, 2, "the index in the batch");
        assert!(out.rejected[0].1.starts_with("not avro as its stream's schema says"), "{}", out.rejected[0].1);
        let offsets: Vec<u64> = out.records.messages.iter().map(|m| m.offset).collect();
        assert_eq!(offsets, [10, 11, 13], "the others go on with their offsets");
        // Decoded, transformed, then converted to a protobuf Any holding the JSON.
        use prost::Message as _;
        let any = prost_types::Any::decode(out.records.messages[2].payload.as_slice()).unwrap();
        assert_eq!(serde_json::from_slice::<Value>(&any.value).unwrap(), json!({"x": 4, "seen": true}));

        // Another topic has no schema: its records pass as they are.
        let other = SinkBatch { topic: "u".into(), messages: vec![stored(0, br#"{"x": 1}"#.to_vec())], ..batch };
        let out = block_on(chain.batch(&other)).unwrap();
        assert!(out.rejected.is_empty());
        let any = prost_types::Any::decode(out.records.messages[0].payload.as_slice()).unwrap();
        assert_eq!(serde_json::from_slice::<Value>(&any.value).unwrap(), json!({"x": 1, "seen": true}));
    }

    #[test]
    fn a_sources_records_are_encoded_last_and_one_that_does_not_fit_is_reported() {
        let chain = Chain::new(
            Schemas::Encode(avro()),
            &transforms(
                "[transforms.avro_convert]\nenabled = true\nsource_format = \"json\"\ntarget_format = \"json\"\n\
                 field_mappings = { seq = \"x\" }",
            ),
            |_| unreachable!("no components"),
        )
        .unwrap()
        .unwrap();
        let message = |payload: &str| ferry_contract::Message {
            id: None,
            headers: vec![],
            payload: payload.as_bytes().to_vec().into(),
            origin_timestamp: None,
        };
        let out = block_on(chain.messages(vec![message(r#"{"seq": 5}"#), message(r#"{"seq": "five"}"#)])).unwrap();
        assert_eq!(out.rejected.len(), 1);
        assert_eq!(out.rejected[0].0, 1);
        assert!(out.rejected[0].1.starts_with("not encodable as avro"), "{}", out.rejected[0].1);
        let decoded = avro().decode(&out.records[0].payload).unwrap().unwrap();
        assert_eq!(serde_json::from_slice::<Value>(&decoded).unwrap(), json!({"x": 5}), "renamed, then encoded");
    }
}
